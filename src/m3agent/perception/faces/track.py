"""Within-clip face tracks: link detections of consecutive sampled frames by box continuity.

Frames are sampled about 0.5 s apart, so a moving head can shift by its own
size between samples; links are allowed up to ``MAX_SHIFT`` face sizes (more
across a missed frame) with similar box sizes, assigned jointly per frame by
the Hungarian method so that two nearby faces never swap or share a track.
Tracks never continue across a shot cut (a large colour-histogram change).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m3agent.domain import BBox
    from m3agent.perception.faces.detect import Detection

MAX_SHIFT = 1.5
MAX_GAP_FRAMES = 2
MAX_SIZE_RATIO = 1.6
CUT_DISTANCE = 0.3
_INFEASIBLE = 1e6


@dataclass(slots=True)
class Track:
    """Detections of one face: ``members`` are (frame index, detection index) in time order."""

    members: list[tuple[int, int]] = field(default_factory=list)

    @property
    def last_frame(self) -> int:
        return self.members[-1][0]

    def frames(self) -> set[int]:
        return {frame for frame, _ in self.members}


def shot_cuts(images: Sequence[Any]) -> list[bool]:
    """``cuts[i]`` is True when frame ``i`` starts a new shot (never for frame 0)."""
    import cv2

    cuts = [False] * len(images)
    previous = None
    for i, image in enumerate(images):
        small = cv2.resize(image, (64, 36), interpolation=cv2.INTER_AREA)
        hsv = cv2.cvtColor(small, cv2.COLOR_RGB2HSV)
        hist = cv2.calcHist([hsv], [0, 1], None, [16, 8], [0, 180, 0, 256])
        hist = hist / max(float(hist.sum()), 1.0)
        if previous is not None:
            cuts[i] = cv2.compareHist(previous, hist, cv2.HISTCMP_BHATTACHARYYA) > CUT_DISTANCE
        previous = hist
    return cuts


def link_tracks(detections: Sequence[Sequence[Detection]], cuts: Sequence[bool]) -> list[Track]:
    """Group per-frame detections into tracks, in order of first appearance."""
    tracks: list[Track] = []
    active: list[Track] = []
    for frame, found in enumerate(detections):
        if cuts[frame]:
            active = []
        active = [t for t in active if frame - t.last_frame <= MAX_GAP_FRAMES]
        matched = _assign(active, found, frame, detections)
        for det_index in range(len(found)):
            track = matched.get(det_index)
            if track is None:
                track = Track()
                tracks.append(track)
                active.append(track)
            track.members.append((frame, det_index))
    return tracks


def _assign(
    active: list[Track], found: Sequence[Detection], frame: int, detections: Sequence[Sequence[Detection]]
) -> dict[int, Track]:
    """Hungarian assignment of this frame's detections to active tracks; infeasible pairs stay apart."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    if not active or not found:
        return {}
    cost = np.full((len(active), len(found)), _INFEASIBLE)
    for i, track in enumerate(active):
        last_frame, last_index = track.members[-1]
        last = detections[last_frame][last_index].bbox
        for j, det in enumerate(found):
            cost[i, j] = link_cost(last, det.bbox, frame - last_frame)
    rows, cols = linear_sum_assignment(cost)
    return {int(j): active[int(i)] for i, j in zip(rows, cols, strict=True) if cost[i, j] < _INFEASIBLE}


def link_cost(previous: BBox, current: BBox, gap: int) -> float:
    """Centre shift in face sizes plus log size change; ``_INFEASIBLE`` beyond the limits."""
    size_prev = math.sqrt(max(previous.area, 1e-6))
    size_cur = math.sqrt(max(current.area, 1e-6))
    ratio = max(size_prev, size_cur) / min(size_prev, size_cur)
    shift = math.hypot(
        (previous.x1 + previous.x2 - current.x1 - current.x2) / 2,
        (previous.y1 + previous.y2 - current.y1 - current.y2) / 2,
    ) / ((size_prev + size_cur) / 2)
    if ratio > MAX_SIZE_RATIO or shift > MAX_SHIFT * (1 + 0.5 * (gap - 1)):
        return _INFEASIBLE
    return shift + math.log(ratio)
