"""A model-free embedder: signed feature hashing of word unigrams and bigrams.

It is a real lexical embedder (texts sharing words are close), deterministic
and instant, which makes it the embedder of choice for fast tests and for
machines without the MiniLM package. Semantic paraphrases are not matched.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.registry import BackendSpec

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Bag-of-words feature hashing into ``dim`` buckets, L2-normalised."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in _features(text):
                bucket, sign = self._slot(feature)
                out[row, bucket] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, 1e-12)
        return out

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0


def _features(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]


def create(spec: BackendSpec, **_: Any) -> HashingEmbedder:
    dim = int(spec.params.get("dim", spec.target or 256))
    return HashingEmbedder(dim=dim)
