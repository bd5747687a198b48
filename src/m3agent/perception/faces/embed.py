"""Face crops for storage and 128-d dlib ResNet descriptors of chosen faces.

A descriptor is computed on a small region around the face, scaled so the face
is at most ``ALIGN_FACE_PX`` pixels, so its cost does not depend on frame size.
Descriptors of one person lie within about 0.5-0.6 Euclidean distance.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from m3agent.domain import BBox

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.perception.faces.detect import Detection
    from m3agent.perception.faces.models import FaceModels

ALIGN_FACE_PX = 200.0
ALIGN_MARGIN = 0.6
CROP_MARGIN = 0.25
CROP_MAX_SIDE = 160
JPEG_QUALITY = 85


def embed_face(image: Any, det: Detection, models: FaceModels, jitters: int = 1) -> npt.NDArray[np.float32]:
    """The 128-d descriptor of one detected face (5-point alignment, ``jitters`` >= 1 samples)."""
    import cv2
    import numpy as np

    from m3agent.perception.faces.models import require

    dlib = require("dlib")
    region = _expand(det.bbox, ALIGN_MARGIN, image.shape[1], image.shape[0])
    x1, y1, x2, y2 = region
    patch = image[y1:y2, x1:x2]
    scale = min(1.0, ALIGN_FACE_PX / max(det.size, 1.0))
    if scale < 1.0:
        size = (max(1, round((x2 - x1) * scale)), max(1, round((y2 - y1) * scale)))
        patch = cv2.resize(patch, size, interpolation=cv2.INTER_AREA)
    patch = np.ascontiguousarray(patch)
    box = det.bbox
    rect = dlib.rectangle(
        round((box.x1 - x1) * scale),
        round((box.y1 - y1) * scale),
        round((box.x2 - x1) * scale) - 1,
        round((box.y2 - y1) * scale) - 1,
    )
    with models.lock:
        shape = models.shape5(patch, rect)
        vector = models.resnet.compute_face_descriptor(patch, shape, max(1, jitters))
    return np.asarray(vector, dtype=np.float32)


def crop_jpeg(image: Any, bbox: BBox) -> bytes:
    """JPEG of the face with a margin, at most ``CROP_MAX_SIDE`` pixels on its longer side."""
    from m3agent.media.frames import encode_jpeg

    x1, y1, x2, y2 = _expand(bbox, CROP_MARGIN, image.shape[1], image.shape[0])
    return encode_jpeg(image[y1:y2, x1:x2], CROP_MAX_SIDE, JPEG_QUALITY)


def _expand(box: BBox, margin: float, width: int, height: int) -> tuple[int, int, int, int]:
    """Integer region around ``box`` grown by ``margin`` x its size on each side, inside the image."""
    pad_x, pad_y = box.width * margin, box.height * margin
    x1 = max(0, math.floor(box.x1 - pad_x))
    y1 = max(0, math.floor(box.y1 - pad_y))
    x2 = min(width, math.ceil(box.x2 + pad_x))
    y2 = min(height, math.ceil(box.y2 + pad_y))
    return x1, y1, max(x2, x1 + 1), max(y2, y1 + 1)
