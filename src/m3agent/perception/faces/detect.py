"""Face detection on one RGB frame: MTCNN (default) or dlib HOG, gated by score and size.

Detection runs on a copy of the frame scaled down to at most ``max_side``
pixels, so a 4K frame costs what a 1280-pixel one does; boxes and landmarks
are mapped back to the frame's own pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from m3agent.domain import BBox
from m3agent.registry import BackendSpec, Registry

if TYPE_CHECKING:
    from m3agent.perception.faces.models import FaceModels

Point = tuple[float, float]

DETECT_MAX_SIDE = 1280
MIN_DET_SCORE = 0.9
HOG_NATIVE_FACE_PX = 80


@dataclass(frozen=True, slots=True)
class Detection:
    """A face box in frame pixels, its score in [0, 1], and landmarks.

    ``landmarks`` holds (left eye, right eye, nose) and, from MTCNN, also
    (mouth left, mouth right); "left" means the image's left.
    """

    bbox: BBox
    score: float
    landmarks: tuple[Point, ...]

    @property
    def size(self) -> float:
        """Geometric mean of width and height, the face's size in pixels."""
        return float(max(self.bbox.area, 0.0) ** 0.5)


class FaceDetector(Protocol):
    """Finds faces of about ``min_face`` pixels or more in an RGB uint8 image (no gating)."""

    def find(self, image: Any, min_face: float) -> list[Detection]: ...


FACE_DETECTORS: Registry[FaceDetector] = Registry("face detector")
FACE_DETECTORS.register("mtcnn", "m3agent.perception.faces.detect:MtcnnDetector", "MTCNN (ONNX), 5 landmarks")
FACE_DETECTORS.register("hog", "m3agent.perception.faces.detect:HogDetector", "dlib HOG + SVM, frontal only")


def detect_faces(
    image: Any,
    detector: FaceDetector,
    *,
    min_face_px: int,
    min_score: float = MIN_DET_SCORE,
    max_side: int = DETECT_MAX_SIDE,
) -> list[Detection]:
    """Faces of at least ``min_face_px`` pixels scoring ``min_score`` or more, largest first."""
    import cv2

    height, width = image.shape[:2]
    scale = min(1.0, max_side / max(height, width))
    small = image
    if scale < 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        small = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    found = detector.find(small, min_face_px * scale)
    kept = [_clip(_rescale(det, 1.0 / scale), width, height) for det in found if det.score >= min_score]
    kept = [det for det in kept if det.size >= min_face_px]
    return sorted(kept, key=lambda d: (-d.bbox.area, d.bbox.x1, d.bbox.y1))


class MtcnnDetector:
    """MTCNN cascade on the packaged ONNX nets; scores are O-Net probabilities."""

    def __init__(self, spec: BackendSpec | None = None, *, models: FaceModels) -> None:
        self.models = models

    def find(self, image: Any, min_face: float) -> list[Detection]:
        from m3agent.perception.faces.mtcnn import detect_mtcnn

        raws = detect_mtcnn(self.models.mtcnn, image, max(min_face, 12.0))
        return [Detection(BBox(*raw.box), raw.score, raw.landmarks) for raw in raws]


class HogDetector:
    """dlib HOG + linear SVM; eyes and nose come from the 5-point shape predictor.

    HOG gives an SVM margin, not a probability: it is mapped to ``0.9 + 0.1 * margin``
    (capped at 1) so every detection above the detector's own threshold passes the
    default gate and stronger ones rank higher. It misses strongly turned faces.
    """

    def __init__(self, spec: BackendSpec | None = None, *, models: FaceModels) -> None:
        self.models = models

    def find(self, image: Any, min_face: float) -> list[Detection]:
        import numpy as np

        upsample = 1 if min_face < HOG_NATIVE_FACE_PX else 0
        rgb = np.ascontiguousarray(image)
        with self.models.lock:
            rects, margins, _ = self.models.hog.run(rgb, upsample, 0.0)
            shapes = [self.models.shape5(rgb, rect) for rect in rects]
        found = []
        for rect, margin, shape in zip(rects, margins, shapes, strict=True):
            box = BBox(float(rect.left()), float(rect.top()), float(rect.right() + 1), float(rect.bottom() + 1))
            found.append(Detection(box, min(1.0, 0.9 + 0.1 * float(margin)), _eyes_nose(shape)))
        return found


def _eyes_nose(shape: Any) -> tuple[Point, ...]:
    """(left eye, right eye, nose) from dlib's 5 points: two corners per eye, then the nose base."""
    points = [(float(shape.part(i).x), float(shape.part(i).y)) for i in range(5)]
    eye_a = _mean(points[0], points[1])
    eye_b = _mean(points[2], points[3])
    left, right = sorted((eye_a, eye_b))
    return (left, right, points[4])


def _mean(a: Point, b: Point) -> Point:
    return ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)


def _rescale(det: Detection, factor: float) -> Detection:
    if factor == 1.0:
        return det
    box = det.bbox
    bbox = BBox(box.x1 * factor, box.y1 * factor, box.x2 * factor, box.y2 * factor)
    points = tuple((x * factor, y * factor) for x, y in det.landmarks)
    return Detection(bbox, det.score, points)


def _clip(det: Detection, width: int, height: int) -> Detection:
    box = det.bbox
    bbox = BBox(max(0.0, box.x1), max(0.0, box.y1), min(float(width), box.x2), min(float(height), box.y2))
    return Detection(bbox, det.score, det.landmarks)
