"""Where a face sits in the frame: left / centre / right, and foreground / background, with a confidence.

The rule, its thresholds and its words belong to :mod:`.place` (the one definition the entity graph and the
answers use too); this module measures it per frame and over a face's frames. The horizontal confidence is the
share of the box's width inside its band (a face straddling a boundary is unsure); the depth confidence grows with
the log-distance of the deciding ratio from its threshold (:func:`.place.depth_margin`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import TypeVar

from m3agent.domain import BBox
from m3agent.perception.attributes.place import Depth, Horizontal, depth_margin, horizontal_band, yardstick

_CONFIDENCE_LOG_SCALE = math.log(1.5)
_V = TypeVar("_V", bound=str)


@dataclass(frozen=True, slots=True)
class FramePosition:
    """Position of one face in one frame, or the typical one over several (``frames`` counts them).

    ``centre_x`` is the box centre as a share of the frame width (0 left edge, 1 right edge);
    ``height_share`` the box height / frame height; ``size_vs_largest`` the box height / the height of
    the largest face in the same frame (1 for the largest). Confidences are in [0.5, 1] (0.5: on a
    boundary); ``evidence`` says what the values were computed from.
    """

    horizontal: Horizontal
    horizontal_confidence: float
    depth: Depth
    depth_confidence: float
    centre_x: float
    height_share: float
    size_vs_largest: float
    evidence: str
    frames: int = 1


def frame_position(box: BBox, width: int, height: int, *, largest_height: float | None = None) -> FramePosition:
    """Position of the face ``box`` in a ``width`` x ``height`` frame whose largest face is ``largest_height``
    pixels tall (``None``: this face is the largest). Raises :class:`ValueError` for an empty frame or box."""
    if width <= 0 or height <= 0 or box.width <= 0 or box.height <= 0:
        raise ValueError(f"need a non-empty box in a non-empty frame, got {box} in {width}x{height}")
    centre = (box.x1 + box.x2) / 2 / width
    horizontal, h_conf = _horizontal(box, width, centre)
    share = box.height / height
    relative = min(1.0, box.height / largest_height) if largest_height else 1.0
    depth, d_conf = _depth(relative, share)
    evidence = (f"face centre at {centre:.0%} of the width, height {share:.0%} of the frame and "
                f"{relative:.0%} of the largest face")
    return FramePosition(horizontal, h_conf, depth, d_conf, round(centre, 4), round(share, 4), round(relative, 4),
                         evidence)


def positions_in_frame(
    boxes: Sequence[BBox], width: int, height: int, *, shot_face_height: float | None = None
) -> list[FramePosition]:
    """Positions of all faces found in one frame, in the order given.

    Sizes are compared with the largest face of the frame, or ``shot_face_height`` when that is larger
    (see :func:`.place.main_face_height`): a background face stays background in the frames where the main
    face turned away or was not detected.
    """
    largest = yardstick([b.height for b in boxes], shot_face_height)
    return [frame_position(b, width, height, largest_height=largest) for b in boxes]


def typical_position(positions: Sequence[FramePosition]) -> FramePosition | None:
    """The majority position of one face (a track or an entity) over its frames; ``None`` for none.

    Each of horizontal and depth is the most frequent value; its confidence is the mean confidence of the
    agreeing frames times their share. The numeric fields are medians over all frames.
    """
    if not positions:
        return None
    horizontal, h_conf = _vote([(p.horizontal, p.horizontal_confidence) for p in positions])
    depth, d_conf = _vote([(p.depth, p.depth_confidence) for p in positions])
    centre, share, relative = (float(median([getattr(p, f) for p in positions]))
                               for f in ("centre_x", "height_share", "size_vs_largest"))
    evidence = (f"{len(positions)} frames: {horizontal} in {_agree(positions, 'horizontal', horizontal)}, "
                f"{depth} in {_agree(positions, 'depth', depth)}; median centre {centre:.0%} of the width, "
                f"height {share:.0%} of the frame, {relative:.0%} of the largest face")
    return FramePosition(horizontal, h_conf, depth, d_conf, centre, share, relative, evidence,
                         frames=sum(p.frames for p in positions))


def _horizontal(box: BBox, width: int, centre: float) -> tuple[Horizontal, float]:
    name, low, high = horizontal_band(centre)
    x1, x2 = max(box.x1 / width, 0.0), min(box.x2 / width, 1.0)
    inside = max(0.0, min(x2, high) - max(x1, low)) / max(x2 - x1, 1e-9)
    return name, round(max(0.5, inside), 3)


def _depth(relative: float, share: float) -> tuple[Depth, float]:
    margin = depth_margin(relative, share)
    return ("background", _confidence(-margin)) if margin < 0 else ("foreground", _confidence(margin))


def _confidence(log_margin: float) -> float:
    return round(0.5 + 0.5 * math.tanh(log_margin / _CONFIDENCE_LOG_SCALE), 3)


def _vote(values: Sequence[tuple[_V, float]]) -> tuple[_V, float]:
    winner, count = Counter(v for v, _ in values).most_common(1)[0]
    mean = sum(c for v, c in values if v == winner) / count
    return winner, round(mean * count / len(values), 3)


def _agree(positions: Sequence[FramePosition], field: str, value: str) -> str:
    return f"{sum(getattr(p, field) == value for p in positions)}/{len(positions)}"
