"""Fundamental frequency (F0) of speech: a YIN estimator in numpy and mergeable per-voice statistics.

YIN (de Cheveigné & Kawahara 2002): for every 10 ms frame the squared-difference function of the
signal with itself at each lag is normalised by its running mean; the first dip below
``YIN_THRESHOLD`` between the lags of ``fmax`` and ``fmin`` is the period (refined by a parabola).
A frame is voiced when such a dip exists, the frame is loud enough (within ``ENERGY_FLOOR_DB`` of
the loud frames of the same audio) and it belongs to a run of at least ``MIN_RUN_FRAMES`` voiced
frames (lone frames are mostly noise). The correlation is computed with one FFT per frame.

Statistics keep a histogram of voiced frames in half-semitone bins, not the contour, so the
statistics of a voice's segments, computed when its audio is at hand, can be merged later
(:func:`combine_pitch`) into exact-to-the-bin statistics of the whole voice entity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.domain import ClipMedia, VoiceSegment

FMIN_HZ = 60.0  # below the lowest adult speaking F0 (deep male voices, ~65-70 Hz)
FMAX_HZ = 450.0  # above raised female and child speaking F0
HOP_S = 0.01
WINDOW_S = 0.03
YIN_THRESHOLD = 0.2  # 0.1-0.3 move per-speaker medians by <= 6 Hz on the dev speakers; 0.2 keeps more voiced frames
ENERGY_FLOOR_DB = 35.0
MIN_RUN_FRAMES = 3
HIST_FLOOR_HZ = 50.0
HIST_BINS_PER_OCTAVE = 24
HIST_BINS = 96  # 50 Hz .. 800 Hz
_CHUNK_FRAMES = 2048


@dataclass(frozen=True, slots=True, eq=False)
class F0Contour:
    """F0 in Hz per frame (``nan`` when unvoiced), frame ``i`` centred at ``(i * hop_s + window_s / 2)`` seconds."""

    f0_hz: npt.NDArray[np.float64]
    hop_s: float
    window_s: float

    @property
    def voiced(self) -> npt.NDArray[np.bool_]:
        import numpy as np

        return np.isfinite(self.f0_hz)


@dataclass(frozen=True, slots=True)
class PitchStats:
    """Voiced-frame F0 histogram of some speech: ``histogram[k]`` counts frames with
    F0 in ``HIST_FLOOR_HZ * 2 ** (k / 24) .. 2 ** ((k + 1) / 24)``; ``frames`` counts all frames analysed."""

    histogram: tuple[int, ...]
    frames: int
    hop_s: float = HOP_S
    segments: int = 1

    @property
    def voiced_frames(self) -> int:
        return sum(self.histogram)

    @property
    def voiced_s(self) -> float:
        return self.voiced_frames * self.hop_s

    @property
    def analysed_s(self) -> float:
        return self.frames * self.hop_s

    @property
    def voiced_share(self) -> float:
        return self.voiced_frames / self.frames if self.frames else 0.0

    @property
    def median_hz(self) -> float | None:
        return self.quantile_hz(0.5)

    def quantile_hz(self, q: float) -> float | None:
        """The ``q`` quantile of voiced F0 (log-linear inside a bin), ``None`` without voiced frames."""
        total = self.voiced_frames
        if not total:
            return None
        target = min(max(q, 0.0), 1.0) * total
        seen = 0
        for k, count in enumerate(self.histogram):
            if count and seen + count >= target:
                inside = (target - seen) / count
                return HIST_FLOOR_HZ * 2 ** ((k + inside) / HIST_BINS_PER_OCTAVE)
            seen += count
        return HIST_FLOOR_HZ * 2 ** (len(self.histogram) / HIST_BINS_PER_OCTAVE)


def f0_contour(audio: npt.ArrayLike, rate: int, *, fmin: float = FMIN_HZ, fmax: float = FMAX_HZ) -> F0Contour:
    """YIN F0 per 10 ms frame of mono ``audio`` at ``rate`` Hz (see the module docstring)."""
    import numpy as np

    signal = np.asarray(audio, dtype=np.float64).reshape(-1)
    hop = max(1, round(HOP_S * rate))
    window = max(round(WINDOW_S * rate), math.ceil(rate / fmin))
    max_lag = math.ceil(rate / fmin)
    min_lag = max(2, math.floor(rate / fmax))
    length = window + max_lag + 1
    if len(signal) < length:
        return F0Contour(np.full(0, np.nan), HOP_S, length / rate)
    signal = signal - signal.mean()
    count = 1 + (len(signal) - length) // hop
    periods = np.full(count, np.nan)
    for start in range(0, count, _CHUNK_FRAMES):
        stop = min(count, start + _CHUNK_FRAMES)
        frames = _frames(signal, start, stop, hop, length)
        periods[start:stop] = _yin_periods(frames, window, min_lag, max_lag)
    energy = _frame_energy_db(signal, count, hop, window)
    quiet = energy < np.percentile(energy, 95) - ENERGY_FLOOR_DB
    periods[quiet | (energy < -90.0)] = np.nan
    f0 = rate / periods
    return F0Contour(_drop_short_runs(f0, MIN_RUN_FRAMES), HOP_S, length / rate)


def _frames(signal: npt.NDArray[np.float64], start: int, stop: int, hop: int, length: int) -> npt.NDArray[np.float64]:
    import numpy as np

    index = (np.arange(start, stop) * hop)[:, None] + np.arange(length)[None, :]
    frames: npt.NDArray[np.float64] = signal[index]
    return frames


def _yin_periods(frames: npt.NDArray[np.float64], window: int, min_lag: int, max_lag: int) -> npt.NDArray[np.float64]:
    """Period in samples (fractional) per frame, ``nan`` where no dip reaches the threshold."""
    import numpy as np

    cmnd = _cmnd(frames, window, max_lag)
    lags = cmnd[:, min_lag : max_lag + 1]
    below = lags[:, :-1] < YIN_THRESHOLD
    rising = lags[:, 1:] >= lags[:, :-1]
    candidate = below & rising
    has = candidate.any(axis=1)
    first = candidate.argmax(axis=1)
    rows = np.arange(len(frames))
    tau = first + min_lag
    prev = cmnd[rows, np.maximum(tau - 1, 0)]
    here = cmnd[rows, tau]
    nxt = cmnd[rows, np.minimum(tau + 1, max_lag)]
    curve = prev - 2 * here + nxt
    shift = np.where(curve > 1e-12, 0.5 * (prev - nxt) / np.where(curve > 1e-12, curve, 1.0), 0.0)
    return np.where(has, tau + np.clip(shift, -1.0, 1.0), np.nan)


def _cmnd(frames: npt.NDArray[np.float64], window: int, max_lag: int) -> npt.NDArray[np.float64]:
    """Cumulative-mean-normalised difference d'(tau), tau = 0 .. max_lag, per frame."""
    import numpy as np

    size = 1 << (frames.shape[1] - 1).bit_length()
    spectrum = np.fft.rfft(frames, size, axis=1)
    head = np.fft.rfft(frames[:, :window], size, axis=1)
    corr = np.fft.irfft(np.conj(head) * spectrum, size, axis=1)[:, : max_lag + 1]
    squares = np.cumsum(np.pad(frames**2, ((0, 0), (1, 0))), axis=1)
    energy_at = squares[:, window : window + max_lag + 1] - squares[:, : max_lag + 1]
    diff = np.maximum(energy_at[:, :1] + energy_at - 2 * corr, 0.0)
    running = np.cumsum(diff[:, 1:], axis=1)
    taus = np.arange(1, max_lag + 1)
    out = np.ones_like(diff)
    out[:, 1:] = diff[:, 1:] * taus / np.where(running > 1e-12, running, 1e-12)
    return out


def _frame_energy_db(signal: npt.NDArray[np.float64], count: int, hop: int, window: int) -> npt.NDArray[np.float64]:
    import numpy as np

    squares = np.concatenate(([0.0], np.cumsum(signal**2)))
    starts = np.arange(count) * hop
    mean_square = (squares[starts + window] - squares[starts]) / window
    return 10 * np.log10(np.maximum(mean_square, 1e-12))


def _drop_short_runs(f0: npt.NDArray[np.float64], min_run: int) -> npt.NDArray[np.float64]:
    """``f0`` with voiced runs shorter than ``min_run`` frames set to ``nan``."""
    import numpy as np

    voiced = np.isfinite(f0)
    edges = np.diff(np.concatenate(([0], voiced.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    out = f0.copy()
    for start, end in zip(starts, ends, strict=True):
        if end - start < min_run:
            out[start:end] = np.nan
    return out


def stats_of_contour(contour: F0Contour) -> PitchStats:
    """The histogram statistics of one contour."""
    import numpy as np

    f0 = contour.f0_hz[np.isfinite(contour.f0_hz)]
    bins = np.floor(HIST_BINS_PER_OCTAVE * np.log2(f0 / HIST_FLOOR_HZ)).astype(np.int64)
    counts = np.bincount(np.clip(bins, 0, HIST_BINS - 1), minlength=HIST_BINS)
    return PitchStats(tuple(int(c) for c in counts), len(contour.f0_hz), contour.hop_s)


def pitch_stats(
    audio: npt.ArrayLike, rate: int, spans: Iterable[tuple[float, float]] | None = None
) -> PitchStats:
    """F0 statistics of ``audio`` (mono, ``rate`` Hz), or of its ``spans`` (seconds from the audio's start) merged.

    Spans outside the audio are cut to it; a span too short to analyse adds nothing.
    """
    import numpy as np

    signal = np.asarray(audio, dtype=np.float32).reshape(-1)
    if spans is None:
        return stats_of_contour(f0_contour(signal, rate))
    parts = []
    for start_s, end_s in spans:
        a, b = max(0, round(start_s * rate)), min(len(signal), round(end_s * rate))
        if b > a:
            parts.append(stats_of_contour(f0_contour(signal[a:b], rate)))
    return combine_pitch(parts)


def combine_pitch(parts: Sequence[PitchStats]) -> PitchStats:
    """Statistics of all ``parts`` together (e.g. every segment of one voice entity)."""
    if not parts:
        return PitchStats((0,) * HIST_BINS, 0, segments=0)
    histogram = tuple(sum(column) for column in zip(*(p.histogram for p in parts), strict=True))
    return PitchStats(histogram, sum(p.frames for p in parts), parts[0].hop_s, sum(p.segments for p in parts))


def segment_pitch(media: ClipMedia, segment: VoiceSegment) -> PitchStats:
    """F0 statistics of one voice segment of a clip (its absolute times cut to the clip's audio).

    A clip without audio gives empty statistics (no frames), which merge as nothing.
    """
    if media.audio is None:
        return combine_pitch(())
    offset = media.clip.start_s
    return pitch_stats(media.audio, media.audio_rate, [(segment.start_s - offset, segment.end_s - offset)])
