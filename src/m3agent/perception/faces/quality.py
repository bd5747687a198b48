"""How useful a detected face is for recognition: frontal, sharp, large, confident.

All scores are in [0, 1]. They rank the crops of a track so only the best few
are embedded (a profile or motion-blurred crop embeds far from the same
person's frontal crops), and gate which crops may represent a track at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m3agent.perception.faces.detect import Detection

SHARP_SIDE = 64
SHARP_REF = 300.0
FULL_SIZE_PX = 100.0
YAW_SCALE = 0.4
ROLL_SCALE_DEG = 30.0


@dataclass(frozen=True, slots=True)
class FaceQuality:
    frontal: float
    sharpness: float
    size: float
    score: float

    @property
    def overall(self) -> float:
        """Product of the parts; frontal-ness and score weigh fully, sharpness and size softened."""
        return self.score * self.frontal * (0.3 + 0.7 * self.sharpness) * (0.3 + 0.7 * self.size)


def assess(image: Any, det: Detection) -> FaceQuality:
    return FaceQuality(
        frontal=frontalness(det),
        sharpness=sharpness(image, det),
        size=min(1.0, det.size / FULL_SIZE_PX),
        score=det.score,
    )


def sharpness(image: Any, det: Detection) -> float:
    """Variance of the Laplacian of the face, resampled to 64x64 so it does not depend on size."""
    import cv2

    box = det.bbox
    x1, y1 = max(0, int(box.x1)), max(0, int(box.y1))
    x2, y2 = min(image.shape[1], math.ceil(box.x2)), min(image.shape[0], math.ceil(box.y2))
    if x2 - x1 < 4 or y2 - y1 < 4:
        return 0.0
    gray = cv2.cvtColor(image[y1:y2, x1:x2], cv2.COLOR_RGB2GRAY)
    patch = cv2.resize(gray, (SHARP_SIDE, SHARP_SIDE), interpolation=cv2.INTER_AREA)
    variance = float(cv2.Laplacian(patch, cv2.CV_32F).var())
    return min(1.0, variance / SHARP_REF)


def frontalness(det: Detection) -> float:
    """1 for a frontal upright face, falling smoothly towards 0 with yaw, roll or collapsed eye spacing.

    Yaw is the nose's sideways offset from the eye midpoint (and from the mouth
    midpoint, when mouth corners are known) in units of the eye distance.
    """
    if len(det.landmarks) < 3:
        return 0.5
    (lx, ly), (rx, ry), (nx, ny) = det.landmarks[:3]
    dx, dy = rx - lx, ry - ly
    eye_dist = math.hypot(dx, dy)
    if eye_dist < 1.0 or det.bbox.width <= 0:
        return 0.0
    ux, uy = dx / eye_dist, dy / eye_dist
    yaw = abs(((nx - (lx + rx) / 2) * ux + (ny - (ly + ry) / 2) * uy) / eye_dist)
    if len(det.landmarks) >= 5:
        (mlx, mly), (mrx, mry) = det.landmarks[3:5]
        mouth_yaw = ((nx - (mlx + mrx) / 2) * ux + (ny - (mly + mry) / 2) * uy) / eye_dist
        yaw = max(yaw, abs(mouth_yaw))
    roll = math.degrees(math.atan2(dy, dx))
    span = eye_dist / det.bbox.width
    pose = math.exp(-((yaw / YAW_SCALE) ** 2) - (roll / ROLL_SCALE_DEG) ** 2)
    return pose * min(1.0, span / 0.3)
