"""Whose lips move with a voice no face is linked to (:mod:`m3agent.graph.lips`): the sampling interval read from
the sightings, the margin a "most likely" answer needs, and the evidence recomputed from a real store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from m3agent.graph.lips import (
    LIKELY_MARGIN,
    LIKELY_MIN_R,
    LISTENER_R,
    MOVING_MARGIN,
    MOVING_MIN_SAMPLES,
    OtherSpeaker,
    by_elimination,
    likely_speaker,
    moving_speaker,
    sampling_interval,
    video_lip_sync,
)
from m3agent.graph.values import Person
from m3agent.identity.linking import LipSync

LEFT, RIGHT, VOICE = Person(1, "<character_1>", "", (1,), ()), Person(2, "<character_2>", "", (2,), ()), \
    Person(3, "<character_3>", "", (), (7,))


def sync(**rs: float) -> dict[tuple[int, int], LipSync]:
    faces = {"left": 1, "right": 2}
    return {(faces[side], 7): LipSync(r, 20, 8.0) for side, r in rs.items()}


def test_the_face_whose_lips_move_with_the_voice_clearly_more_is_the_likely_speaker() -> None:
    likely = likely_speaker(sync(left=-0.2, right=0.35), VOICE, [LEFT, RIGHT])
    assert likely is not None and likely.person == RIGHT and likely.r == 0.35 and likely.runner_up == (LEFT, -0.2)
    assert likely_speaker(sync(left=0.3, right=0.3 - LIKELY_MARGIN / 2), VOICE, [LEFT, RIGHT]) is None  # alike
    assert likely_speaker(sync(left=LIKELY_MIN_R - 0.01, right=-0.3), VOICE, [LEFT, RIGHT]) is None  # under the floor
    assert likely_speaker(sync(right=0.5), VOICE, [LEFT, RIGHT]) is None  # one face watched: no comparison
    assert likely_speaker({}, VOICE, [LEFT, RIGHT]) is None


def test_the_sampling_interval_is_read_from_the_sightings() -> None:
    assert sampling_interval([(0.0, 1), (0.5, 1), (1.0, 1), (0.0, 2), (0.5, 2), (3.0, 2)]) == 0.5
    assert sampling_interval([(0.0, 1), (0.0, 2)]) is None


def test_the_evidence_is_what_identity_reads_from_the_store(make_store: Callable[[], Any]) -> None:
    from m3agent.domain import BBox, Clip, EntityKind, FaceObservation, Video, VoiceSegment

    store = make_store()
    store.add_video(Video("v1", "/v1.mp4", 30.0))
    with store.clip(Clip("v1", 0, 0.0, 30.0)) as w:
        left, right = w.add_entity(EntityKind.FACE, [[1.0, 0.0]]).id, w.add_entity(EntityKind.FACE, [[0.0, 1.0]]).id
        voice = w.add_entity(EntityKind.VOICE, [[1.0, 1.0]]).id
        for k in range(40):  # 20 s at 2 fps; the right face's mouth moves while the voice speaks (every other 2 s)
            t = k / 2
            speaking = int(t // 2) % 2 == 0
            w.add_face(FaceObservation(0, t, BBox(100, 100, 200, 200), 0.99, entity_id=left, mouth_motion=1.0))
            w.add_face(FaceObservation(0, t, BBox(900, 100, 1000, 200), 0.99, entity_id=right,
                                       mouth_motion=8.0 if speaking else 1.0 + (k % 3) * 0.1))
        for start in range(0, 20, 4):
            w.add_voice(VoiceSegment(0, float(start), float(start) + 2.0, "words", entity_id=voice))
    pairs = video_lip_sync(store, "v1")
    assert pairs[(right, voice)].r > 0.5 and pairs[(right, voice)].samples >= 10
    assert pairs.get((left, voice)) is None or pairs[(left, voice)].r < 0.1  # a still mouth says nothing


def test_of_two_people_on_screen_the_one_not_ruled_out_speaks() -> None:
    """:func:`by_elimination`: a listener's lips move against the voice (they talk in its pauses), or the scene's other
    voice is the other person's; nothing is decided with three people on screen, with both claimed, or when the
    voice's own lips point at the one ruled out (a voice of theirs cut in two)."""
    other_voice = Person(4, "<character_4>", "", (), (8,))
    lips = {**sync(left=-0.05, right=-0.35), (2, 8): LipSync(0.4, 20, 8.0), (1, 8): LipSync(-0.1, 20, 8.0)}
    listened = by_elimination(sync(left=-0.05, right=-0.35), VOICE, [LEFT, RIGHT], [VOICE])
    assert listened == OtherSpeaker(LEFT, RIGHT, None, -0.05, -0.35)
    assert by_elimination(sync(left=-0.3, right=-0.35), VOICE, [LEFT, RIGHT], [VOICE]) is None  # alike
    assert by_elimination(sync(left=-0.05, right=-LISTENER_R + 0.05), VOICE, [LEFT, RIGHT], [VOICE]) is None
    claimed = by_elimination({**lips, **sync(left=-0.1, right=-0.15)}, VOICE, [LEFT, RIGHT], [VOICE, other_voice])
    assert claimed == OtherSpeaker(LEFT, RIGHT, other_voice, -0.1, -0.15)  # the other voice is the right one's
    own = Person(2, "<character_2>", "", (2,), (9,))  # the right one's own voice heard in the scene
    assert by_elimination({}, VOICE, [LEFT, own], [own, VOICE]) == OtherSpeaker(LEFT, own, own, None, None)
    assert by_elimination({**lips, **sync(left=-0.15, right=0.0)}, VOICE, [LEFT, RIGHT], [other_voice]) is None
    both = Person(1, "<character_1>", "", (1,), (10,))
    neither = {**lips, **sync(left=-0.1, right=-0.15)}
    assert by_elimination(neither, VOICE, [both, RIGHT], [VOICE, other_voice, both]) is None  # both claimed
    listener = by_elimination(lips, VOICE, [both, RIGHT], [VOICE, other_voice, both])
    assert listener is not None and listener.person == both  # the listener decides before the voices' claims
    third = Person(5, "<character_5>", "", (5,), ())
    assert by_elimination(sync(left=-0.05, right=-0.35), VOICE, [LEFT, RIGHT, third], [VOICE]) is None
    assert by_elimination(sync(left=-0.05, right=-0.35), LEFT, [LEFT, RIGHT], [VOICE]) is None  # a face's own voice


def motion(face: int, levels: list[float], start: float = 0.0) -> list[tuple[float, int, float]]:
    """One face's motion samples every half second from ``start``."""
    return [(start + 0.5 * (i + 1), face, level) for i, level in enumerate(levels)]


def test_the_face_whose_mouth_moves_most_above_its_own_usual_is_the_one_talking() -> None:
    """:func:`moving_speaker`: each face against its own median and spread in the shot, so a face whose motion is
    always higher (bigger, nearer) does not win by its level; nothing with one face, a still face, or no margin."""
    usual_left, usual_right = [4.0, 5.0, 6.0, 5.0, 4.0, 6.0, 5.0, 5.0], [15.0, 18.0, 21.0, 18.0, 15.0, 21.0, 18.0, 18.0]
    talking = motion(1, [*usual_left, 9.0, 10.0]) + motion(2, [*usual_right, 17.0, 18.0])  # left: 4.5 spreads above
    moving = moving_speaker(talking, [LEFT, RIGHT], (4.0, 5.0), (0.0, 5.0), 0.5)
    assert moving is not None and moving.person == LEFT and moving.runner_up[0] == RIGHT
    assert moving.lift > moving.runner_up[1] + MOVING_MARGIN
    alike = motion(1, [*usual_left, 5.0, 5.0]) + motion(2, [*usual_right, 18.0, 18.0])
    assert moving_speaker(alike, [LEFT, RIGHT], (4.0, 5.0), (0.0, 5.0), 0.5) is None
    assert moving_speaker(talking, [LEFT], (4.0, 5.0), (0.0, 5.0), 0.5) is None  # one face: no comparison
    still = motion(1, [*usual_left, 9.0, 10.0]) + motion(2, [0.0] * 10)
    assert moving_speaker(still, [LEFT, RIGHT], (4.0, 5.0), (0.0, 5.0), 0.5) is None  # a photo's face is no one
    few = [m for m in talking if m[1] == 2 or m[0] > 5.0 - 0.5 * (MOVING_MIN_SAMPLES - 1)]
    assert moving_speaker(few, [LEFT, RIGHT], (4.0, 5.0), (0.0, 5.0), 0.5) is None  # too little of the left's usual
