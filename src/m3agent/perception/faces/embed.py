"""Face crops for storage and identity descriptors of chosen faces.

``dlib``: the 128-d dlib ResNet descriptor, computed on a small region around
the face scaled so the face is at most ``ALIGN_FACE_PX`` pixels (its cost does
not depend on frame size); descriptors of one person lie within about 0.5-0.6
Euclidean distance. ``dlib+sface`` (the default): the unit dlib descriptor and
the unit SFace descriptor side by side, over sqrt(2), so the cosine of two
such vectors is the mean of the two models' cosines. dlib alone cannot tell
some different people from one person seen in two videos; SFace can, and the
pair clusters photos better than either (docs/benchmarks.md, Identity across
videos).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

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


FaceEmbedder = Literal["dlib", "dlib+sface"]
SFACE_SEARCH_MARGIN = 0.5


def embed_face(image: Any, det: Detection, models: FaceModels, jitters: int = 1,
               embedder: FaceEmbedder = "dlib+sface") -> npt.NDArray[np.float32]:
    """The descriptor of one detected face: 128-d dlib, or 256-d unit dlib + SFace (see the module doc)."""
    import numpy as np

    vector = dlib_descriptor(image, det, models, jitters)
    if embedder == "dlib":
        return vector
    dlib_unit = vector / max(float(np.linalg.norm(vector)), 1e-12)
    sface = sface_descriptor(image, det, models)
    second = dlib_unit if sface is None else sface  # no SFace alignment found: dlib's view twice
    result: npt.NDArray[np.float32] = (np.concatenate([dlib_unit, second]) / np.sqrt(2.0)).astype(np.float32)
    return result


def sface_descriptor(image: Any, det: Detection, models: FaceModels) -> npt.NDArray[np.float32] | None:
    """Unit 128-d SFace descriptor, aligned on YuNet's five points found inside the grown box (or None)."""
    import cv2
    import numpy as np

    x1, y1, x2, y2 = _expand(det.bbox, SFACE_SEARCH_MARGIN, image.shape[1], image.shape[0])
    scale = min(1.0, ALIGN_FACE_PX / max(det.size, 1.0))
    crop = cv2.cvtColor(np.ascontiguousarray(image[y1:y2, x1:x2]), cv2.COLOR_RGB2BGR)
    if scale < 1.0:
        size = (max(1, round((x2 - x1) * scale)), max(1, round((y2 - y1) * scale)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
    with models.lock:
        models.yunet.setInputSize((crop.shape[1], crop.shape[0]))
        _, faces = models.yunet.detect(crop)
        if faces is None or not len(faces):
            return None
        face = max(faces, key=lambda row: float(row[2] * row[3]))
        vector = np.asarray(models.sface.feature(models.sface.alignCrop(crop, face)), dtype=np.float32).ravel()
    result: npt.NDArray[np.float32] = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return result


def dlib_descriptor(image: Any, det: Detection, models: FaceModels, jitters: int = 1) -> npt.NDArray[np.float32]:
    """The 128-d dlib descriptor of one detected face (5-point alignment, ``jitters`` >= 1 samples)."""
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
