"""The shared memory store: PostgreSQL + pgvector, for many workers writing one memory.

``open_postgres(location)`` connects to the ``postgresql://...`` URL of a
:class:`~m3agent.store.location.StoreLocation` (``postgres://`` is read there),
migrates the database (``pg_migrations/``) and keeps a connection pool. The
contract is :mod:`m3agent.store.protocol`; the methods and rules both stores
share are :mod:`m3agent.store.sql.store` (the shared behavioural tests run
against both). What is PostgreSQL's own:

- a clip's writes are one transaction; its row in ``clips`` is locked from the
  start, so a second process writing the same clip waits and then finds it done;
- while a thread holds a clip open, every store call of that thread runs on
  the clip's connection and sees its uncommitted rows (identity reads them);
- identity decisions are serialised across processes: the first entity read or
  creation inside a clip takes a transaction-level advisory lock, held until the
  clip commits, so two workers never both create an entity for one new person.
  The seconds spent waiting add up in ``store.identity_wait_s`` (its cost);
  corrections by hand (merge, split, delete, undo) take the same lock.

Search: vector search is pgvector HNSW (cosine, iterative scans under filters)
re-ranked by exact cosine; keyword search is a GIN-indexed ``tsvector`` ranked by
``ts_rank_cd`` (PostgreSQL has no BM25).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from m3agent.domain import EntityKind, Memory, ScoredMemory, SearchFilter
from m3agent.errors import ConfigError, StoreError
from m3agent.store.postgres import schema as pg_schema
from m3agent.store.postgres.writer import PgClipWriter, PgConsolidationWriter
from m3agent.store.sql.base import guarded, link_confidence_of
from m3agent.store.sql.dialect import Dialect
from m3agent.store.sql.rows import as_array
from m3agent.store.sql.store import SQLStore

if TYPE_CHECKING:
    import psycopg

    from m3agent.domain import Vector
    from m3agent.store.location import StoreLocation
    from m3agent.store.protocol import ClipWriter, MemoryStore

    Conn = psycopg.Connection[Any]

    def _conforms(store: PostgresStore, writer: PgClipWriter) -> tuple[MemoryStore, ClipWriter]:
        """Lets mypy check both classes against the protocols."""
        return store, writer


EF_SEARCH_MIN = 256  # HNSW candidate list (4 k for larger k): recall@10 0.90 at 10^6 rows; 0.73 at 64


def open_postgres(location: StoreLocation, *, readonly: bool = False, create: bool = True,
                  link_confidence: float | None = None, pool_size: int | None = None) -> PostgresStore:
    """Connect to (and create or migrate) the memory in the PostgreSQL database ``location.url``.

    ``pool_size`` is ``settings.memory_pool_size`` (its default when ``None``).
    """
    pg_schema.require_psycopg()
    size = default_pool_size() if pool_size is None else pool_size
    if size < 1:
        raise ConfigError(f"pool_size must be at least 1, got {size}", hint="set memory_pool_size to 1 or more")
    accept = link_confidence_of(link_confidence)
    url = location.url
    if url is None:
        raise ConfigError(f"memory store {location} is not a PostgreSQL URL", hint="open it with open_store")
    pg_schema.migrate(url, readonly=readonly, create=create)
    with pg_schema.translated(pg_schema.redacted(url)):
        pool = pg_schema.open_pool(url, readonly=readonly, size=size)
    return PostgresStore(pool, url, readonly=readonly, link_confidence=accept)


def default_pool_size() -> int:
    """The default of ``memory_pool_size``, for a store opened without settings."""
    from m3agent.settings import Settings

    return int(Settings.model_fields["memory_pool_size"].default)


class _ClipState(threading.local):
    conn: Conn | None = None
    locked: bool = False  # this clip's transaction holds the identity lock


class PostgresStore(SQLStore["psycopg.Connection[Any]"]):
    """A :class:`~m3agent.store.protocol.MemoryStore` in a PostgreSQL database."""

    dialect = Dialect.POSTGRES
    _writers = (PgClipWriter, PgConsolidationWriter)
    _row_lock = " FOR UPDATE"

    def __init__(self, pool: pg_schema.Pool, url: str, *, readonly: bool = False, link_confidence: float) -> None:
        redacted = pg_schema.redacted(url)
        super().__init__(redacted, redacted, readonly=readonly, link_confidence=link_confidence)
        self._pool: pg_schema.Pool | None = pool
        self._local = _ClipState()
        self._wait_lock = threading.Lock()
        self.identity_wait_s = 0.0  # total seconds clips of this process waited for the identity lock

    # connections -----------------------------------------------------------
    def close(self) -> None:
        """Close the pool (idempotent); later calls raise :class:`StoreError`."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _require_open(self) -> None:
        if self._pool is None:
            raise StoreError(f"the memory store {self.url} is closed")

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A closed store refused, psycopg errors translated (the pool does the locking)."""
        self._require_open()
        with pg_schema.translated(self.url):
            yield

    @contextmanager
    def _read(self) -> Iterator[Conn]:
        """The open clip's connection in this thread, else a pooled one in a transaction of its own."""
        if self._local.conn is not None:
            yield self._local.conn
            return
        assert self._pool is not None
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """A write transaction (a savepoint inside an open clip)."""
        self._require_writable()
        with self._read() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _unit(self) -> Iterator[Conn]:
        """A pooled connection in a transaction that this thread's store calls share until it ends."""
        self._require_open()
        self._require_writable()
        state = self._local
        if state.conn is not None:
            raise StoreError("a clip is already open in this thread", hint="finish one clip before the next")
        assert self._pool is not None
        with pg_schema.translated(self.url), self._pool.connection() as conn, conn.transaction():
            state.conn, state.locked = conn, False
            try:
                yield conn
            finally:
                state.conn, state.locked = None, False

    def _schema_version(self, db: Conn) -> int:
        return pg_schema.schema_version(db)

    # locks -----------------------------------------------------------------
    def identity_barrier(self) -> None:
        """Inside a clip: take the identity lock (once) so identity reads and creations are serialised."""
        state = self._local
        if state.conn is None or state.locked:
            return
        started = time.perf_counter()
        state.conn.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.IDENTITY_LOCK,))
        state.locked = True
        with self._wait_lock:
            self.identity_wait_s += time.perf_counter() - started

    def _identity_lock(self, db: Conn) -> None:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.IDENTITY_LOCK,))

    def _lock_model(self, db: Conn) -> None:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.MODEL_LOCK,))

    @contextmanager
    def video_lock(self, video_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        """The writer lock of ``video_id``: a session advisory lock on a pooled connection held for the run.

        PostgreSQL frees it when the holder's connection ends, so a killed ingest never leaves it behind.
        """
        self._require_writable()
        assert self._pool is not None
        key = pg_schema.video_lock_key(video_id)
        with self._pool.connection() as conn:
            if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:  # type: ignore[index]
                message = f"another ingest of {video_id!r} is running on this memory; waiting for it to finish"
                if not wait:
                    raise StoreError(f"video {video_id!r} is being ingested by another process",
                                     hint="wait for that ingest to finish, or stop it")
                (on_wait or (lambda _m: None))(message)
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    # the vector column and search ------------------------------------------
    def _begin_reembed(self, db: Conn) -> None:
        """The column loses its dimension (and HNSW index) while vectors of the new one replace the old."""
        self._lock_model(db)
        db.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
        db.execute("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")

    def _model_recorded(self, db: Conn, dim: int) -> None:
        """Give the vector column the model's dimension and its HNSW index (cosine)."""
        db.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
        db.execute(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
        db.execute("CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)")

    def _nearest(self, queries: Vector, k: int, flt: SearchFilter | None) -> list[ScoredMemory]:
        """Per query, HNSW candidates under the filter (iterative scan); all re-ranked by their best exact cosine."""
        import numpy as np

        where, params = self._rows.filter_sql(flt)
        columns, want = self._rows.memory_columns, max(2 * k, k + 16)
        found: dict[int, Memory] = {}
        with self._read() as db:
            db.execute("SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan',"
                       " 'relaxed_order', true)", (str(max(EF_SEARCH_MIN, 4 * k)),))
            for query in queries:
                rows = db.execute(
                    f"WITH c AS MATERIALIZED (SELECT m.id FROM memories m WHERE {where}"
                    f" ORDER BY m.embedding <=> %s LIMIT %s)"
                    f" SELECT {columns} FROM memories m WHERE m.id IN (SELECT id FROM c)", [*params, query, want]
                ).fetchall()
                found.update((m.id, m) for m in map(self._rows.memory_from_row, rows))
        scored = [ScoredMemory(m, float(np.max(queries @ as_array(m.embedding)))) for m in found.values()]
        scored.sort(key=lambda s: (-s.score, s.memory.id))
        return scored[:k]

    @guarded
    def keyword_search(self, query: str, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` by ``ts_rank_cd`` over the words of ``query`` (OR); free text is never parsed as syntax."""
        if k <= 0:
            return []
        where, params = self._rows.filter_sql(flt)
        columns = self._rows.memory_columns
        with self._read() as db:
            rows = db.execute(
                "WITH q AS (SELECT to_tsquery('simple', string_agg(quote_literal(lexeme), ' | ')) AS q"
                "  FROM unnest(m3_keywords(%s))),"
                f" r AS MATERIALIZED (SELECT m.id, ts_rank_cd(m.keywords, q.q, 1) AS score FROM memories m, q"
                f"  WHERE m.keywords @@ q.q AND {where} ORDER BY score DESC, m.id LIMIT %s)"
                f" SELECT {columns}, r.score FROM r JOIN memories m ON m.id = r.id ORDER BY r.score DESC, m.id",
                [query, *params, k],
            ).fetchall()
        return [ScoredMemory(self._rows.memory_from_row(r), float(r[-1])) for r in rows]

    @guarded
    def nearest_entities(self, kind: EntityKind, vector: Vector, k: int = 5) -> list[tuple[int, float]]:
        """``(entity id, best cosine)`` of the ``k`` entities of ``kind`` whose exemplars are nearest
        ``vector`` (HNSW for the 128-d and 256-d embedders, exact otherwise)."""
        query = as_array(vector)
        dim = len(query)
        column = f"x.vector::vector({dim})" if dim in (128, 256) else "x.vector"
        with self._read() as db:
            rows = db.execute(
                f"SELECT c.entity_id, max(1 - c.d) FROM (SELECT x.entity_id, {column} <=> %s::vector({dim}) AS d"
                f" FROM entity_embeddings x WHERE x.dim = %s ORDER BY {column} <=> %s::vector({dim}) LIMIT %s) c"
                " JOIN entities n ON n.id = c.entity_id WHERE n.kind = %s GROUP BY c.entity_id"
                " ORDER BY 2 DESC, 1 LIMIT %s",
                (query, dim, query, max(4 * k, 40), EntityKind(kind).value, k),
            )
            return [(int(e), float(s)) for e, s in rows]

    # maintenance -----------------------------------------------------------
    @guarded
    def compact(self) -> None:
        """Rewrite every table of this memory (heap, TOAST, indexes) into new files: ``VACUUM (FULL)``.

        After it, what deletions removed is gone from the table files, not merely unreachable: a
        plain VACUUM leaves dead bytes in free space until they are overwritten. (The server's WAL
        and any backups keep their own copies until recycled.) Each table is locked exclusively
        while it is rewritten: run it when no ingest is writing.
        """
        from psycopg import sql

        self._require_writable()
        if self._local.conn is not None:
            raise StoreError("compact cannot run inside a clip", hint="finish the clip first")
        assert self._pool is not None
        with self._pool.connection() as db:  # autocommit: VACUUM runs outside a transaction
            tables = [r[0] for r in db.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
                " AND relkind = 'r' ORDER BY relname")]
            for table in tables:
                db.execute(sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(table)))

    @guarded
    def check(self) -> list[str]:
        """Invariants foreign keys cannot state; an empty list means healthy."""
        with self._read() as db:
            problems = [f"blob {r[0]} belongs to no observation" for r in db.execute(
                "SELECT b.id FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM faces WHERE crop_blob = b.id)"
                " AND NOT EXISTS (SELECT 1 FROM voices WHERE audio_blob = b.id) LIMIT 20")]
            problems += [f"entity {r[0]} has no character id" for r in db.execute(
                "SELECT n.id FROM entities n WHERE NOT EXISTS (SELECT 1 FROM characters c WHERE c.entity_id = n.id)"
                " LIMIT 20")]
            problems += [f"{r[0]} memories are not {r[1]}-d" for r in db.execute(
                "SELECT count(*), %s FROM memories WHERE vector_dims(embedding) <> %s HAVING count(*) > 0",
                (self._dim() or 0, self._dim() or 0))]
        return problems

    def _keyword_rows(self, db: Conn, counts: dict[str, int]) -> int:
        return counts["memories"]  # the tsvector is a column of every memory row
