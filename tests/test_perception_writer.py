"""The perception-only writer turns tracks and speech into tagged, timed memories."""

from __future__ import annotations

from m3agent import tags
from m3agent.domain import BBox, Clip, FaceObservation, FaceTrack, MemoryKind, Shot, VoiceSegment
from m3agent.memorize.writers.perception import write_clip

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


def test_with_shots_the_summary_says_who_is_where_and_captions_join_their_speech() -> None:
    import numpy as np

    from m3agent.domain import ClipSenses, Frame, ScreenText
    from m3agent.memorize.inputs import ClipInput
    from m3agent.memorize.writers.perception import PerceptionWriter

    left, right = BBox(40, 100, 140, 220), BBox(520, 100, 620, 220)
    times = [60.0 + i / 2 for i in range(20)]
    tracks = (track(1, times, 0, left), track(2, times, 1, right))
    voices = (VoiceSegment(2, 61.0, 64.5, "If you were an effective senator you could have done it.", entity_id=7),
              VoiceSegment(2, 66.0, 69.0, "Why didn't you do it?", entity_id=8))
    texts = (ScreenText("if you were an effective senator", 61.5, 63.0, 0.99, SMALL, 3),  # restates <voice_7>
             ScreenText("you could have done it", 63.0, 64.5, 0.99, SMALL, 3),  # the rest of the same line
             ScreenText("PRESIDENTIAL DEBATE 2016", 60.0, 69.0, 0.99, SMALL, 9),  # said by nobody: its own
             ScreenText("why didn't you do it", 80.0, 81.0, 0.99, SMALL, 2))  # 11 s after it was said
    senses = ClipSenses(shots=(Shot(60.0, 70.0, cut=False), Shot(70.0, 90.0, cut=True)), texts=texts)
    frames = (Frame(60.0, np.zeros((360, 640, 3), np.uint8)),)
    out = PerceptionWriter().write(ClipInput(CLIP, tracks, voices, frames, senses=senses)).memories
    lines = [m.text for m in out]
    assert not any("is on screen" in t for t in lines), "the shot summary says it: no presence line repeats it"
    assert ('Shot 1:00–1:10: on screen <face_1> (on the left), <face_2> (on the right); speaking <voice_7>, '
            '<voice_8>; text "PRESIDENTIAL DEBATE 2016".') in lines
    assert ('At 1:01 <voice_7> says: "If you were an effective senator you could have done it." Captioned on '
            'screen: "if you were an effective senator"; "you could have done it".') in lines
    assert [t for t in lines if t.startswith("On screen")] == [
        'On screen 1:00–1:09: "PRESIDENTIAL DEBATE 2016"', 'On screen 1:20–1:21: "why didn\'t you do it"']


def test_a_short_or_unrelated_caption_is_not_merged() -> None:
    from m3agent.domain import ScreenText
    from m3agent.memorize.captions import spoken_captions
    from m3agent.memorize.utterances import Utterance

    said = [Utterance(7, "We need to cut the budget this year.", 61.0, 64.5, 1),
            Utterance(8, "Not the budget, the schools.", 64.6, 66.0, 1)]
    texts = (ScreenText("budget", 62.0, 63.0, 0.99, SMALL),  # one word matches anything
             ScreenText("SENATE HEARING ON EDUCATION", 61.0, 66.0, 0.99, SMALL),
             ScreenText("not the budget the schools", 64.0, 66.0, 0.99, SMALL))
    assert spoken_captions(texts, said) == {1: (texts[2],)}
