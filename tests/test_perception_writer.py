"""The perception-only writer turns tracks and speech into tagged, timed memories."""

from __future__ import annotations

from m3agent import tags
from m3agent.domain import BBox, Clip, FaceObservation, FaceTrack, MemoryKind, Shot, VoiceSegment
from m3agent.memorize.perception_writer import write_clip

CLIP = Clip("vid", 2, 60.0, 90.0)
SMALL = BBox(0, 0, 50, 50)


def track(entity: int, times: list[float], number: int, box: BBox = SMALL) -> FaceTrack:
    obs = tuple(FaceObservation(clip_index=2, time_s=t, bbox=box, det_score=0.99, track=number,
                                entity_id=entity) for t in times)
    return FaceTrack(clip_index=2, track=number, observations=obs, best=obs[:1])


def test_presence_and_speech_without_pairwise_sentences() -> None:
    tracks = [track(3, [60.0 + i / 2 for i in range(20)], 0), track(30, [65.0 + i / 2 for i in range(10)], 1)]
    voices = [VoiceSegment(clip_index=2, start_s=61.0, end_s=64.5, text="We need to cut the budget.", entity_id=7)]
    memories = write_clip(CLIP, tracks, voices, fps=2.0)
    texts = [m.text for m in memories]
    assert "<face_3> is on screen 1:00–1:09." in texts
    assert "<face_30> is on screen 1:05–1:09." in texts
    assert not any("together" in t for t in texts)  # co-presence is a graph relation, not n(n-1)/2 sentences
    speech = [m for m in memories if "budget" in m.text]
    assert len(speech) == 1 and speech[0].entity_ids == (7,) and speech[0].start_s == 61.0
    assert all(m.video_id == "vid" and m.clip_index == 2 and m.kind == MemoryKind.EPISODIC for m in memories)
    for memory in memories:
        assert set(memory.entity_ids) == set(tags.entity_ids(memory.text))


def test_gaps_split_presence_intervals() -> None:
    times = [60.0, 60.5, 61.0, 80.0, 80.5]
    memories = write_clip(CLIP, [track(4, times, 0)], [], fps=2.0)
    assert memories[0].text == "<face_4> is on screen 1:00–1:01, at 1:20."


def test_one_presence_per_person_per_shot_with_the_place() -> None:
    left, right = BBox(40, 100, 140, 220), BBox(520, 100, 620, 220)
    tracks = [track(1, [60.0 + i / 2 for i in range(40)], 0, left),   # seen through both shots, on the left
              track(2, [75.0 + i / 2 for i in range(10)], 1, right),  # second shot only, on the right
              track(3, [76.0, 76.5, 77.0], 2, BBox(300, 100, 330, 130))]  # small: behind the others
    shots = (Shot(60.0, 74.0, cut=False), Shot(74.0, 90.0, cut=True))
    texts = [m.text for m in write_clip(CLIP, tracks, [], fps=2.0, shots=shots, frame_size=(640, 360))]
    assert texts == ["<face_1> is on screen 1:00–1:13, on the left.",
                     "<face_1> is on screen 1:14–1:19, on the left.",
                     "<face_2> is on screen 1:15–1:19, on the right.",
                     "<face_3> is on screen 1:16–1:17, in the centre, in the background."]


def test_self_introductions_become_semantic_names() -> None:
    voices = [VoiceSegment(clip_index=2, start_s=70, end_s=72, text="Hi, my name is Ann Lee and I'm glad", entity_id=9)]
    semantic = [m for m in write_clip(CLIP, [], voices, fps=2.0) if m.kind == MemoryKind.SEMANTIC]
    assert [m.text for m in semantic] == ["<voice_9>'s name is Ann Lee."]
