"""Still picture (a photo, a slide, a title card) or live video, per shot, from inter-frame change.

Each frame becomes a grey thumbnail ``THUMB_WIDTH`` pixels wide (area-averaged, then a 3x3 blur, which
removes most codec noise); the change between two frames is the share of thumbnail pixels whose grey
level moved by more than ``PIXEL_CHANGE`` (of 255). Frames closer than ``MIN_GAP_S`` are skipped so the
measure means the same at any sampling rate. A shot's motion is the median change over its frame pairs,
so one flash or a cut placed a frame late does not decide it.

Thresholds: encoded stills measured 0.0-0.1 % and live shots 2.3 % or more (a seated man in a restaurant,
a close shot of a seated president) on the shared media; ``still`` below ``STILL_BELOW`` (0.5 %),
``live`` from ``LIVE_FROM`` (1.5 %), ``uncertain`` between. A still shown with a slow zoom or pan (the
"Ken Burns" effect), or with a fade over most of the frame, reads as live.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from m3agent.domain import Frame, Shot

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

ShotKind = Literal["still", "live", "uncertain"]

THUMB_WIDTH = 160
PIXEL_CHANGE = 12
MIN_GAP_S = 0.4
STILL_BELOW = 0.005
LIVE_FROM = 0.015
CONFIDENT_PAIRS = 3
_CONFIDENCE_LOG_SCALE = math.log(4.0)
_MOTION_FLOOR = 1e-4


@dataclass(frozen=True, slots=True)
class ShotMotion:
    """Whether a shot shows a still picture or live video, with a confidence in [0, 1] (0 for ``uncertain``).

    ``motion`` is the median share of changed pixels between frame pairs (``None`` with no pair);
    ``pairs`` how many pairs were compared; ``evidence`` says what it was computed from.
    """

    kind: ShotKind
    confidence: float
    motion: float | None
    pairs: int
    evidence: str


def frame_change(image_a: Any, image_b: Any) -> float:
    """Share of pixels (0..1) that changed between two RGB ``uint8`` images of one size."""
    import numpy as np

    a, b = _thumb(image_a), _thumb(image_b)
    if a.shape != b.shape:
        raise ValueError(f"frames differ in size: {np.shape(image_a)} vs {np.shape(image_b)}")
    return float((np.abs(a - b) > PIXEL_CHANGE).mean())


def _thumb(image: Any) -> npt.NDArray[np.int16]:
    import cv2
    import numpy as np

    rgb = np.ascontiguousarray(image)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3 or min(rgb.shape[:2]) < 2:
        raise ValueError(f"expected an RGB uint8 frame, got {rgb.dtype} {rgb.shape}")
    grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    width = min(THUMB_WIDTH, grey.shape[1])
    height = max(2, round(grey.shape[0] * width / grey.shape[1]))
    small = cv2.resize(grey, (width, height), interpolation=cv2.INTER_AREA)
    return cv2.GaussianBlur(small, (3, 3), 0).astype(np.int16)  # type: ignore[no-any-return]


def shot_motion(frames: Sequence[Frame]) -> ShotMotion:
    """Still or live for the frames of one shot (time order); fewer than two usable frames give ``uncertain``."""
    kept = _spaced(frames)
    thumbs = [_thumb(f.image) for f in kept]
    changes = sorted(float((abs(a - b) > PIXEL_CHANGE).mean()) for a, b in itertools.pairwise(thumbs))
    if not changes:
        return ShotMotion("uncertain", 0.0, None, 0, f"{len(frames)} frame(s): nothing to compare")
    motion = _median(changes)
    pairs = len(changes)
    evidence = (f"median {motion:.2%} of pixels changed over {pairs} frame pair(s) "
                f"(range {changes[0]:.2%}-{changes[-1]:.2%}, frames >= {MIN_GAP_S} s apart)")
    support = min(1.0, pairs / CONFIDENT_PAIRS)
    if motion < STILL_BELOW:
        margin = math.log(STILL_BELOW / max(motion, _MOTION_FLOOR))
        return ShotMotion("still", _confidence(margin, support), motion, pairs, evidence)
    if motion >= LIVE_FROM:
        margin = math.log(motion / LIVE_FROM)
        return ShotMotion("live", _confidence(margin, support), motion, pairs, evidence)
    return ShotMotion("uncertain", 0.0, motion, pairs, evidence)


def shots_motion(frames: Sequence[Frame], shots: Sequence[Shot]) -> list[ShotMotion]:
    """:func:`shot_motion` of each shot, over the frames whose time falls inside it (the last shot keeps its end)."""
    out = []
    for number, shot in enumerate(shots):
        last = number == len(shots) - 1
        inside = [f for f in frames if shot.start_s <= f.time_s < shot.end_s or (last and f.time_s == shot.end_s)]
        out.append(shot_motion(inside))
    return out


def _spaced(frames: Sequence[Frame]) -> list[Frame]:
    """Frames at least ``MIN_GAP_S`` apart, from the first on."""
    kept: list[Frame] = []
    for frame in frames:
        if not kept or frame.time_s - kept[-1].time_s >= MIN_GAP_S - 1e-6:
            kept.append(frame)
    return kept


def _confidence(log_margin: float, support: float) -> float:
    return round((0.5 + 0.5 * math.tanh(log_margin / _CONFIDENCE_LOG_SCALE)) * support, 3)


def _median(ordered: Sequence[float]) -> float:
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
