"""Face perception: detection, tracks, embeddings and clustering on real media and real models."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import BBox, Clip, ClipMedia, FaceTrack, Frame
from m3agent.errors import MediaError, MissingExtraError
from m3agent.perception.faces import (
    agglomerate,
    cluster_embeddings,
    faces_in_photo,
    load_rgb,
    pairwise_precision_recall,
    perceive_faces,
)
from m3agent.perception.faces.cluster import euclidean_distances
from m3agent.perception.faces.detect import FACE_DETECTORS, Detection, detect_faces
from m3agent.perception.faces.models import dlib_model_path, face_models, mtcnn_model_dir, require
from m3agent.perception.faces.perceive import as_rgb, choose_exemplars
from m3agent.perception.faces.quality import frontalness
from m3agent.perception.faces.track import link_tracks
from m3agent.settings import MediaSettings, PerceptionSettings

DEBATE = "video/iianet_debate_trump_clinton.mp4"
SETTINGS = PerceptionSettings()


# ---------------------------------------------------------------- pure logic (no media, no models)


def test_pairwise_precision_recall_counts_pairs() -> None:
    truth = ["a", "a", "a", "b", "b"]
    assert pairwise_precision_recall([0, 0, 0, 1, 1], truth) == (1.0, 1.0)
    # everything in one cluster: 4 true pairs of 10 put together
    precision, recall = pairwise_precision_recall([0] * 5, truth)
    assert (precision, recall) == (0.4, 1.0)
    # a split person: 1 of 3 "a" pairs kept
    precision, recall = pairwise_precision_recall([0, 0, 2, 1, 1], truth)
    assert precision == 1.0 and recall == pytest.approx(2 / 4)


def test_agglomerate_merges_close_items_and_respects_cannot_link() -> None:
    points = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    dist = euclidean_distances(points)
    assert agglomerate(dist, 0.5) == [0, 0, 0, 1, 1]
    # groups 0 and 2 seen in one frame: they stay apart, item 1 joins the nearer one
    assert agglomerate(dist, 0.5, cannot_link=[(0, 2)]) == [0, 0, 1, 2, 2]
    # initial groups are kept together even when far apart
    assert agglomerate(dist, 0.5, groups=[0, 1, 1, 3, 1])[1:3] == [1, 1]


def test_cluster_embeddings_is_deterministic_and_thresholded() -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 128)) * 0.3
    vectors = np.concatenate([c + rng.normal(size=(4, 128)) * 0.01 for c in centres])
    labels = cluster_embeddings(vectors, 0.5)
    assert labels == [0] * 4 + [1] * 4 + [2] * 4
    assert cluster_embeddings(vectors, 0.5) == labels
    assert len(set(cluster_embeddings(vectors, 1e-6))) == 12


def _det(x: float, y: float, size: float = 100.0) -> Detection:
    return Detection(BBox(x, y, x + size, y + size), 0.99, ())


def test_link_tracks_follows_two_moving_faces_without_swapping() -> None:
    # two faces moving toward each other by 0.6 face sizes per frame, then a gap frame, then back
    frames = [
        [_det(100, 100), _det(600, 100)],
        [_det(160, 100), _det(540, 100)],
        [_det(220, 110)],
        [_det(480, 100), _det(280, 110)],
    ]
    tracks = link_tracks(frames, [False] * 4)
    assert [t.members for t in tracks] == [[(0, 0), (1, 0), (2, 0), (3, 1)], [(0, 1), (1, 1), (3, 0)]]


def test_link_tracks_breaks_at_shot_cuts_and_far_jumps() -> None:
    frames = [[_det(100, 100)], [_det(110, 100)], [_det(900, 500)]]
    assert len(link_tracks(frames, [False, True, False])) == 3
    assert len(link_tracks(frames, [False, False, False])) == 2


def test_frontalness_prefers_frontal_upright_faces() -> None:
    box = BBox(0, 0, 100, 100)
    frontal = Detection(box, 1.0, ((30, 40), (70, 40), (50, 60), (35, 80), (65, 80)))
    turned = Detection(box, 1.0, ((30, 40), (60, 40), (68, 60), (45, 80), (70, 80)))
    rolled = Detection(box, 1.0, ((30, 30), (65, 55), (45, 60), (30, 75), (55, 90)))
    assert frontalness(frontal) > 0.9
    assert frontalness(turned) < 0.2
    assert frontalness(rolled) < frontalness(frontal) * 0.5


def test_choose_exemplars_is_total_and_prefers_spread_frames() -> None:
    members = [(0, 0), (1, 0), (2, 0), (5, 0)]
    quality = {(0, 0): 0.5, (1, 0): 0.9, (2, 0): 0.9, (5, 0): 0.1}
    assert choose_exemplars(members, quality, 2) == [(1, 0), (5, 0)]
    assert choose_exemplars(members, quality, 3) == [(1, 0), (5, 0), (2, 0)]


def test_as_rgb_converts_or_refuses_bad_frames() -> None:
    assert as_rgb(np.zeros((4, 5), np.uint8)).shape == (4, 5, 3)
    assert as_rgb(np.zeros((4, 5, 4), np.uint8)).shape == (4, 5, 3)
    with pytest.raises(MediaError):
        as_rgb(np.zeros((4, 5, 3), np.float32))
    with pytest.raises(MediaError):
        as_rgb(np.zeros((4, 5, 2), np.uint8))


def test_packaged_model_files_are_found_and_missing_packages_are_named() -> None:
    assert dlib_model_path("resnet").stat().st_size > 20_000_000
    assert dlib_model_path("shape5").is_file()
    assert (mtcnn_model_dir() / "onet.onnx").is_file()
    with pytest.raises(MissingExtraError) as info:
        require("surely_not_an_installed_module_xyz")
    assert "pip install" in info.value.hint
    assert face_models(2) is face_models(2)


# ---------------------------------------------------------------- real models, real media


def _clip(frames: list[Frame], index: int = 0) -> ClipMedia:
    end = frames[-1].time_s + 0.5 if frames else 1.0
    height, width = frames[0].image.shape[:2] if frames else (0, 0)
    return ClipMedia(Clip("test", index, 0.0, end), tuple(frames), None, width=width, height=height)


@pytest.fixture(scope="module")
def debate_clip(media_dir: Path) -> ClipMedia:
    from m3agent.media import iter_clips

    path = media_dir / DEBATE
    if not path.is_file():
        pytest.skip(f"{path} missing")
    clips = list(iter_clips(path, MediaSettings(clip_seconds=30.0)))
    assert len(clips) == 1
    return clips[0]


@pytest.fixture(scope="module")
def debate_tracks(debate_clip: ClipMedia) -> tuple[FaceTrack, ...]:
    return perceive_faces(debate_clip, SETTINGS)


def _frame_at(clip: ClipMedia, time_s: float) -> Frame:
    return min(clip.frames, key=lambda f: abs(f.time_s - time_s))


def _main_tracks(tracks: tuple[FaceTrack, ...], n_frames: int) -> list[FaceTrack]:
    return [t for t in tracks if len(t.observations) >= 0.8 * n_frames]


@pytest.mark.media
def test_detection_on_a_real_frame_finds_both_debaters(debate_clip: ClipMedia) -> None:
    frame = _frame_at(debate_clip, 3.5).image
    detector = FACE_DETECTORS.create("mtcnn", models=face_models(SETTINGS.threads))
    found = [d for d in detect_faces(frame, detector, min_face_px=40) if d.size > 100]
    assert len(found) == 2
    centres = sorted((d.bbox.x1 + d.bbox.x2) / 2 for d in found)
    width = frame.shape[1]
    assert centres[0] < width / 2 < centres[1]
    for det in found:
        assert det.score > 0.95 and len(det.landmarks) == 5
        (lx, ly), (rx, ry) = det.landmarks[:2]
        assert det.bbox.x1 <= lx < rx <= det.bbox.x2 and det.bbox.y1 <= min(ly, ry) <= det.bbox.y2


@pytest.mark.media
@pytest.mark.parametrize("backend", ["mtcnn", "hog"])
def test_photo_with_two_people_gives_two_different_identities(media_dir: Path, backend: str) -> None:
    image = load_rgb(media_dir / "faces/face_recognition/two_people.jpg")
    settings = PerceptionSettings(face_detector=backend)
    faces = faces_in_photo(image, settings)
    assert len(faces) == 2
    assert all(f.embedding.shape == (256,) and f.embedding.dtype == np.float32 for f in faces)
    assert float(np.linalg.norm(faces[0].embedding - faces[1].embedding)) > settings.face_photo_distance
    assert len(faces_in_photo(image, SETTINGS, largest_only=True)) == 1


@pytest.mark.media
def test_dlib_sface_descriptor_is_two_unit_halves_and_dlib_alone_keeps_its_thresholds(media_dir: Path) -> None:
    """The default descriptor is unit dlib beside unit SFace over sqrt(2); dlib alone is the 128-d
    descriptor with its own calibrated distances, unless a distance is set explicitly."""
    image = load_rgb(media_dir / "faces/face_recognition/two_people.jpg")
    both = faces_in_photo(image, SETTINGS, largest_only=True)[0].embedding
    dlib = faces_in_photo(image, PerceptionSettings(face_embedder="dlib"), largest_only=True)[0].embedding
    assert np.isclose(np.linalg.norm(both), 1.0, atol=1e-4)
    assert np.allclose(both[:128] * np.sqrt(2), dlib / np.linalg.norm(dlib), atol=1e-4)
    assert np.isclose(np.linalg.norm(both[128:]) * np.sqrt(2), 1.0, atol=1e-4)
    assert not np.allclose(both[128:], both[:128], atol=1e-2), "SFace found the face: its own view, not dlib's"
    assert dlib.shape == (128,)
    assert PerceptionSettings(face_embedder="dlib").face_match_distance == 0.4
    assert PerceptionSettings(face_embedder="dlib", face_match_distance=0.45).face_match_distance == 0.45
    assert PerceptionSettings().face_match_distance == 0.75


@pytest.mark.media
def test_debate_gives_two_persistent_identities_left_and_right(
    debate_clip: ClipMedia, debate_tracks: tuple[FaceTrack, ...]
) -> None:
    main = _main_tracks(debate_tracks, len(debate_clip.frames))
    assert len(main) == 2, [len(t.observations) for t in debate_tracks]
    half = debate_clip.width / 2
    sides = []
    for track in main:
        centres = [(o.bbox.x1 + o.bbox.x2) / 2 for o in track.observations]
        assert all(c < half for c in centres) or all(c >= half for c in centres)
        sides.append(centres[0] < half)
        # one observation per frame: a track never holds two faces of one frame
        assert len({o.time_s for o in track.observations}) == len(track.observations)
        assert all(o.track == track.track for o in track.observations)
    assert sorted(sides) == [False, True]
    left, right = main
    distance = np.linalg.norm(
        np.mean([o.embedding for o in left.best], axis=0) - np.mean([o.embedding for o in right.best], axis=0)
    )
    assert distance > SETTINGS.face_merge_distance


@pytest.mark.media
def test_best_observations_carry_embeddings_and_bounded_crops(debate_tracks: tuple[FaceTrack, ...]) -> None:
    import cv2

    assert [t.track for t in debate_tracks] == list(range(len(debate_tracks)))
    for track in debate_tracks:
        assert 1 <= len(track.best) <= 6
        assert [o.quality for o in track.best] == sorted((o.quality for o in track.best), reverse=True)
        for obs in track.best:
            assert obs.embedding is not None and obs.embedding.shape == (256,)
            assert obs.crop_jpeg is not None
            crop = cv2.imdecode(np.frombuffer(obs.crop_jpeg, np.uint8), cv2.IMREAD_COLOR)
            assert crop is not None and max(crop.shape[:2]) <= 160
        others = [o for o in track.observations if o not in track.best]
        assert all(o.embedding is None and o.crop_jpeg is None for o in others)


@pytest.mark.media
def test_frames_without_faces_give_no_tracks(debate_clip: ClipMedia) -> None:
    caption_strip = np.ascontiguousarray(_frame_at(debate_clip, 3.5).image[600:, :])  # captions, no faces
    blank = np.full((360, 640, 3), 128, np.uint8)
    frames = [Frame(0.0, caption_strip), Frame(0.5, caption_strip), Frame(1.0, blank)]
    assert perceive_faces(_clip(frames), SETTINGS) == ()
    assert perceive_faces(_clip([]), SETTINGS) == ()
    assert perceive_faces(_clip(frames), PerceptionSettings(faces=False)) == ()


@pytest.mark.media
def test_4k_frames_work_in_bounded_memory(debate_clip: ClipMedia) -> None:
    import cv2

    small = _frame_at(debate_clip, 3.5).image
    big = cv2.resize(small, (3840, 2160), interpolation=cv2.INTER_LINEAR)
    face_models(SETTINGS.threads).load()  # model loading is not what is measured
    tracemalloc.start()
    try:
        tracks = perceive_faces(_clip([Frame(0.0, big), Frame(0.5, big)]), SETTINGS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB for two 24 MiB frames"
    big_faces = [t for t in tracks if t.observations[0].bbox.height > 300]
    assert len(big_faces) == 2
    assert all(len(t.observations) == 2 for t in big_faces)
    scale = 3840 / small.shape[1]
    reference = [d.bbox for d in faces_in_photo_boxes(small)]
    for track in big_faces:
        box = track.observations[0].bbox
        assert any(math.isclose(box.x1, r.x1 * scale, abs_tol=0.05 * box.width) for r in reference)


def faces_in_photo_boxes(image: np.ndarray) -> list[Detection]:
    detector = FACE_DETECTORS.create("mtcnn", models=face_models(SETTINGS.threads))
    return [d for d in detect_faces(image, detector, min_face_px=40) if d.size > 100]


@pytest.mark.media
def test_results_are_deterministic(debate_clip: ClipMedia) -> None:
    clip = _clip(list(debate_clip.frames[:4]))
    first, second = perceive_faces(clip, SETTINGS), perceive_faces(clip, SETTINGS)
    assert len(first) == len(second) > 0
    for a, b in zip(first, second, strict=True):
        assert [o.bbox for o in a.observations] == [o.bbox for o in b.observations]
        assert all(np.array_equal(x.embedding, y.embedding) for x, y in zip(a.best, b.best, strict=True))


@pytest.mark.media
@pytest.mark.slow
def test_photo_clustering_meets_the_bar_on_all_13_people(media_dir: Path) -> None:
    folders = sorted((media_dir / "faces/deepface").glob("person*"))
    if len(folders) != 13:
        pytest.skip("deepface photo folders missing")
    vectors, truth = [], []
    for folder in folders:
        for path in sorted(folder.iterdir())[:3]:
            faces = faces_in_photo(load_rgb(path), SETTINGS, largest_only=True)
            assert faces, f"no face found in {path}"
            vectors.append(faces[0].embedding)
            truth.append(folder.name)
    labels = cluster_embeddings(np.stack(vectors), SETTINGS.face_photo_distance)
    precision, recall = pairwise_precision_recall(labels, truth)
    assert precision >= 0.98
    assert recall >= 0.90
