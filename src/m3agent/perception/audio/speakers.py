"""Speaker embeddings: the GE2E d-vector encoder shipped in the ``resemblyzer`` wheel (256-d, CPU).

Only the weights file is taken from the package; the 3-layer LSTM and the
40-band mel front end are defined here, so the encoder loads in well under a
second without importing librosa/numba. Inputs are 16 kHz mono float32.
Embeddings are L2-normalised, so cosine similarity is a dot product.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import MissingExtraError, ModelError
from m3agent.packages import package_dir

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

RATE = 16000
N_FFT = 400  # 25 ms
HOP = 160  # 10 ms: one mel frame
N_MELS = 40
WINDOW_FRAMES = 160  # 1.6 s, the partial-utterance length the encoder was trained on
TARGET_DBFS = -30.0
EMBEDDING_DIM = 256


def encoder_weights_path() -> Path:
    """``pretrained.pt`` inside the installed resemblyzer package (found without importing it)."""
    folder = package_dir("resemblyzer")
    if folder is None:
        raise MissingExtraError("speaker embeddings", "voices", package="resemblyzer")
    path = folder / "pretrained.pt"
    if not path.is_file():
        raise ModelError(f"the resemblyzer package has no weights at {path}", hint="reinstall resemblyzer")
    return path


def normalise_volume(
    audio: npt.NDArray[np.float32], reference: npt.NDArray[np.float32] | None = None
) -> npt.NDArray[np.float32]:
    """Scale ``audio`` so ``reference`` (default: itself) sits at -30 dBFS, the encoder's training level."""
    import numpy as np

    ref = audio if reference is None or len(reference) == 0 else reference
    rms = float(np.sqrt(np.mean(np.square(ref, dtype=np.float64)))) if len(ref) else 0.0
    if rms < 1e-6:
        return audio
    return (audio * (10 ** (TARGET_DBFS / 20) / rms)).astype(np.float32)


def mel_frames(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Power mel spectrogram (frames, 40): 25 ms Hann windows every 10 ms, centred, Slaney mel bands."""
    import numpy as np

    padded = np.pad(audio.astype(np.float32, copy=False), N_FFT // 2)
    n_frames = 1 + (len(padded) - N_FFT) // HOP
    if n_frames <= 0:
        return np.zeros((0, N_MELS), dtype=np.float32)
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    spectrum = np.abs(np.fft.rfft(padded[idx] * _hann(), axis=1)) ** 2
    return (spectrum @ _mel_filterbank().T).astype(np.float32)


@lru_cache(maxsize=1)
def _hann() -> npt.NDArray[np.float64]:
    import numpy as np

    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann


@lru_cache(maxsize=1)
def _mel_filterbank() -> npt.NDArray[np.float64]:
    """Triangular Slaney-scale filters with area normalisation, shape (40, N_FFT // 2 + 1)."""
    import numpy as np

    fft_hz = np.linspace(0, RATE / 2, N_FFT // 2 + 1)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(RATE / 2), N_MELS + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_hz[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling)) * (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return np.asarray(weights, dtype=np.float64)


_F_SP = 200.0 / 3  # Hz per mel below 1 kHz (Slaney)
_LOG_STEP = 0.06875177742094912  # ln(6.4) / 27


def _hz_to_mel(hz: Any) -> Any:
    import numpy as np

    hz = np.asarray(hz, dtype=np.float64)
    linear = hz / _F_SP
    return np.where(hz >= 1000.0, 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / _LOG_STEP, linear)


def _mel_to_hz(mel: Any) -> Any:
    import numpy as np

    mel = np.asarray(mel, dtype=np.float64)
    return np.where(mel >= 15.0, 1000.0 * np.exp(_LOG_STEP * (mel - 15.0)), _F_SP * mel)


class SpeakerEncoder:
    """The d-vector network, loaded once on first use. Thread-safe loading; inference is read-only.

    Loading sets torch's thread count to ``threads`` (and flushes denormals); the
    LSTM itself runs with ``inference_threads`` intra-op threads (default 1): on the
    2 shared cores, one thread embedded 115 windows in 0.55 s where two took
    2.6-4.2 s, because OpenMP workers spin against the other perception work.
    """

    def __init__(self, threads: int = 2, weights: Path | None = None, inference_threads: int = 1) -> None:
        self.threads = threads
        self.inference_threads = inference_threads
        self._weights = weights
        self._net: Any = None
        self._lock = threading.Lock()

    def _model(self) -> Any:
        with self._lock:
            if self._net is None:
                self._net = _load_network(self._weights or encoder_weights_path(), self.threads)
        return self._net

    def embed_windows(
        self, audio: npt.NDArray[np.float32], hop_frames: int = 25, window_frames: int = WINDOW_FRAMES
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Embeddings of windows of ``window_frames`` mel frames every ``hop_frames`` (10 ms frames).

        Returns ``(embeddings (n, 256), start frame of each window)``. The last window
        is aligned to the end; audio shorter than one window gives one window in which
        the audio is repeated (a repeated voice embeds like the voice, unlike silence).
        """
        import numpy as np

        mel = mel_frames(audio)
        if len(mel) < window_frames:
            filled = np.resize(mel, (window_frames, N_MELS)) if len(mel) else np.zeros((window_frames, N_MELS))
            mel = np.asarray(filled, dtype=np.float32)
        starts = list(range(0, len(mel) - window_frames + 1, hop_frames))
        if starts[-1] != len(mel) - window_frames:
            starts.append(len(mel) - window_frames)
        batch = np.stack([mel[s : s + window_frames] for s in starts])
        return self._forward(batch), np.asarray(starts, dtype=np.int64)

    def embed(self, audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """One embedding for an utterance: the normalised mean of its half-overlapping windows."""
        import numpy as np

        windows, _ = self.embed_windows(normalise_volume(audio), hop_frames=WINDOW_FRAMES // 2)
        mean = windows.mean(axis=0)
        return np.asarray(mean / max(float(np.linalg.norm(mean)), 1e-9), dtype=np.float32)

    def _forward(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        import numpy as np
        import torch

        net = self._model()
        out = []
        previous = torch.get_num_threads()
        torch.set_num_threads(self.inference_threads)
        try:
            with torch.inference_mode():
                for i in range(0, len(batch), 128):
                    out.append(net(torch.from_numpy(batch[i : i + 128])).numpy())
        finally:
            torch.set_num_threads(previous)
        return np.concatenate(out).astype(np.float32)


def _load_network(path: Path, threads: int) -> Any:
    try:
        import torch
    except ImportError:
        raise MissingExtraError("speaker embeddings", "voices", package="torch==2.13.0") from None
    torch.set_flush_denormal(True)
    torch.set_num_threads(threads)
    net = _build_network(torch)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)["model_state"]
        net.load_state_dict({k: v for k, v in state.items() if not k.startswith("similarity_")})
    except (OSError, KeyError, RuntimeError) as exc:
        raise ModelError(f"cannot load the speaker encoder from {path}: {exc}") from None
    return net.eval()


def _build_network(torch: Any) -> Any:
    class DVector(torch.nn.Module):  # type: ignore[misc]
        """GE2E speaker encoder: 3-layer LSTM over 40 mel bands, last state -> ReLU(linear) -> unit norm."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(N_MELS, 256, 3, batch_first=True)
            self.linear = torch.nn.Linear(256, EMBEDDING_DIM)

        def forward(self, mels: Any) -> Any:
            _, (hidden, _) = self.lstm(mels)
            raw = torch.relu(self.linear(hidden[-1]))
            return raw / torch.linalg.vector_norm(raw, dim=1, keepdim=True).clamp_min(1e-9)

    return DVector()
