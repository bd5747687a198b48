"""Resample decoded audio to mono float32 at a fixed rate and cut it at exact sample positions.

Samples are placed by their presentation time (resampler output pts), so a gap
in the stream becomes silence and overlapping packets are not counted twice;
small timestamp jitter (< ``JITTER_S``) is absorbed to keep the signal contiguous.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from av import AudioFrame

JITTER_S = 0.04


class AudioTrack:
    """Accumulates audio for clips not yet handed out.

    Positions are absolute sample indices at ``rate`` on the clip timeline
    (time 0 = start of the source). ``offset_s`` is subtracted from stream times.
    """

    def __init__(self, rate: int, offset_s: float, keep_from_s: float) -> None:
        import av

        self.rate = rate
        self._offset_s = offset_s
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        self._chunks: list[npt.NDArray[np.float32]] = []
        self._buf_start = round(keep_from_s * rate)  # absolute index of the first buffered sample
        self._buffered = 0
        self._cursor: int | None = None  # absolute index after the last sample received
        self.late_samples = 0

    @property
    def end_s(self) -> float:
        """Time just after the last sample received (0 before any)."""
        return 0.0 if self._cursor is None else self._cursor / self.rate

    def add(self, frame: AudioFrame | None) -> None:
        """Feed a decoded frame; ``None`` flushes the resampler at the end of the stream."""
        for out in self._resampler.resample(frame):
            self._place(out)

    def _place(self, out: AudioFrame) -> None:
        import numpy as np

        samples = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
        start = self._start_index(out)
        if self._cursor is not None and abs(start - self._cursor) <= JITTER_S * self.rate:
            start = self._cursor
        end = start + len(samples)
        buf_end = self._buf_start + self._buffered
        if start < buf_end:  # overlap with what is buffered, or before the window we still keep
            skip = buf_end - start
            self.late_samples += max(0, min(skip, len(samples)))
            samples = samples[skip:]
            start = buf_end
        elif start > buf_end:  # a gap: fill with silence
            self._append(np.zeros(start - buf_end, dtype=np.float32))
        if len(samples):
            self._append(samples)
        self._cursor = max(self._cursor or 0, end)

    def _start_index(self, out: AudioFrame) -> int:
        if out.pts is None or out.time_base is None:
            return self._cursor if self._cursor is not None else self._buf_start
        return round((float(out.pts * out.time_base) - self._offset_s) * self.rate)

    def _append(self, samples: npt.NDArray[np.float32]) -> None:
        self._chunks.append(samples)
        self._buffered += len(samples)

    def cut(self, start_s: float, end_s: float) -> npt.NDArray[np.float32]:
        """Samples of [start_s, end_s), silence where nothing was received; drops everything before end_s."""
        import numpy as np

        a, b = round(start_s * self.rate), round(end_s * self.rate)
        data = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.float32)
        out = np.zeros(b - a, dtype=np.float32)
        lo, hi = max(a, self._buf_start), min(b, self._buf_start + len(data))
        if hi > lo:
            out[lo - a : hi - a] = data[lo - self._buf_start : hi - self._buf_start]
        rest = data[max(0, b - self._buf_start) :]
        self._chunks = [rest] if len(rest) else []
        self._buffered = len(rest)
        self._buf_start = max(b, self._buf_start)
        return out
