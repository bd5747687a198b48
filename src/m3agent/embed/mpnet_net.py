"""The MPNet encoder of all-mpnet-base-v2 in plain torch, read from its ``model.safetensors``.

A 12-layer post-norm transformer (768-d, 12 heads, GELU feed-forward) with
learned absolute positions (offset past the padding id, as in RoBERTa) and a
relative-position attention bias in 32 bidirectional log-spaced buckets that
all layers share. Written here so the embedder needs only torch, not the
transformers library (whose import alone takes longer than loading the model).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PAD_ID = 1
HEADS = 12
LAYERS = 12
BUCKETS = 32
MAX_DISTANCE = 128
EPS = 1e-5
_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a ``.safetensors`` file (header length, JSON header, raw little-endian data)."""
    import numpy as np
    import torch

    with path.open("rb") as file:
        (size,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(size))
    data = np.memmap(path, np.uint8, mode="r", offset=8 + size)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        array = np.frombuffer(data[start:end].tobytes(), dtype)
        tensors[name] = torch.from_numpy(array.reshape(info["shape"]).copy())
    return tensors


def relative_buckets(length: int) -> torch.Tensor:
    """``(length, length)`` bucket of each key position relative to each query position."""
    import torch

    position = torch.arange(length)
    relative = position[None, :] - position[:, None]
    half = BUCKETS // 2
    bucket = (relative > 0).long() * half
    distance = relative.abs()
    exact = half // 2
    scaled = torch.log(distance.clamp(min=1).float() / exact) / math.log(MAX_DISTANCE / exact) * (half - exact)
    large = (exact + scaled.long()).clamp(max=half - 1)
    return bucket + torch.where(distance < exact, distance, large)


class MPNetEncoder:
    """Token ids and attention mask in, last hidden states out (inference only, no autograd)."""

    def __init__(self, weights: dict[str, Any]) -> None:
        self.w = weights

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        import torch

        with torch.inference_mode():
            hidden = self._embed(ids, mask)
            bias = self.w["encoder.relative_attention_bias.weight"][relative_buckets(ids.shape[1])]
            bias = bias.permute(2, 0, 1)[None] + (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
            for layer in range(LAYERS):
                hidden = self._layer(f"encoder.layer.{layer}.", hidden, bias)
            return hidden

    def _embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        positions = mask.long().cumsum(dim=1) * mask.long() + PAD_ID
        words, places = self.w["embeddings.word_embeddings.weight"], self.w["embeddings.position_embeddings.weight"]
        x = words[ids] + places[positions]
        return F.layer_norm(x, x.shape[-1:], *self._norm("embeddings.LayerNorm"), eps=EPS)

    def _layer(self, prefix: str, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        attended = self._linear(prefix + "attention.attn.o", self._attention(prefix + "attention.attn.", x, bias))
        x = F.layer_norm(x + attended, x.shape[-1:], *self._norm(prefix + "attention.LayerNorm"), eps=EPS)
        inner = F.gelu(self._linear(prefix + "intermediate.dense", x))
        out = self._linear(prefix + "output.dense", inner)
        return F.layer_norm(x + out, x.shape[-1:], *self._norm(prefix + "output.LayerNorm"), eps=EPS)

    def _attention(self, prefix: str, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        batch, length, width = x.shape
        q, k, v = (self._linear(prefix + n, x).view(batch, length, HEADS, -1).transpose(1, 2) for n in "qkv")
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return context.transpose(1, 2).reshape(batch, length, width)

    def _linear(self, name: str, x: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def _norm(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        return self.w[name + ".weight"], self.w[name + ".bias"]
