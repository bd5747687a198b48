"""The colour of a seen person's clothes, read from the pixels below the face box.

No packaged model describes a person (no CLIP, captioner or attribute network installs offline), so the colour
is measured: the median CIELAB colour of the chest's place below the chin (:data:`TORSO`, in shares of the face
box), named from a small table of the words people use for clothes (:func:`clothes_name`; black, navy and
charcoal are all ``dark``). A chest cut by the frame (a close-up, a passport photo) is not measured. A person's
value is the vote of their crops over clips (:func:`combine_clothes`).

What this cannot do: tell a jacket from a sweater, or see a tie, a stripe or a pattern. Hair colour, measured the
same way above the face, was tried and left out: backgrounds and lighting named 4 of 12 labelled people right.
Measured against the catalogue's hand-written looks in docs/benchmarks.md, "Person attributes: hair and clothes"
(``python bench/looks.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.perception.attributes.names import ClothesColour

if TYPE_CHECKING:
    from m3agent.domain import BBox

TORSO = (-0.25, 1.25, 1.45, 2.45)
"""x0, x1, y0, y1 as shares of the face box (y from its top): the chest, below the chin and the collar."""
MIN_PIXELS = 60
MIN_INSIDE = 0.6
"""The chest is measured only when this share of it lies inside the frame."""
AGREE = 0.5
"""The crops' most common colour decides when at least this share of them name it."""


@dataclass(frozen=True, slots=True)
class Clothes:
    """The clothes colour of one face crop, or over ``crops`` crops when combined: ``colour`` with
    ``confidence`` (1 for one crop; combined, the share of the crops that named it) and the ``evidence``."""

    colour: ClothesColour
    confidence: float
    evidence: str
    crops: int = 1


def face_clothes(image: Any, box: BBox) -> Clothes | None:
    """The clothes colour below the face in ``box`` of an RGB ``uint8`` image (None: the chest is not in view)."""
    import cv2
    import numpy as np

    chest = _region(image, box)
    if chest is None:
        return None
    lab = cv2.cvtColor(np.ascontiguousarray(chest, dtype=np.uint8), cv2.COLOR_RGB2LAB).reshape(-1, 3)
    lightness, a, b = (float(v) for v in np.median(lab.astype(np.float32), axis=0))
    lightness, a, b = lightness * 100.0 / 255.0, a - 128.0, b - 128.0
    return Clothes(clothes_name(lightness, a, b), 1.0, f"chest L*a*b* {lightness:.0f}/{a:.0f}/{b:.0f}")


def _region(image: Any, box: BBox) -> Any | None:
    """The chest's pixels below ``box``, or None when too little of it is in the frame."""
    height, width = image.shape[:2]
    w, h = box.x2 - box.x1, box.y2 - box.y1
    x0, x1, y0, y1 = (box.x1 + TORSO[0] * w, box.x1 + TORSO[1] * w, box.y1 + TORSO[2] * h, box.y1 + TORSO[3] * h)
    cx0, cx1, cy0, cy1 = max(0, int(x0)), min(width, int(x1)), max(0, int(y0)), min(height, int(y1))
    if cx1 <= cx0 or cy1 <= cy0 or (cx1 - cx0) * (cy1 - cy0) < MIN_INSIDE * max(1.0, (x1 - x0) * (y1 - y0)):
        return None
    region = image[cy0:cy1, cx0:cx1]
    return region if region.shape[0] * region.shape[1] >= MIN_PIXELS else None


def clothes_name(lightness: float, a: float, b: float) -> ClothesColour:
    """The word for a clothing colour given in CIELAB: dark (black, navy, charcoal), white, grey, or the hue's
    name."""
    hue, chroma = math.degrees(math.atan2(b, a)) % 360.0, math.hypot(a, b)
    if lightness < 28 or (lightness < 38 and chroma < 14):
        return "dark"
    if chroma < 12:
        return "white" if lightness >= 78 else "grey"
    if hue < 45 or hue >= 340:
        return "pink" if lightness >= 70 else "red"
    if hue < 80:
        return "brown" if lightness < 55 else "orange"
    if hue < 110:
        return "yellow"
    if hue < 200:
        return "green"
    if hue < 318:  # sRGB blue lies at 306 degrees, purple (#800080) at 328
        return "blue"
    return "purple"


def combine_clothes(values: Sequence[Clothes]) -> Clothes | None:
    """One person's clothes colour from their crops: the most common colour when at least :data:`AGREE` of the
    crops name it (None otherwise, or for no crop)."""
    if not values:
        return None
    crops = sum(v.crops for v in values)
    counts: Counter[ClothesColour] = Counter()
    for v in values:
        counts[v.colour] += v.crops
    colour, count = counts.most_common(1)[0]
    share = count / crops
    if share < AGREE:
        return None
    return Clothes(colour, round(share, 3), f"clothes {colour} in {count} of {crops} crops", crops)
