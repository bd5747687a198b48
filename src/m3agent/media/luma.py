"""Grey (luma) frames of a local video file inside time windows: measurements at video rate.

The clips carry frames at ``frame_fps`` only (2 fps by default), too far apart to see lips move.
Active speaker detection needs consecutive video frames, but only while a voice is heard, so the
file is decoded again inside those windows alone. Only the luma plane is taken (no colour
conversion, no scaling): the frame at the file's own resolution, turned upright.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.domain import VideoSource
from m3agent.media.frames import rotation
from m3agent.media.sources import open_source

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

PLANAR_YUV = frozenset({"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p"})
DECODE_OPTIONS = {"skip_loop_filter": "all"}
"""FFmpeg decoder options: no deblocking (a fifth of an H.264 decode; the mouth's optical flow on the faces
measured the same without it, docs/benchmarks.md)."""
EDGE_S = 1e-3  # frame times are floats computed the same way as the clips'; this absorbs rounding


@dataclass(frozen=True, slots=True, eq=False)
class LumaFrame:
    """One decoded frame's grey (luma) image, upright, ``uint8`` (H, W), at media time ``time_s``."""

    time_s: float
    image: npt.NDArray[np.uint8]


def luma_frames(source: VideoSource, windows: Sequence[tuple[float, float]],
                max_fps: float) -> Iterator[LumaFrame]:
    """Frames of ``source`` with media times inside ``windows`` (sorted, disjoint; media seconds), at
    most ``max_fps`` per second (frames closer than ``1 / max_fps`` to the last one handed out are decoded
    but skipped). Every frame is decoded: without the non-reference ones (as the clips' 2 fps samples are
    decoded) a 25 fps stream gives frames 0.04-0.08 s apart, and lip sync on them lost most of its margin
    (docs/benchmarks.md). Each window starts with a seek to the keyframe before it."""
    if not windows:
        return
    with closing(open_source(source.path)) as container:
        stream = next((s for s in container.streams.video), None)
        if stream is None:
            return
        stream.codec_context.options = dict(DECODE_OPTIONS)
        for start, end in windows:
            yield from _window(container, stream, source.origin_s, (start, end), 1.0 / max_fps)


def _window(container: Any, stream: Any, origin_s: float, window: tuple[float, float],
            min_step: float) -> Iterator[LumaFrame]:
    start, end = window
    container.seek(int((start + origin_s) * 1_000_000), backward=True, any_frame=False)
    last: float | None = None
    for packet in container.demux(stream):
        for frame in packet.decode():
            if frame.time is None:
                continue
            time_s = float(frame.time) - origin_s
            if time_s > end + EDGE_S:
                return
            if time_s < start - EDGE_S or (last is not None and time_s - last < min_step - EDGE_S):
                continue
            last = time_s
            yield LumaFrame(time_s, _luma(frame))


def _luma(frame: Any) -> npt.NDArray[np.uint8]:
    """The frame's luma plane, upright (the display matrix applied, as for the clips' frames). Of planar YUV
    it is the first plane itself (no copy; converting 1080p to grey took as long as decoding it)."""
    import numpy as np

    grey: npt.NDArray[np.uint8]
    if frame.format.name in PLANAR_YUV:
        plane = frame.planes[0]
        grey = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:, :frame.width]
    else:
        grey = frame.to_ndarray(format="gray")
    quarter_turns = round(rotation(frame) / 90.0) % 4
    return np.ascontiguousarray(np.rot90(grey, k=quarter_turns)) if quarter_turns else grey
