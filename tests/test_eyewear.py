"""Glasses from the bridge line: the decision band, the median over crops, and real faces (the shared photos and a
talking head with glasses), plus a drawn bridge turning a bare face into one with glasses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.perception.attributes.eyewear import (
    GLASSES_AT,
    NONE_BELOW,
    Eyewear,
    combine_eyewear,
    decide,
    face_eyewear,
)


def test_the_decision_has_an_uncertain_band_and_confidence_grows_away_from_it() -> None:
    assert decide(GLASSES_AT, 1).value == "glasses" and decide(NONE_BELOW - 0.01, 1).value == "none"
    middle = decide((GLASSES_AT + NONE_BELOW) / 2, 1)
    assert middle.value == "uncertain" and middle.confidence == 0.0
    assert decide(2 * GLASSES_AT, 1).confidence == 1.0 > decide(GLASSES_AT + 1, 1).confidence >= 0.6
    assert decide(0.0, 1).confidence == 1.0 > decide(NONE_BELOW - 1, 1).confidence >= 0.6


def test_crops_combine_on_the_median_score() -> None:
    def crop(score: float) -> Eyewear:
        return decide(score, 1)

    combined = combine_eyewear([crop(15.0), crop(2.0), crop(12.0)])  # one frame missed the bridge: still glasses
    assert combined is not None and combined.value == "glasses" and combined.score == 12.0 and combined.faces == 3
    assert combined_value([crop(12.0), crop(1.0), crop(2.0)]) == "none"  # one glint does not make glasses
    assert combine_eyewear([]) is None


def combined_value(values: list[Eyewear]) -> str:
    combined = combine_eyewear(values)
    assert combined is not None
    return combined.value


def _face(image: Any) -> Any:
    from m3agent.perception.faces.detect import FACE_DETECTORS, detect_faces
    from m3agent.perception.faces.models import face_models

    detector = FACE_DETECTORS.create("mtcnn", models=face_models(1))
    return max(detect_faces(image, detector, min_face_px=40), key=lambda d: d.bbox.height).bbox


@pytest.mark.media
def test_glasses_on_the_shared_photos(media_dir: Path) -> None:
    from m3agent.perception.faces import load_rgb
    from m3agent.perception.faces.models import face_models

    expected = {"deepface/person09/img24.jpg": "glasses", "deepface/person09/img25.jpg": "glasses",
                "deepface/person01/img1.jpg": "none", "deepface/person13/img38.jpg": "none",
                "face_recognition/knn_examples/train/biden/biden.jpg": "none"}
    for name, want in expected.items():
        image = load_rgb(media_dir / "faces" / name)
        assert face_eyewear(image, _face(image), face_models(1)).value == want, name


@pytest.mark.media
def test_a_drawn_bridge_reads_as_glasses(media_dir: Path) -> None:
    """The measure reads the line, not the person: a thin dark bar drawn across the bridge of a bare face (between
    the inner eye corners, at eye level) turns ``none`` into ``glasses``."""
    import cv2

    from m3agent.perception.faces import load_rgb
    from m3agent.perception.faces.models import face_models, require

    models = face_models(1)
    image = load_rgb(media_dir / "faces" / "deepface/person01/img1.jpg")
    box = _face(image)
    assert face_eyewear(image, box, models).value == "none"
    dlib = require("dlib")
    shape = models.shape68(image, dlib.rectangle(int(box.x1), int(box.y1), int(box.x2) - 1, int(box.y2) - 1))
    inner_left, inner_right = (np.array([shape.part(i).x, shape.part(i).y]) for i in (39, 42))
    thickness = max(2, int(np.linalg.norm(inner_right - inner_left) / 12))
    drawn = np.ascontiguousarray(image.copy())
    cv2.line(drawn, tuple(int(v) for v in inner_left), tuple(int(v) for v in inner_right), (20, 20, 20), thickness)
    assert face_eyewear(drawn, box, models).value == "glasses"


@pytest.mark.media
def test_a_talking_head_with_glasses_and_one_without(media_dir: Path) -> None:
    from m3agent.media import iter_clips
    from m3agent.perception.faces.models import face_models
    from m3agent.settings import MediaSettings

    def person(video: str) -> str:
        frames = [f for c in iter_clips(media_dir / "video/hdtf_talking_heads" / video, MediaSettings(frame_fps=0.5))
                  for f in c.frames]
        return combined_value([face_eyewear(f.image, _face(f.image), face_models(1)) for f in frames[:6]])

    assert person("WDA_BobMenendez_000.mp4") == "glasses"
    assert person("WDA_AlexandriaOcasioCortez_000.mp4") == "none"
