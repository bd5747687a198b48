"""Active speaker detection: the mouth-motion cues (2 fps and video rate), their attachment to tracks, storage."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3agent.domain import BBox, Clip, ClipMedia, EntityKind, FaceObservation, FaceTrack, Frame, MouthMotion, Video
from m3agent.perception.asd import flow_motion, motion_between, mouth_motion, with_mouth_motion
from m3agent.perception.asd_video import Interval, interval_medians, sampling_intervals
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


def smooth_texture() -> np.ndarray:
    """Blurred noise: texture optical flow can follow (white noise has no motion a flow field can track)."""
    import cv2

    noise = RNG.integers(0, 255, (200, 200), dtype=np.uint8)
    return np.asarray(cv2.GaussianBlur(noise, (0, 0), 3.0) * 3 - 255, dtype=np.float32).clip(0, 255).astype(np.uint8)


def test_flow_sees_the_lips_move_and_not_the_head() -> None:
    image = smooth_texture()
    lips = image.copy()
    lips[100:140, 60:120] = image[97:137, 60:120]  # the lower middle of BOX moves down 3 px
    talking = flow_motion(image, lips, BOX)
    head = flow_motion(image, np.roll(image, 3, axis=0), BOX)  # the whole face moves 3 px
    assert talking is not None and head is not None
    assert talking > 1.0 and head < 0.3 * talking
    assert flow_motion(image, image, BOX) == 0.0, "a still picture is exactly 0 (linking's frozen faces)"
    assert flow_motion(image, lips, BBox(10, 10, 14, 14)) is None


def test_each_sampling_interval_gets_the_median_of_its_frame_pairs() -> None:
    a, b, c = observation(1.0), observation(1.5), observation(2.0)
    intervals = sampling_intervals([FaceTrack(0, 0, (a, b, c), (a,))], fps=2.0)
    assert [(iv.before.time_s, iv.after.time_s) for iv in intervals] == [(1.0, 1.5), (1.5, 2.0)]
    pairs = [MouthMotion(0, 1.0 + 0.1 * k, 1.1 + 0.1 * k, v) for k, v in enumerate([0.1, 0.2, 5.0, 0.3, 0.2])]
    pairs.append(MouthMotion(0, 1.5, 1.6, 9.0))  # one pair alone gives no value to the second interval
    assert [(m.start_s, m.end_s, m.motion) for m in interval_medians(pairs, intervals)] == [(1.0, 1.5, 0.2)]


def test_the_box_between_two_samples_is_interpolated() -> None:
    before = FaceObservation(0, 1.0, BBox(0, 0, 100, 100), 0.9, track=0)
    after = FaceObservation(0, 1.5, BBox(10, 20, 110, 120), 0.9, track=0)
    box = Interval(0, before, after).box_at(1.25)
    assert (box.x1, box.y1, box.x2, box.y2) == (5, 10, 105, 110)


def test_a_file_is_decoded_again_only_inside_the_windows_asked_for(media_dir: Path) -> None:
    from m3agent.media import iter_clips
    from m3agent.media.luma import luma_frames
    from m3agent.settings import MediaSettings

    video = media_dir / "video" / "iianet_debate_trump_clinton.mp4"
    clip = next(iter_clips(video, MediaSettings(clip_seconds=5.0)))
    assert clip.source is not None and clip.source.path == str(video)
    frames = list(luma_frames(clip.source, [(1.0, 2.0), (3.5, 4.0)], max_fps=25.0))
    times = [f.time_s for f in frames]
    assert all(1.0 - 1e-3 <= t <= 2.0 + 1e-3 or 3.5 - 1e-3 <= t <= 4.0 + 1e-3 for t in times)
    assert 35 <= len(frames) <= 40, "25 fps video: every frame of 1.5 s"
    assert frames[0].image.shape == (1080, 1920), "luma at the file's own resolution"
    sparse = list(luma_frames(clip.source, [(1.0, 2.0)], max_fps=10.0))
    assert 9 <= len(sparse) <= 11
    sampled = {round(f.time_s, 3) for f in clip.frames}
    assert sampled & {round(t, 3) for t in times}, "the clip's sampled frames have the same times"


def test_frames_for_lip_motion_skip_deblocking_and_stay_close_to_the_full_decode(media_dir: Path) -> None:
    """The decoder's loop filter is skipped (a fifth of an H.264 decode): the grey images differ from a full
    decode, but by a grey level or so, which the mouth's optical flow does not notice (docs/benchmarks.md)."""
    import av
    import numpy as np

    from m3agent.media import iter_clips
    from m3agent.media.luma import _luma, luma_frames
    from m3agent.settings import MediaSettings

    video = media_dir / "video" / "iianet_debate_trump_clinton.mp4"
    clip = next(iter_clips(video, MediaSettings(clip_seconds=5.0)))
    assert clip.source is not None
    fast = {round(f.time_s, 3): f.image for f in luma_frames(clip.source, [(0.0, 2.0)], max_fps=25.0)}
    full: dict[float, np.ndarray] = {}
    with av.open(str(video)) as container:
        for frame in container.decode(video=0):
            if frame.time is not None and frame.time <= 2.0:
                full[round(float(frame.time), 3)] = _luma(frame).copy()
    shared = sorted(set(fast) & set(full))
    assert len(shared) >= 45
    gaps = [float(np.abs(fast[t].astype(np.int16) - full[t]).mean()) for t in shared]
    assert max(gaps) > 0, "the deblocking filter was not skipped"
    assert max(gaps) < 2.0


def test_a_clip_that_cannot_be_decoded_again_gets_the_2_fps_cue() -> None:
    from m3agent.perception.asd_video import active_speaker
    from m3agent.settings import load_settings

    base = textured()
    images = {0.0: base, 0.5: with_new_mouth(base)}
    media = ClipMedia(Clip("v", 0, 0.0, 1.0), tuple(Frame(t, img) for t, img in images.items()),
                      audio=np.zeros(16000, dtype=np.float32), width=200, height=200)  # no source: a live stream
    obs = tuple(observation(t) for t in images)
    track = FaceTrack(0, 0, obs, (obs[0],))
    [tagged] = active_speaker(media, [track], load_settings())
    assert [o.mouth_motion for o in tagged.observations] == [None, mouth_motion(media, [track], 2.0)[0].motion]
