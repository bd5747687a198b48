"""Pick frames at a fixed rate from a decoded video stream and turn them into upright RGB arrays.

Sampling is by presentation time, so variable frame rate and dropped frames are
handled: the sample at time ``s`` is the decoded frame whose time is nearest to
``s`` within the same clip, and a frame is never returned twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.domain import Frame

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from av import VideoFrame


def scaled_size(width: float, height: float, max_side: int) -> tuple[int, int]:
    """The size a ``width`` x ``height`` picture is sampled at: downscaled so its longer side is at most
    ``max_side`` (``media.max_frame_side``), never upscaled. Face boxes are in this picture's pixels."""
    scale = min(1.0, max_side / max(width, height))
    return max(2, round(width * scale)), max(2, round(height * scale))


def to_upright_rgb(frame: VideoFrame, max_side: int) -> npt.NDArray[np.uint8]:
    """RGB ``uint8`` (H, W, 3) as the frame is meant to be displayed, longer side <= ``max_side``.

    Applies the display matrix (rotation metadata) and the sample aspect ratio.
    """
    import numpy as np

    out_w, out_h = scaled_size(frame.width * _sample_aspect_ratio(frame), float(frame.height), max_side)
    rgb: npt.NDArray[np.uint8]
    if out_w == frame.width and out_h == frame.height:
        rgb = frame.to_ndarray(format="rgb24")  # type: ignore[assignment]
    else:
        small = frame.reformat(width=out_w, height=out_h, format="rgb24", interpolation="AREA")
        rgb = small.to_ndarray()  # type: ignore[assignment]
    quarter_turns = round(rotation(frame) / 90.0) % 4
    if quarter_turns:
        rgb = np.ascontiguousarray(np.rot90(rgb, k=quarter_turns))
    return rgb


def rotation(frame: VideoFrame) -> float:
    """Counter-clockwise degrees the display matrix asks for (0 when absent)."""
    try:
        value = frame.rotation
    except (AttributeError, ValueError):
        return 0.0
    return float(value) if value and math.isfinite(value) else 0.0


def _sample_aspect_ratio(frame: VideoFrame) -> float:
    sar: Any = getattr(frame, "sample_aspect_ratio", None)
    try:
        value = float(sar) if sar else 1.0
    except (TypeError, ZeroDivisionError):
        return 1.0
    return value if 0.2 < value < 5.0 else 1.0


@dataclass(slots=True)
class _Held:
    time_s: float
    frame: VideoFrame


class FrameSampler:
    """Streams decoded frames in, hands sampled :class:`Frame` values out per clip.

    ``clip_of(t)`` maps a time to its clip index; samples are at ``k / fps``.
    Emitted frames are collected in ``self.ready`` as ``(clip_index, Frame)``.
    """

    def __init__(self, fps: float, max_side: int, clip_seconds: float, first_time_s: float) -> None:
        self._period = 1.0 / fps
        self._max_side = max_side
        self._clip_s = clip_seconds
        self._next_k = max(0, math.ceil(first_time_s * fps - 1e-6))
        self._first_time = first_time_s
        self._held: _Held | None = None
        self._last_emitted: float | None = None
        self.ready: list[tuple[int, Frame]] = []
        self.size: tuple[int, int] = (0, 0)

    def _clip_of(self, t: float) -> int:
        return math.floor(t / self._clip_s + 1e-9)

    def add(self, time_s: float, frame: VideoFrame) -> None:
        """Feed the next decoded frame (in presentation order)."""
        current = _Held(time_s, frame)
        while self._sample_time() <= time_s:
            self._take_sample(self._sample_time(), current)
            self._next_k += 1
        self._held = current

    def finish(self, end_s: float) -> None:
        """The stream ended at ``end_s``: samples up to there show the last frame."""
        while self._held is not None and self._sample_time() < end_s:
            self._take_sample(self._sample_time(), None)
            self._next_k += 1

    def _sample_time(self) -> float:
        return self._next_k * self._period

    def _take_sample(self, s: float, after: _Held | None) -> None:
        clip = self._clip_of(s)
        candidates = [h for h in (self._held, after) if h is not None and self._clip_of(h.time_s) == clip]
        candidates = [h for h in candidates if h.time_s >= self._first_time - 1e-6]
        if not candidates:
            return
        best = min(candidates, key=lambda h: abs(h.time_s - s))
        if self._last_emitted is not None and best.time_s <= self._last_emitted:
            return
        image = to_upright_rgb(best.frame, self._max_side)
        self.size = (int(image.shape[1]), int(image.shape[0]))
        self.ready.append((clip, Frame(time_s=best.time_s, image=image)))
        self._last_emitted = best.time_s


def encode_jpeg(rgb: Any, max_side: int, quality: int) -> bytes:
    """JPEG of an RGB ``uint8`` array, downscaled so its longer side is at most ``max_side``.

    Returns ``b""`` when the image cannot be encoded (e.g. it is empty).
    """
    import cv2
    import numpy as np

    image: Any = np.ascontiguousarray(rgb, dtype=np.uint8)
    if image.size == 0:
        return b""
    longest = max(image.shape[:2])
    if longest > max_side:
        scale = max_side / longest
        size = (max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale)))
        image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    ok, data = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    return bytes(data.tobytes()) if ok else b""

