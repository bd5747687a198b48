"""The approximate nearest-neighbour index over memory vectors (usearch HNSW, cosine, int8).

Keys are memory ids. The index is derived data: it may hold keys that were
deleted since (callers re-check results against SQLite) and is rebuilt from
the rows whenever in doubt.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.errors import MissingExtraError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class HnswParams:
    """Graph degree and beam widths (measured in bench/store.py, see docs/benchmarks.md)."""

    connectivity: int = 32
    expansion_add: int = 96
    expansion_search: int = 512
    dtype: str = "i8"


def _usearch_index() -> Any:
    """The usearch ``Index`` class, loaded after onnxruntime.

    usearch 2.26 (with numkong 7.8) and onnxruntime 1.31 crash the process
    (SIGSEGV) when usearch's extension is loaded first and onnxruntime later,
    as happens when a search precedes embedding a query. Loading onnxruntime
    first is safe; tests/test_native_imports.py guards this.
    """
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401
    try:
        from usearch.index import Index
    except ImportError as exc:  # pragma: no cover - usearch is a core dependency
        raise MissingExtraError("the vector index", "core", package="usearch") from exc
    return Index


class HnswIndex:
    """A usearch HNSW index keyed by memory id."""

    def __init__(self, dim: int, params: HnswParams | None = None, *, _index: Any = None) -> None:
        self.dim = dim
        self.params = params or HnswParams()
        p = self.params
        self._index = _index or _usearch_index()(
            ndim=dim,
            metric="cos",
            dtype=p.dtype,
            connectivity=p.connectivity,
            expansion_add=p.expansion_add,
            expansion_search=p.expansion_search,
        )

    def __len__(self) -> int:
        return len(self._index)

    def add(self, ids: IntArray, vectors: FloatArray, *, threads: int = 0) -> None:
        if len(ids):
            self._index.add(ids, vectors, threads=threads)

    def remove(self, ids: IntArray) -> None:
        if len(ids):
            self._index.remove(ids)

    def search(self, query: FloatArray, count: int) -> IntArray:
        """Up to ``count`` approximate nearest keys, best first."""
        import numpy as np

        if not len(self._index) or count <= 0:
            return np.empty(0, np.int64)
        matches = self._index.search(query, min(count, len(self._index)), threads=1)
        return np.asarray(matches.keys, dtype=np.int64)

    def to_bytes(self) -> bytes:
        return bytes(self._index.save())

    @classmethod
    def from_bytes(cls, data: bytes, dim: int, params: HnswParams) -> HnswIndex:
        index = _usearch_index().restore(data)
        if index is None or index.ndim != dim:
            raise ValueError("stored HNSW index does not match the memory dimension")
        index.expansion_search = params.expansion_search  # not kept by the serialised form
        index.expansion_add = params.expansion_add
        return cls(dim, params, _index=index)
