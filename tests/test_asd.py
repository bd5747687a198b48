"""Active speaker detection: the mouth-motion cue, its attachment to tracks, and its storage."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3agent.domain import BBox, Clip, ClipMedia, EntityKind, FaceObservation, FaceTrack, Frame, Video
from m3agent.perception.asd import motion_between, mouth_motion, with_mouth_motion
from store_helpers import new_store

BOX = BBox(40, 40, 140, 140)
RNG = np.random.default_rng(5)


def textured() -> np.ndarray:
    return RNG.integers(0, 255, (200, 200, 3), dtype=np.uint8)


def with_new_mouth(image: np.ndarray) -> np.ndarray:
    out = image.copy()
    out[110:136, 70:110] = RNG.integers(0, 255, (26, 40, 3), dtype=np.uint8)  # lower middle of BOX
    return out


def test_mouth_change_alone_scores_high_and_a_head_move_does_not() -> None:
    image = textured()
    talking = motion_between(image, with_new_mouth(image), BOX)
    moved = motion_between(image, np.roll(image, 6, axis=1), BOX)  # the whole head shifts
    still = motion_between(image, image, BOX)
    assert talking is not None and moved is not None and still is not None
    assert talking > 0.3
    assert abs(moved) < 0.1 and still == 0.0


def test_a_box_too_small_to_hold_a_mouth_gives_no_value() -> None:
    image = textured()
    assert motion_between(image, image, BBox(10, 10, 14, 14)) is None


def observation(t: float, track: int = 0) -> FaceObservation:
    return FaceObservation(clip_index=0, time_s=t, bbox=BOX, det_score=0.99, track=track)


def test_motion_is_measured_between_consecutive_samples_of_a_track_and_set_on_the_later_one() -> None:
    base = textured()
    speaking = with_new_mouth(base)
    images = {0.0: base, 0.5: speaking, 1.0: speaking, 2.5: base}
    media = ClipMedia(Clip("v", 0, 0.0, 3.0), tuple(Frame(t, img) for t, img in images.items()), audio=None)
    obs = tuple(observation(t) for t in images)
    track = FaceTrack(0, 0, obs, (obs[0],))
    motions = mouth_motion(media, [track], fps=2.0)
    assert [(m.start_s, m.end_s) for m in motions] == [(0.0, 0.5), (0.5, 1.0)], "1.0 -> 2.5 is no consecutive pair"
    assert motions[0].motion > 0.3 and motions[1].motion == 0.0
    [tagged] = with_mouth_motion([track], motions)
    assert [o.mouth_motion for o in tagged.observations] == [None, motions[0].motion, motions[1].motion, None]
    assert tagged.best[0].mouth_motion is None


def test_mouth_motion_is_stored_and_read_back_for_linking(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.add_video(Video("v", "v.mp4", 30.0))
    with store.clip(Clip("v", 0, 0.0, 30.0)) as writer:
        face = writer.add_entity(EntityKind.FACE, [np.ones(4, dtype=np.float32)])
        writer.add_face(FaceObservation(0, 1.0, BOX, 0.9, entity_id=face.id, mouth_motion=0.25))
        writer.add_face(FaceObservation(0, 1.5, BOX, 0.9, entity_id=face.id))
    assert store.mouth_motions("v") == [(1.0, face.id, 0.25)]
    assert [f.mouth_motion for f in store.faces("v")] == [0.25, None]
    store.close()


def test_grey_frames_are_measured_like_colour_ones() -> None:
    image = textured()
    talking = with_new_mouth(image)
    colour = motion_between(image, talking, BOX)
    grey = motion_between(image.mean(axis=2).astype(np.uint8), talking.mean(axis=2).astype(np.uint8), BOX)
    assert colour is not None and grey is not None and abs(colour - grey) < 0.1
