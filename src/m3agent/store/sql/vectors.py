"""The vectors of the SQL memory store, one for both backends: the embedding model, vector search, re-embedding.

The store records which text embedder wrote its vectors (one per memory) and refuses another one's while
memories are stored; :meth:`SQLVectors.reembed_memories` replaces them all in one transaction. Vector
search normalises the queries and leaves the scan or the index to the backend (``_nearest``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from m3agent.domain import ScoredMemory, SearchFilter
from m3agent.errors import IntegrityError
from m3agent.store.index.vectors import normalized
from m3agent.store.protocol import EmbeddingModel
from m3agent.store.sql import dialect
from m3agent.store.sql.base import C, SQLBase, guarded
from m3agent.store.sql.dialect import render

if TYPE_CHECKING:
    from m3agent.domain import Vector

BATCH = 5000  # rows per read of iter_memory_vectors
UPSERT_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


class SQLVectors(SQLBase[C]):
    """The embedding model and the memory vectors (see the module docstring)."""

    @guarded
    def embedding_model(self) -> EmbeddingModel | None:
        """``(name, dim)`` of the text embeddings stored, or ``None`` while none is recorded."""
        with self._read() as db:
            return self._model(db)

    def _model(self, db: C) -> EmbeddingModel | None:
        rows = dict(self._run(db, "SELECT key, value FROM meta WHERE key IN ('embedding_model', 'embedding_dim')")
                    .fetchall())
        if "embedding_dim" not in rows:
            return None
        return EmbeddingModel(rows.get("embedding_model", ""), int(rows["embedding_dim"]))

    def _dim(self) -> int | None:
        model = self.embedding_model()
        return model.dim if model else None

    @guarded
    def set_embedding_model(self, name: str, dim: int) -> None:
        """Record the text embedder; :class:`IntegrityError` while memories of another one are stored."""
        if dim <= 0:
            raise IntegrityError(f"embedding dimension must be positive, got {dim}")
        if self.embedding_model() == (name, dim):
            return
        with self._tx() as db:
            self._lock_model(db)
            current = self._model(db)
            if current == (name, dim):
                return
            if current is not None and self._run(db, "SELECT 1 FROM memories LIMIT 1").fetchone():
                raise IntegrityError(
                    f"memories here are embedded with {current[0]} ({current[1]}-d), not {name} ({dim}-d)",
                    hint="re-embed the memories (m3agent reembed) or use another memory",
                )
            self._record_model(db, name, dim)

    def _record_model(self, db: C, name: str, dim: int) -> None:
        for key, value in (("embedding_model", name), ("embedding_dim", str(dim))):
            self._run(db, UPSERT_META, (key, value))
        self._model_recorded(db, dim)

    # search ----------------------------------------------------------------
    @guarded
    def vector_search(self, query: Vector, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` memories by exact cosine that pass ``flt``, best first (ties by id)."""
        return self.vector_search_best([query], k, flt)

    @guarded
    def vector_search_best(self, queries: Sequence[Vector], k: int,
                           flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` memories by their best exact cosine over ``queries`` that pass ``flt``, best first (ties by
        id): a question asked two ways costs one pass over the rows, not two."""
        import numpy as np

        dim = self._dim()
        if dim is None or k <= 0 or not queries:
            return []
        qs = [normalized(q) for q in queries]
        for q in qs:
            if len(q) != dim:
                raise IntegrityError(f"query has {len(q)} dimensions, the store uses {dim}")
        return self._nearest(np.stack(qs), k, flt)

    @guarded
    def reembed_memories(
        self,
        name: str,
        dim: int,
        embed: Callable[[list[str]], Iterable[Vector]],
        *,
        batch: int = 256,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """All embeddings replaced and the model recorded in one transaction: an error (or an
        interruption) in the middle leaves the store as it was."""
        if dim <= 0:
            raise IntegrityError(f"embedding dimension must be positive, got {dim}")
        with self._tx() as db:
            self._begin_reembed(db)
            total = int(self._run(db, "SELECT count(*) FROM memories").fetchone()[0])
            done = last_id = 0
            while rows := self._run(db, "SELECT id, text FROM memories WHERE id > ? ORDER BY id LIMIT ?",
                                    (last_id, batch)).fetchall():
                vectors = [normalized(v) for v in embed([r[1] for r in rows])]
                if len(vectors) != len(rows) or any(len(v) != dim for v in vectors):
                    raise IntegrityError(f"the embedder {name!r} returned vectors that are not {dim}-d, one per text")
                dialect.execute_many(db, render("UPDATE memories SET embedding = ? WHERE id = ?", self.dialect),
                                     [(self._rows.vector_to_db(v), r[0]) for v, r in zip(vectors, rows, strict=True)])
                done, last_id = done + len(rows), rows[-1][0]
                if progress is not None:
                    progress(done, total)
            self._record_model(db, name, dim)
        return done

    def iter_memory_vectors(self, flt: SearchFilter | None = None) -> Iterator[tuple[int, Vector]]:
        """All (memory id, embedding) pairs passing ``flt``, in id order: batches of 5000 rows, each read
        under the guard on its own (no lock or transaction held across the iteration)."""
        last_id = 0
        while batch := self._vector_batch(last_id, flt):
            yield from batch
            last_id = batch[-1][0]

    @guarded
    def _vector_batch(self, after_id: int, flt: SearchFilter | None) -> list[tuple[int, Vector]]:
        where, params = self._filter(flt)
        with self._read() as db:
            rows = self._run(db, f"SELECT m.id, m.embedding FROM memories m WHERE m.id > ? AND {where}"
                             f" ORDER BY m.id LIMIT {BATCH}", [after_id, *params]).fetchall()
        return [(int(i), self._rows.vector_from_db(v)) for i, v in rows]
