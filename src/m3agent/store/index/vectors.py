"""Float32 vector blobs and an in-memory, filterable int8 copy of the memory vectors.

SQLite rows hold the exact float32 vectors. :class:`VectorMirror` keeps, per
memory, the columns a :class:`SearchFilter` needs plus an int8 copy of the
vector quantised with its own scale (error ~1e-3 in cosine), so filters and
exact scoring over a subset run in numpy without touching SQLite.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.errors import IntegrityError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.domain import Vector

    BoolArray = npt.NDArray[np.bool_]
    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float32]

KIND_CODES = {"episodic": 0, "semantic": 1}
SCORE_BLOCK = 1 << 18  # int8 codes (rows x dim) scored per matrix-vector product: see VectorMirror.scores


def to_blob(vector: Vector | Sequence[float]) -> bytes:
    """Little-endian float32 bytes of a 1-d vector."""
    import numpy as np

    array = np.asarray(vector, dtype="<f4")
    if array.ndim != 1 or array.size == 0:
        raise IntegrityError(f"expected a non-empty 1-d vector, got shape {array.shape}")
    return array.tobytes()


def from_blob(blob: bytes) -> Vector:
    import numpy as np

    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def normalized(vector: Vector | Sequence[float]) -> Vector:
    """``vector`` as float32 with unit L2 norm; a zero or non-finite vector is refused."""
    import numpy as np

    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(array))
    if not np.isfinite(norm) or norm == 0.0:
        raise IntegrityError("an embedding must be finite and non-zero")
    return array / norm


def quantize(vectors: FloatArray) -> tuple[npt.NDArray[np.int8], FloatArray]:
    """Per-row symmetric int8 codes and scales: ``row ~= codes * scale``."""
    import numpy as np

    peak = np.abs(vectors).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.rint(vectors / scales[:, None]).astype(np.int8)
    return codes, scales


@dataclass
class MirrorRows:
    """A batch of memory rows to add to a :class:`VectorMirror` (ids ascending)."""

    ids: IntArray
    video: IntArray
    clip: IntArray
    kind: IntArray
    start: FloatArray
    end: FloatArray
    vectors: FloatArray


@dataclass(frozen=True, slots=True)
class MirrorFilter:
    """A :class:`SearchFilter` resolved to mirror codes (video row ids, kind codes, memory ids)."""

    videos: tuple[int, ...] | None = None
    before_clip: int | None = None
    start_s: float | None = None
    end_s: float | None = None
    kinds: tuple[int, ...] | None = None
    memory_ids: IntArray | None = None
    exclude: tuple[tuple[int, int], ...] = ()


_COLUMNS = ("ids", "video", "clip", "kind", "start", "end", "codes", "scales", "alive")


class VectorMirror:
    """Growable columns of (id, video, clip, kind, start, end, int8 vector, scale, alive)."""

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.dim = dim
        self.size = 0
        self.n_dead = 0
        self._cols: dict[str, Any] = {
            "ids": np.empty(0, np.int64),
            "video": np.empty(0, np.int64),
            "clip": np.empty(0, np.int32),
            "kind": np.empty(0, np.int8),
            "start": np.empty(0, np.float32),
            "end": np.empty(0, np.float32),
            "codes": np.empty((0, dim), np.int8),
            "scales": np.empty(0, np.float32),
            "alive": np.empty(0, np.bool_),
        }

    def col(self, name: str) -> Any:
        """The live prefix of column ``name``."""
        return self._cols[name][: self.size]

    @property
    def n_alive(self) -> int:
        return self.size - self.n_dead

    @property
    def max_id(self) -> int:
        return int(self._cols["ids"][self.size - 1]) if self.size else 0

    def append(self, rows: MirrorRows) -> None:
        """Add rows whose ids are all larger than any id already here."""
        n = len(rows.ids)
        if n == 0:
            return
        if self.size and int(rows.ids[0]) <= self.max_id:
            raise ValueError("mirror rows must arrive in ascending id order")
        self._reserve(self.size + n)
        codes, scales = quantize(rows.vectors)
        new = {
            "ids": rows.ids,
            "video": rows.video,
            "clip": rows.clip,
            "kind": rows.kind,
            "start": rows.start,
            "end": rows.end,
            "codes": codes,
            "scales": scales,
            "alive": True,
        }
        for name, values in new.items():
            self._cols[name][self.size : self.size + n] = values
        self.size += n

    def _reserve(self, needed: int) -> None:
        import numpy as np

        capacity = len(self._cols["ids"])
        if needed <= capacity:
            return
        new_capacity = max(needed, capacity * 2, 1024)
        for name, old in self._cols.items():
            grown = np.empty((new_capacity, *old.shape[1:]), dtype=old.dtype)
            grown[: self.size] = old[: self.size]
            self._cols[name] = grown

    def rows_of(self, ids: IntArray) -> IntArray:
        """Row positions of ``ids``; -1 for ids not here or dead."""
        import numpy as np

        keys = self.col("ids")
        pos = np.searchsorted(keys, ids)
        pos = np.minimum(pos, max(self.size - 1, 0))
        found = (keys[pos] == ids) & self.col("alive")[pos] if self.size else np.zeros(len(ids), bool)
        return np.where(found, pos, -1).astype(np.int64)

    def remove(self, ids: IntArray) -> int:
        """Mark ``ids`` dead; returns how many were alive."""
        rows = self.rows_of(ids)
        rows = rows[rows >= 0]
        self._cols["alive"][rows] = False
        self.n_dead += len(rows)
        return len(rows)

    def mask(self, flt: MirrorFilter | None) -> BoolArray:
        """Rows that are alive and pass ``flt``."""
        import numpy as np

        keep = self.col("alive").copy()
        if flt is None:
            return keep  # type: ignore[no-any-return]
        keep &= self._passes(flt, slice(None))
        if flt.memory_ids is not None:
            keep &= member_of(self.col("ids"), np.asarray(flt.memory_ids, np.int64))
        return keep  # type: ignore[no-any-return]

    def rows(self, flt: MirrorFilter | None) -> IntArray:
        """Positions (ascending) of the rows that are alive and pass ``flt``: those of :meth:`mask`. A filter
        naming memory ids (a person's) starts from their rows, so it costs their number, not the mirror's."""
        import numpy as np

        if flt is None or flt.memory_ids is None:
            return np.flatnonzero(self.mask(flt))
        found = self.rows_of(np.asarray(flt.memory_ids, np.int64))
        rows = ascending(found[found >= 0])  # the alive ones, in order once (ids may come in any order)
        return rows[self._passes(flt, rows)]  # type: ignore[no-any-return]

    def _passes(self, flt: MirrorFilter, at: slice | IntArray) -> BoolArray:
        """Whether the rows ``at`` pass ``flt``'s column conditions (all but memory ids and liveness)."""
        import numpy as np

        def col(name: str) -> Any:
            return self.col(name)[at]

        keep = np.ones(len(col("kind")), np.bool_)
        if flt.videos is not None:
            keep &= np.isin(col("video"), np.asarray(flt.videos, np.int64))
        if flt.before_clip is not None:
            keep &= col("clip") <= flt.before_clip
        if flt.start_s is not None:
            keep &= col("end") >= flt.start_s
        if flt.end_s is not None:
            keep &= col("start") <= flt.end_s
        if flt.kinds is not None:
            keep &= np.isin(col("kind"), np.asarray(flt.kinds, np.int8))
        if flt.exclude:
            video, clip = col("video"), col("clip")
            for v, c in flt.exclude:
                keep &= ~((video == v) & (clip == c))
        return keep

    def top_exact(self, queries: FloatArray, rows: IntArray, count: int) -> tuple[IntArray, FloatArray]:
        """Best ``count`` of ``rows`` by (dequantised) dot product, the best over ``queries`` (one vector, or one
        per row): memory ids and scores, best first."""
        return _top(self._cols["ids"][rows], self.scores(queries, rows), count)

    def scores(self, queries: FloatArray, rows: IntArray) -> FloatArray:
        """The dequantised dot products of ``rows`` with ``queries`` (one vector, or one per row: each row's
        best), block by block: each block's float32 copy stays in cache and serves every query, and its matrix
        product small enough for OpenBLAS to run it on the calling thread. Above that size OpenBLAS splits it
        over its threads, which on busy cores (and in any process that loaded onnxruntime) wait to be
        scheduled: 10^5 rows took 107-130 ms in one product, 17-19 ms in blocks (docs/benchmarks.md, "Search
        at scale")."""
        import numpy as np

        codes = self._cols["codes"]
        columns = np.atleast_2d(queries).T
        out = np.empty(len(rows), np.float32)
        step = max(1, SCORE_BLOCK // max(self.dim, 1))
        for start in range(0, len(rows), step):
            block = rows[start : start + step]
            out[start : start + len(block)] = (codes[block].astype(np.float32) @ columns).max(axis=1)
        out *= self._cols["scales"][rows]
        return out

    def dequantized(self, rows: IntArray) -> FloatArray:
        import numpy as np

        codes = self._cols["codes"][rows].astype(np.float32)
        return codes * self._cols["scales"][rows][:, None]  # type: ignore[no-any-return]

    def compact(self) -> None:
        """Drop dead rows (keeps ids ascending)."""
        keep = self.col("alive")
        for name in _COLUMNS:
            self._cols[name] = self._cols[name][: self.size][keep].copy()
        self.size = len(self._cols["ids"])
        self.n_dead = 0

    def to_bytes(self) -> bytes:
        """The alive rows as an ``.npz`` archive (no pickles)."""
        import numpy as np

        self.compact()
        buffer = io.BytesIO()
        np.savez(buffer, dim=np.asarray(self.dim), **{n: self.col(n) for n in _COLUMNS if n != "alive"})
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> VectorMirror:
        import numpy as np

        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            mirror = cls(int(archive["dim"]))
            for name in _COLUMNS:
                if name != "alive":
                    mirror._cols[name] = archive[name].copy()
        mirror.size = len(mirror._cols["ids"])
        mirror._cols["alive"] = np.ones(mirror.size, np.bool_)
        return mirror


def is_ascending(ids: IntArray) -> bool:
    """Whether ``ids`` are strictly ascending (sorted and distinct): one pass, no sort."""
    import numpy as np

    return bool(np.all(ids[1:] > ids[:-1]))


def ascending(ids: IntArray) -> IntArray:
    """``ids`` sorted and distinct; as they are when they already are (one entity's links come in key order),
    without ``np.unique``'s sort."""
    import numpy as np

    return ids if is_ascending(ids) else np.unique(ids)


def member_of(values: IntArray, ids: IntArray) -> BoolArray:
    """Which ``values`` are among ``ids``: by binary search when ``ids`` are ascending and distinct (a person's
    memories, as :func:`~m3agent.store.sqlite.search.linked_memory_ids` gives them), without the sort or hash
    of ``np.isin`` over both arrays (4 ms a keyword search over a person's 40,000 memories at 10^6)."""
    import numpy as np

    if len(ids) == 0 or not is_ascending(ids):
        return np.isin(values, ids)
    at = np.minimum(np.searchsorted(ids, values), len(ids) - 1)
    return ids[at] == values  # type: ignore[no-any-return]


def _top(ids: IntArray, scores: FloatArray, count: int) -> tuple[IntArray, FloatArray]:
    """The ``count`` best (ids, scores), best first."""
    import numpy as np

    if len(scores) > count:
        part = np.argpartition(-scores, count - 1)[:count]
        ids, scores = ids[part], scores[part]
    order = np.argsort(-scores, kind="stable")
    return ids[order], scores[order]
