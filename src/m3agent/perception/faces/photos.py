"""Faces in still photos (enrolment pictures, photo sets): detect, then embed every face or the largest."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.domain import BBox
from m3agent.errors import MediaError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.perception.faces.models import FaceModels
    from m3agent.settings import PerceptionSettings

PHOTO_JITTERS = 1


@dataclass(frozen=True, slots=True, eq=False)
class PhotoFace:
    """One face of a photo with its identity descriptor (:func:`~.embed.embed_face`) and a JPEG crop."""

    bbox: BBox
    det_score: float
    quality: float
    embedding: npt.NDArray[np.float32]
    crop_jpeg: bytes


def load_rgb(path: str | os.PathLike[str]) -> npt.NDArray[np.uint8]:
    """An image file as an RGB uint8 array; unreadable files raise :class:`MediaError`."""
    import cv2

    image = cv2.imread(os.fspath(path), cv2.IMREAD_COLOR)
    if image is None:
        raise MediaError(f"cannot read image {os.fspath(path)!r}", hint="check that it is a JPEG/PNG image")
    import numpy as np

    return np.ascontiguousarray(image[:, :, ::-1])


def faces_in_photo(
    image: Any,
    settings: PerceptionSettings,
    *,
    models: FaceModels | None = None,
    largest_only: bool = False,
    jitters: int = PHOTO_JITTERS,
) -> list[PhotoFace]:
    """Faces of an RGB photo, largest first (only the largest with ``largest_only``)."""
    from m3agent.perception.faces.detect import FACE_DETECTORS, detect_faces
    from m3agent.perception.faces.embed import crop_jpeg, embed_face
    from m3agent.perception.faces.models import face_models
    from m3agent.perception.faces.perceive import as_rgb
    from m3agent.perception.faces.quality import assess

    models = models or face_models(settings.threads)
    detector = FACE_DETECTORS.create(settings.face_detector, models=models)
    rgb = as_rgb(image)
    found = detect_faces(rgb, detector, min_face_px=settings.min_face_px)
    if largest_only:
        found = found[:1]
    return [
        PhotoFace(
            bbox=det.bbox,
            det_score=det.score,
            quality=assess(rgb, det).overall,
            embedding=embed_face(rgb, det, models, jitters, settings.face_embedder),
            crop_jpeg=crop_jpeg(rgb, det.bbox),
        )
        for det in found
    ]
