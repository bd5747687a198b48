"""The one definition of where a face is in the picture: left / centre / right, foreground / background, and the
words for them. Perception's position attribute (:mod:`.position`: a profile's "usually on the left"), the entity
graph's sightings (:mod:`m3agent.graph.operators`: who is where at a moment) and the words of answers
(:mod:`m3agent.control.people.words`, :mod:`m3agent.memorize.places`) all place a face by these functions, so one
face gets one place everywhere (issue 47: the graph used 0.4 / 0.6 of the width and 0.55 of the largest face, the
attribute thirds and 0.75 of the shot's main face, so a face at 35 % of the width was "in the centre" in a profile
and "on the left" in a graph answer). Places measured at ingest (a profile's position, the presence lines of
memories) keep the rule they were written with until the video is ingested again.

Across: a face is ``left`` when its box centre lies left of :data:`LEFT` (3/8 of the frame width), ``right`` at or
right of :data:`RIGHT` (5/8), else ``centre`` (a centre on a boundary belongs to the band on its right). The
boundaries lie halfway between the places a picture puts people: the middle (one person, 1/2) and the middles of
its halves (two people side by side, a split screen, 1/4 and 3/4); a face is placed where it is nearest. A subject
composed on a third line (1/3, 2/3) is then clearly left or right, where thirds of the width, the rule the position
attribute used before, put their boundaries exactly on those lines. On the hand labels of
``bench/labels/positions.tsv`` (248 MTCNN faces of five shared videos, 17 people; labelled by thirds "as a viewer
sees it") 3/8-5/8 place 0.968 of the faces and 17/17 people by majority, as thirds do, and the graph's former 0.4 /
0.6 place 0.915 and 16/17 (a centre band a fifth of the width calls people seated just off the middle left or
right: the Oval Office aides at 58-63 %, labelled centre). The misses differ: thirds miss Clinton, the right half of
the debate's split screen, in 6 of her 27 frames (face centre at 62-66 %), and the graph places someone at an
instant by one frame, so "who is on the right at 0:06?" would find her "in the centre"; 3/8-5/8 miss one frame of
her (62.3 %) and an aide seated behind at 62.6-63.1 %. These numbers are not held out (the labels were looked at while
choosing), so no band was fitted to them: 0.35 / 0.65 reaches 0.980 on them and was not taken.

In depth: a face is ``background`` when its box is much shorter than the yardstick (height below
:data:`BACKGROUND_RELATIVE` of it) or tiny in the frame (height below :data:`MIN_FOREGROUND_SHARE` of the frame
height). The yardstick is the largest face sampled at the same time, or the shot's main face
(:func:`main_face_height`) when that is larger, so a face behind someone stays background in the frames where the
person in front turned away or was missed. People at one distance differ by less than 0.75 (0.77-1.0 between the
two halves of a split-screen interview), people seated behind others measured 0.32-0.76 of the main face; on the
same labels this rule places 0.992 of the faces (0.956 against the largest face at the same time alone; the
graph's former 0.55 of it: 0.823). A face's box height stands for its distance to the camera: a child or a turned
head reads smaller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from m3agent.domain import BBox

Horizontal = Literal["left", "centre", "right"]
Depth = Literal["foreground", "background"]

LEFT = 3 / 8
"""A box centre left of this share of the frame width is on the left (halfway between 1/4 and 1/2)."""
RIGHT = 5 / 8
"""A box centre at or right of this share of the frame width is on the right; between the two, in the centre."""
BANDS: tuple[tuple[Horizontal, float, float], ...] = (
    ("left", 0.0, LEFT), ("centre", LEFT, RIGHT), ("right", RIGHT, 1.0))
"""The horizontal places with the shares of the frame width each covers, left to right."""
BACKGROUND_RELATIVE = 0.75
"""A face shorter than this share of the yardstick (the largest face at the same time, or the shot's main face) is
in the background."""
MIN_FOREGROUND_SHARE = 0.06
"""A face shorter than this share of the frame height is in the background, even alone."""

PLACE_WORDS: dict[str, str] = {"left": "on the left", "centre": "in the centre", "right": "on the right"}
"""How answers and memories say a horizontal place."""


def horizontal_band(centre: float) -> tuple[Horizontal, float, float]:
    """The band of :data:`BANDS` that holds a box centre at ``centre`` (a share of the frame width; a centre outside
    the frame counts for the band at that edge): ``(place, low, high)``."""
    for band in BANDS:
        if centre < band[2]:
            return band
    return BANDS[-1]


def horizontal_place(centre: float) -> Horizontal:
    """``left``, ``centre`` or ``right`` for a box centre at ``centre`` (a share of the frame width)."""
    return horizontal_band(centre)[0]


def box_horizontal(box: BBox, frame_width: float) -> Horizontal:
    """The horizontal place of ``box`` in a frame ``frame_width`` pixels wide (``centre`` for an unknown width)."""
    return horizontal_place((box.x1 + box.x2) / 2 / frame_width if frame_width > 0 else 0.5)


def depth_margin(relative: float, share: float | None = None) -> float:
    """How far a face is from the depth boundary, as a signed log-ratio: the smaller of ``log(relative /``
    :data:`BACKGROUND_RELATIVE` ``)`` and ``log(share /`` :data:`MIN_FOREGROUND_SHARE` ``)``; negative means
    background. ``relative`` is the face's height over the yardstick (at most 1), ``share`` its height over the
    frame height (``None`` when the frame height is unknown: the share rule is skipped)."""
    margins = [math.log(max(relative, 1e-9) / BACKGROUND_RELATIVE)]
    if share is not None:
        margins.append(math.log(max(share, 1e-9) / MIN_FOREGROUND_SHARE))
    return min(margins)


def depth_place(relative: float, share: float | None = None) -> Depth:
    """``background`` or ``foreground`` (:func:`depth_margin`)."""
    return "background" if depth_margin(relative, share) < 0 else "foreground"


def yardstick(heights_at_time: Sequence[float], shot_face_height: float | None = None) -> float:
    """The height a face is compared with: the largest of ``heights_at_time`` (the faces sampled with it, itself
    included) or the shot's main face height when that is larger."""
    return max([*heights_at_time, shot_face_height or 0.0])


def main_face_height(frames_boxes: Sequence[Sequence[BBox]]) -> float | None:
    """The height of a shot's main face: the median over its frames with faces of the largest face height
    (``None`` without faces). The median ignores a frame where a passing face came close to the camera."""
    largest = [max(b.height for b in boxes) for boxes in frames_boxes if boxes]
    return float(median(largest)) if largest else None
