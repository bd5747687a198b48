"""Voice activity detection with the Silero v6 ONNX model bundled in faster-whisper (no downloads).

The model is run once per clip (:func:`speech_probabilities`); different
segmentations (tight ones for speaker embeddings, generous ones for output
turns and ASR) are then cut from the same probabilities by :func:`speech_regions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.errors import MissingExtraError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

VAD_RATE = 16000
WINDOW = 512  # samples per Silero decision (32 ms at 16 kHz)
VOICE_PACKAGES = "faster-whisper resemblyzer"


@dataclass(frozen=True, slots=True)
class VadParams:
    """Hysteresis segmentation of speech probabilities.

    Speech starts where the probability reaches ``threshold`` and lasts while it
    stays above ``threshold - 0.15``; pauses shorter than ``min_silence_s`` are
    bridged, regions are widened by ``pad_s`` each side, and regions shorter than
    ``min_speech_s`` are dropped.
    """

    threshold: float = 0.5
    min_silence_s: float = 0.1
    pad_s: float = 0.03
    min_speech_s: float = 0.1


TIGHT = VadParams(threshold=0.5, min_silence_s=0.1, pad_s=0.03)
"""Only clear speech: what speaker embeddings are computed from."""
GENEROUS = VadParams(threshold=0.4, min_silence_s=0.3, pad_s=0.15)
"""Speech with its edges: what speaker turns and the transcriber cover."""


def speech_probabilities(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Silero speech probability for each 32 ms window of 16 kHz mono ``audio``."""
    import numpy as np

    try:
        from faster_whisper.vad import get_vad_model
    except ImportError:
        raise MissingExtraError("voice activity detection", "voices", package=VOICE_PACKAGES) from None
    if len(audio) == 0:
        return np.zeros(0, dtype=np.float32)
    padded = np.pad(audio.astype(np.float32, copy=False), (0, (-len(audio)) % WINDOW))
    return np.asarray(get_vad_model()(padded), dtype=np.float32).reshape(-1)


def speech_regions(probs: npt.NDArray[np.float32], params: VadParams, duration_s: float) -> list[tuple[float, float]]:
    """Speech regions ``(start_s, end_s)`` in time order, within ``[0, duration_s]``."""
    step = WINDOW / VAD_RATE
    raw = _hysteresis(probs, params.threshold, max(0.01, params.threshold - 0.15))
    merged = _bridge([(a * step, b * step) for a, b in raw], params.min_silence_s)
    padded = [(max(0.0, a - params.pad_s), min(duration_s, b + params.pad_s)) for a, b in merged]
    regions = _bridge(padded, 0.0)
    return [(a, b) for a, b in regions if b - a >= params.min_speech_s]


def _hysteresis(probs: npt.NDArray[np.float32], on: float, off: float) -> list[tuple[int, int]]:
    """Runs of windows that start at ``>= on`` and continue while ``>= off`` (window indices)."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for i, p in enumerate(probs.tolist()):
        if start is None and p >= on:
            start = i
        elif start is not None and p < off:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(probs)))
    return runs


def _bridge(regions: list[tuple[float, float]], max_gap_s: float) -> list[tuple[float, float]]:
    """Join regions separated by at most ``max_gap_s`` (also joins overlapping ones)."""
    out: list[tuple[float, float]] = []
    for a, b in regions:
        if out and a - out[-1][1] <= max_gap_s:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
