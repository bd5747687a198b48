"""The perception-only writer turns tracks and speech into tagged, timed memories."""

from __future__ import annotations

from m3agent import tags
from m3agent.domain import BBox, Clip, FaceObservation, FaceTrack, MemoryKind, VoiceSegment
from m3agent.memorize.perception_writer import write_clip

CLIP = Clip("vid", 2, 60.0, 90.0)


def track(entity: int, times: list[float], number: int) -> FaceTrack:
    obs = tuple(FaceObservation(clip_index=2, time_s=t, bbox=BBox(0, 0, 50, 50), det_score=0.99, track=number,
                                entity_id=entity) for t in times)
    return FaceTrack(clip_index=2, track=number, observations=obs, best=obs[:1])


def test_presence_together_and_speech() -> None:
    tracks = [track(3, [60.0 + i / 2 for i in range(20)], 0), track(30, [65.0 + i / 2 for i in range(10)], 1)]
    voices = [VoiceSegment(clip_index=2, start_s=61.0, end_s=64.5, text="We need to cut the budget.", entity_id=7)]
    memories = write_clip(CLIP, tracks, voices, fps=2.0)
    texts = [m.text for m in memories]
    assert any(t.startswith("<face_3> is on screen from 1:00 to 1:09") for t in texts)
    assert any("<face_3> and <face_30> appear on screen together" in t for t in texts)
    speech = [m for m in memories if "budget" in m.text]
    assert len(speech) == 1 and speech[0].entity_ids == (7,) and speech[0].start_s == 61.0
    assert all(m.video_id == "vid" and m.clip_index == 2 and m.kind == MemoryKind.EPISODIC for m in memories)
    for memory in memories:
        assert set(memory.entity_ids) == set(tags.entity_ids(memory.text))


def test_gaps_split_presence_intervals() -> None:
    times = [60.0, 60.5, 61.0, 80.0, 80.5]
    memories = write_clip(CLIP, [track(4, times, 0)], [], fps=2.0)
    assert memories[0].text.startswith("<face_4> is on screen from 1:00 to 1:01, 1:20 to 1:20")


def test_self_introductions_become_semantic_names() -> None:
    voices = [VoiceSegment(clip_index=2, start_s=70, end_s=72, text="Hi, my name is Ann Lee and I'm glad", entity_id=9)]
    semantic = [m for m in write_clip(CLIP, [], voices, fps=2.0) if m.kind == MemoryKind.SEMANTIC]
    assert [m.text for m in semantic] == ["<voice_9>'s name is Ann Lee."]
