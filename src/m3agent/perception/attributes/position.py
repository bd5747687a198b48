"""Where a face sits in the frame: left / centre / right, and foreground / background.

Horizontal: the third of the frame width holding the face box's centre; its confidence is the share
of the box's width inside that third (a face straddling a boundary is unsure).

Depth: a face is ``background`` when it is much smaller than the largest face of the same frame, or
than the shot's main face when that is larger (height below ``BACKGROUND_RELATIVE`` of it: people at
one distance differ by less, e.g. 0.77-1.0 between the two halves of a split-screen interview, while
people seated behind others measured 0.32-0.76), or tiny in the frame (height below
``MIN_FOREGROUND_SHARE`` of the frame height). These thresholds were set looking at those clips.
Its confidence grows with the log-distance of the deciding ratio from its threshold.
A face's box height stands for its distance to the camera: a child or a turned head reads smaller.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from m3agent.domain import BBox

Horizontal = Literal["left", "centre", "right"]
Depth = Literal["foreground", "background"]

PLACE_WORDS: dict[str, str] = {"left": "on the left", "centre": "in the centre", "right": "on the right"}
"""How answers and memories say a horizontal place."""
BACKGROUND_RELATIVE = 0.75
MIN_FOREGROUND_SHARE = 0.06
_THIRDS: tuple[tuple[Horizontal, float, float], ...] = (
    ("left", 0.0, 1 / 3), ("centre", 1 / 3, 2 / 3), ("right", 2 / 3, 1.0))
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
    depth, d_conf = _depth(share, relative)
    evidence = (f"face centre at {centre:.0%} of the width, height {share:.0%} of the frame and "
                f"{relative:.0%} of the largest face")
    return FramePosition(horizontal, h_conf, depth, d_conf, round(centre, 4), round(share, 4), round(relative, 4),
                         evidence)


def positions_in_frame(
    boxes: Sequence[BBox], width: int, height: int, *, shot_face_height: float | None = None
) -> list[FramePosition]:
    """Positions of all faces found in one frame, in the order given.

    Sizes are compared with the largest face of the frame, or ``shot_face_height`` when that is larger
    (see :func:`main_face_height`): a background face stays background in the frames where the main
    face turned away or was not detected.
    """
    largest = max([b.height for b in boxes] + [shot_face_height or 0.0])
    return [frame_position(b, width, height, largest_height=largest) for b in boxes]


def main_face_height(frames_boxes: Sequence[Sequence[BBox]]) -> float | None:
    """The height of a shot's main face: the median over its frames with faces of the largest face height
    (``None`` without faces). The median ignores a frame where a passing face came close to the camera."""
    largest = sorted(max(b.height for b in boxes) for boxes in frames_boxes if boxes)
    return _median(largest) if largest else None


def typical_position(positions: Sequence[FramePosition]) -> FramePosition | None:
    """The majority position of one face (a track or an entity) over its frames; ``None`` for none.

    Each of horizontal and depth is the most frequent value; its confidence is the mean confidence of the
    agreeing frames times their share. The numeric fields are medians over all frames.
    """
    if not positions:
        return None
    horizontal, h_conf = _vote([(p.horizontal, p.horizontal_confidence) for p in positions])
    depth, d_conf = _vote([(p.depth, p.depth_confidence) for p in positions])
    centre, share, relative = (_median([getattr(p, f) for p in positions])
                               for f in ("centre_x", "height_share", "size_vs_largest"))
    evidence = (f"{len(positions)} frames: {horizontal} in {_agree(positions, 'horizontal', horizontal)}, "
                f"{depth} in {_agree(positions, 'depth', depth)}; median centre {centre:.0%} of the width, "
                f"height {share:.0%} of the frame, {relative:.0%} of the largest face")
    return FramePosition(horizontal, h_conf, depth, d_conf, centre, share, relative, evidence,
                         frames=sum(p.frames for p in positions))


def _horizontal(box: BBox, width: int, centre: float) -> tuple[Horizontal, float]:
    for name, low, high in _THIRDS:
        if centre < high or name == "right":
            x1, x2 = max(box.x1 / width, 0.0), min(box.x2 / width, 1.0)
            inside = max(0.0, min(x2, high) - max(x1, low)) / max(x2 - x1, 1e-9)
            return name, round(max(0.5, inside), 3)
    raise AssertionError("unreachable")


def _depth(share: float, relative: float) -> tuple[Depth, float]:
    margins = (math.log(relative / BACKGROUND_RELATIVE), math.log(share / MIN_FOREGROUND_SHARE))
    if min(margins) < 0:
        return "background", _confidence(-min(margins))
    return "foreground", _confidence(min(margins))


def _confidence(log_margin: float) -> float:
    return round(0.5 + 0.5 * math.tanh(log_margin / _CONFIDENCE_LOG_SCALE), 3)


def _vote(values: Sequence[tuple[_V, float]]) -> tuple[_V, float]:
    winner, count = Counter(v for v, _ in values).most_common(1)[0]
    mean = sum(c for v, c in values if v == winner) / count
    return winner, round(mean * count / len(values), 3)


def _agree(positions: Sequence[FramePosition], field: str, value: str) -> str:
    return f"{sum(getattr(p, field) == value for p in positions)}/{len(positions)}"


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
