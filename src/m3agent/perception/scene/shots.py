"""Shot boundaries from differences between consecutive sampled frames.

Each frame is reduced to a small HSV colour histogram (robust to motion inside a shot, unlike pixel
differences); a cut is where the Hellinger distance between neighbouring frames reaches the
threshold. Cuts closer than ``MIN_SHOT_S`` to the previous one are dropped (flashes, fast pans).
Frames are sampled at the media rate (2 fps by default), so a cut is placed at the first frame of
the new shot, up to one sample period late.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent.domain import Clip, Frame, Shot

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MIN_SHOT_S = 1.0
SAME_VIEW = 0.1  # signatures closer than this show the same view (talking heads 2 s apart: 0.07-0.1)
THUMB = (64, 36)
BINS = (8, 4, 4)


def detect_shots(frames: Sequence[Frame], clip: Clip, threshold: float) -> tuple[Shot, ...]:
    """The clip's shots in time order; they tile ``clip.start_s .. clip.end_s``.

    Raises :class:`ValueError` for a frame that is not an RGB ``uint8`` image.
    """
    if not frames:
        return (Shot(clip.start_s, clip.end_s, cut=False),)
    signatures = [signature(f.image) for f in frames]
    cuts: list[tuple[float, float]] = []
    last = clip.start_s
    for frame, before, after in zip(frames[1:], signatures, signatures[1:], strict=False):
        change = distance(before, after)
        if change >= threshold and frame.time_s - last >= MIN_SHOT_S:
            cuts.append((frame.time_s, change))
            last = frame.time_s
    return _tile(clip, cuts)


def _tile(clip: Clip, cuts: list[tuple[float, float]]) -> tuple[Shot, ...]:
    starts = [(clip.start_s, False, 0.0)] + [(t, True, c) for t, c in cuts]
    ends = [t for t, _ in cuts] + [clip.end_s]
    pairs = zip(starts, ends, strict=True)
    return tuple(Shot(start, end, cut, round(change, 3)) for (start, cut, change), end in pairs)


def signature(image: Any) -> npt.NDArray[np.float32]:
    """Normalised HSV histogram of a thumbnail of an RGB ``uint8`` (H, W, 3) image."""
    import cv2
    import numpy as np

    rgb = np.asarray(image)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3 or min(rgb.shape[:2]) < 2:
        raise ValueError(f"expected an RGB uint8 frame, got {rgb.dtype} {rgb.shape}")
    thumb = cv2.resize(rgb, THUMB, interpolation=cv2.INTER_AREA)
    hsv = cv2.cvtColor(thumb, cv2.COLOR_RGB2HSV)
    hist = cv2.calcHist([hsv], [0, 1, 2], None, list(BINS), [0, 180, 0, 256, 0, 256]).ravel()
    total = float(hist.sum())
    return (hist / total).astype(np.float32) if total else hist.astype(np.float32)


def same_view(a: npt.NDArray[np.float32] | None, b: npt.NDArray[np.float32]) -> bool:
    """Whether two frame signatures show the same view (nothing entered, left or moved much); False without ``a``.
    Text and objects reuse their last findings for such a frame rather than run their models again."""
    return a is not None and distance(a, b) < SAME_VIEW


def distance(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    """Hellinger distance of two normalised histograms: 0 same colours, 1 disjoint."""
    import numpy as np

    overlap = float(np.sqrt(a * b).sum())
    return float(np.sqrt(max(0.0, 1.0 - overlap)))
