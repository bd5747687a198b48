"""The shared memory store: PostgreSQL + pgvector, for many workers writing one memory.

``open_postgres(location)`` connects to the ``postgresql://...`` URL of a
:class:`~m3agent.store.location.StoreLocation` (``postgres://`` is read there),
migrates the database (``pg_migrations/``) and keeps a connection pool. The
contract is :mod:`m3agent.store.protocol`, with the same rules as the SQLite
store (the shared behavioural tests run against both):

- a clip's writes are one transaction; its row in ``clips`` is locked from the
  start, so a second process writing the same clip waits and then finds it done;
- while a thread holds a clip open, every store call of that thread runs on
  the clip's connection and sees its uncommitted rows (identity reads them);
- identity decisions are serialised across processes: the first entity read or
  creation inside a clip takes a transaction-level advisory lock, held until the
  clip commits, so two workers never both create an entity for one new person.
  The seconds spent waiting add up in ``store.identity_wait_s`` (its cost);
- deletions follow :mod:`m3agent.store.pg_entities` (the SQLite rules).

Search: vector search is pgvector HNSW (cosine, iterative scans under filters)
re-ranked by exact cosine; keyword search is a GIN-indexed ``tsvector`` ranked by
``ts_rank_cd`` (PostgreSQL has no BM25).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from m3agent.domain import (
    Character,
    Clip,
    ClipStatus,
    ConsolidatedClip,
    Entity,
    EntityKind,
    EntityMerge,
    FaceObservation,
    FaceVoiceLink,
    ForgottenConsolidation,
    LinkSource,
    Memory,
    ScoredMemory,
    SearchFilter,
    Video,
    VoiceSegment,
)
from m3agent.errors import ConfigError, IntegrityError, NotFoundError, StoreError, StoreReadOnlyError
from m3agent.store import dialect, merge_log, pg_schema
from m3agent.store import pg_entities as ops
from m3agent.store.characters import default_link_confidence, group_characters
from m3agent.store.pg_rows import MEMORY_COLUMNS, as_array, filter_sql, memory_from_row
from m3agent.store.pg_writer import PgClipWriter, PgConsolidationWriter
from m3agent.store.sqlite_rows import (
    ENTITY_COLUMNS,
    FACE_COLUMNS,
    VOICE_COLUMNS,
    entity_from_row,
    face_from_row,
    video_from_row,
    voice_from_row,
)
from m3agent.store.sqlite_schema import utc_now
from m3agent.store.sqlite_writer import check_unit
from m3agent.store.vectors import normalized

if TYPE_CHECKING:
    import psycopg

    from m3agent.domain import Vector
    from m3agent.store.location import StoreLocation
    from m3agent.store.protocol import ClipWriter, ConsolidationWriter, MemoryStore

    Conn = psycopg.Connection[Any]

    def _conforms(store: PostgresStore, writer: PgClipWriter) -> tuple[MemoryStore, ClipWriter]:
        """Lets mypy check both classes against the protocols."""
        return store, writer


P = ParamSpec("P")
R = TypeVar("R")
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
    accept = default_link_confidence() if link_confidence is None else link_confidence
    if not 0.0 < accept <= 1.0:
        raise ConfigError(f"link_confidence must be in (0, 1], got {accept}",
                          hint="set perception.link_accept_confidence between 0 and 1")
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


def _guarded(method: Callable[Concatenate[PostgresStore, P], R]) -> Callable[Concatenate[PostgresStore, P], R]:
    """Refuse a closed store, translate psycopg errors."""

    @functools.wraps(method)
    def wrapper(self: PostgresStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._require_open()
        with pg_schema.translated(self.url):
            return method(self, *args, **kwargs)

    return wrapper


class _ClipState(threading.local):
    conn: Conn | None = None
    locked: bool = False  # this clip's transaction holds the identity lock


class PostgresStore:
    """A :class:`~m3agent.store.protocol.MemoryStore` in a PostgreSQL database."""

    def __init__(self, pool: pg_schema.Pool, url: str, *, readonly: bool = False, link_confidence: float) -> None:
        self.url = pg_schema.redacted(url)
        self.readonly = readonly
        self.link_confidence = link_confidence
        self._pool: pg_schema.Pool | None = pool
        self._local = _ClipState()
        self._wait_lock = threading.Lock()
        self.identity_wait_s = 0.0  # total seconds clips of this process waited for the identity lock

    # lifecycle -----------------------------------------------------------
    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r}{', readonly' if self.readonly else ''})"

    def _require_open(self) -> None:
        if self._pool is None:
            raise StoreError(f"the memory store {self.url} is closed")

    def _require_writable(self) -> None:
        if self.readonly:
            raise StoreReadOnlyError(f"the memory store {self.url} is open read-only")

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

    @_guarded
    def schema_version(self) -> int:
        with self._read() as db:
            return pg_schema.schema_version(db)

    @_guarded
    def embedding_model(self) -> tuple[str, int] | None:
        with self._read() as db:
            return _model(db)

    def _dim(self) -> int | None:
        model = self.embedding_model()
        return model[1] if model else None

    @_guarded
    def set_embedding_model(self, name: str, dim: int) -> None:
        if dim <= 0:
            raise IntegrityError(f"embedding dimension must be positive, got {dim}")
        if self.embedding_model() == (name, dim):
            return
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.MODEL_LOCK,))
            current = _model(db)
            if current == (name, dim):
                return
            if current is not None and db.execute("SELECT 1 FROM memories LIMIT 1").fetchone():
                raise IntegrityError(
                    f"memories here are embedded with {current[0]} ({current[1]}-d), not {name} ({dim}-d)",
                    hint="re-embed the memories (m3agent reembed) or use another memory database",
                )
            _set_model(db, name, dim)

    # videos and clips ----------------------------------------------------
    @_guarded
    def add_video(self, video: Video) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO videos (video_id, source, duration_s, title, metadata, added_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (video_id) DO UPDATE SET source = excluded.source,"
                " duration_s = excluded.duration_s, title = excluded.title, metadata = excluded.metadata",
                (video.video_id, video.source, video.duration_s, video.title, json.dumps(video.metadata), utc_now()),
            )

    @_guarded
    def get_video(self, video_id: str) -> Video:
        with self._read() as db:
            row = db.execute("SELECT video_id, source, duration_s, title, metadata FROM videos WHERE video_id = %s",
                             (video_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no video {video_id!r} in {self.url}")
        return video_from_row(row)

    @_guarded
    def videos(self) -> list[Video]:
        with self._read() as db:
            rows = db.execute("SELECT video_id, source, duration_s, title, metadata FROM videos ORDER BY id")
            return [video_from_row(r) for r in rows]

    @contextmanager
    def clip(self, clip: Clip) -> Iterator[ClipWriter]:
        """One transaction for all writes of ``clip``; marks it done when the block ends cleanly."""
        self._require_open()
        self._require_writable()
        state = self._local
        if state.conn is not None:
            raise StoreError("a clip is already open in this thread", hint="finish one clip before the next")
        assert self._pool is not None
        with pg_schema.translated(self.url), self._pool.connection() as conn, conn.transaction():
            state.conn, state.locked = conn, False
            try:
                self._begin_clip(conn, clip)
                writer = PgClipWriter(conn, clip, self._dim(), self.identity_barrier)
                try:
                    yield writer
                    _set_clip(conn, clip, ClipStatus.DONE.value, "")
                finally:
                    writer.close()
            finally:
                state.conn, state.locked = None, False

    def _begin_clip(self, db: Conn, clip: Clip) -> None:
        if clip.index < 0 or clip.end_s < clip.start_s:
            raise IntegrityError(f"invalid clip {clip}")
        if db.execute("SELECT 1 FROM videos WHERE video_id = %s", (clip.video_id,)).fetchone() is None:
            raise NotFoundError(f"no video {clip.video_id!r}", hint="add_video before writing its clips")
        db.execute(
            "INSERT INTO clips (video_id, clip_index, start_s, end_s, status, reason, updated_at)"
            " VALUES (%s, %s, %s, %s, 'pending', '', %s) ON CONFLICT (video_id, clip_index) DO NOTHING",
            (clip.video_id, clip.index, clip.start_s, clip.end_s, utc_now()),
        )
        row = db.execute("SELECT status FROM clips WHERE video_id = %s AND clip_index = %s FOR UPDATE",
                         (clip.video_id, clip.index)).fetchone()
        if row is not None and row[0] == ClipStatus.DONE.value:
            raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is already stored",
                                 hint="delete the video to ingest it again")
        _set_clip(db, clip, "pending", "")

    @_guarded
    def mark_clip(self, clip: Clip, status: ClipStatus, reason: str = "") -> None:
        """Record a clip's status; a stored (done) clip is never downgraded by a late failure report."""
        with self._tx() as db:
            if db.execute("SELECT 1 FROM videos WHERE video_id = %s", (clip.video_id,)).fetchone() is None:
                raise NotFoundError(f"no video {clip.video_id!r}", hint="add_video before writing its clips")
            row = db.execute("SELECT status FROM clips WHERE video_id = %s AND clip_index = %s FOR UPDATE",
                             (clip.video_id, clip.index)).fetchone()
            if row is not None and row[0] == ClipStatus.DONE.value and ClipStatus(status) != ClipStatus.DONE:
                return
            _set_clip(db, clip, ClipStatus(status).value, reason)

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
            if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
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

    @contextmanager
    def consolidation(self, clips: Sequence[Clip], model: str) -> Iterator[ConsolidationWriter]:
        """One transaction for what ``model`` consolidated from done ``clips``; recorded when it ends cleanly."""
        self._require_open()
        self._require_writable()
        last = check_unit(clips)
        state = self._local
        if state.conn is not None:
            raise StoreError("a clip is already open in this thread", hint="finish one clip before the next")
        assert self._pool is not None
        started = time.perf_counter()
        with pg_schema.translated(self.url), self._pool.connection() as conn, conn.transaction():
            state.conn, state.locked = conn, False
            try:
                for clip in clips:
                    _begin_consolidation(conn, clip)
                writer = PgConsolidationWriter(conn, last, self._dim(), self.identity_barrier)
                try:
                    yield writer
                    seconds = (writer.seconds or time.perf_counter() - started) / len(clips)
                    for clip in clips:
                        conn.execute(
                            "INSERT INTO consolidated_clips (video_id, clip_index, model, notes, seconds, created_at)"
                            " VALUES (%s, %s, %s, %s, %s, %s)",
                            (clip.video_id, clip.index, model, json.dumps(writer.notes if clip is last else []),
                             seconds, utc_now()))
                finally:
                    writer.close()
            finally:
                state.conn, state.locked = None, False

    @_guarded
    def consolidated_clips(self, video_id: str) -> dict[int, ConsolidatedClip]:
        with self._read() as db:
            rows = db.execute("SELECT clip_index, model, notes, seconds FROM consolidated_clips WHERE video_id = %s"
                              " ORDER BY clip_index", (video_id,)).fetchall()
        return {r[0]: ConsolidatedClip(video_id, r[0], r[1], tuple(json.loads(r[2])), r[3]) for r in rows}

    @_guarded
    def forget_consolidation(self, video_id: str) -> ForgottenConsolidation:
        with self._tx() as db:
            forgotten = dialect.forget_consolidation(db, dialect.Dialect.POSTGRES, video_id)
            merge_log.prune(ops.DIALECT, db)
        return forgotten

    @_guarded
    def memory_sources(self, memory_ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
        found: dict[int, list[int]] = {}
        with self._read() as db:
            for memory_id, source_id in db.execute(
                    "SELECT memory_id, source_id FROM memory_sources WHERE memory_id = ANY(%s)"
                    " ORDER BY memory_id, source_id", (sorted(set(memory_ids)),)):
                found.setdefault(int(memory_id), []).append(int(source_id))
        return {k: tuple(v) for k, v in found.items()}

    @_guarded
    def clips(self, video_id: str) -> list[tuple[Clip, ClipStatus, str]]:
        with self._read() as db:
            rows = db.execute("SELECT clip_index, start_s, end_s, status, reason FROM clips"
                              " WHERE video_id = %s AND status <> 'pending' ORDER BY clip_index", (video_id,))
            return [(Clip(video_id, r[0], r[1], r[2]), ClipStatus(r[3]), r[4]) for r in rows]

    @_guarded
    def clip_timings(self, video_id: str) -> dict[int, dict[str, float]]:
        """Recorded stage seconds per clip index of ``video_id``."""
        timings: dict[int, dict[str, float]] = {}
        with self._read() as db:
            for clip_index, stage, seconds in db.execute(
                "SELECT clip_index, stage, seconds FROM clip_timings WHERE video_id = %s ORDER BY clip_index, stage",
                (video_id,),
            ):
                timings.setdefault(clip_index, {})[stage] = seconds
        return timings

    @_guarded
    def delete_video(self, video_id: str) -> None:
        with self._tx() as db:
            if db.execute("SELECT 1 FROM videos WHERE video_id = %s", (video_id,)).fetchone() is None:
                raise NotFoundError(f"no video {video_id!r}")
            orphans = ops.orphan_entities_of_video(db, video_id)
            db.execute("UPDATE entities SET first_clip = NULL, last_clip = NULL WHERE video_id = %s", (video_id,))
            db.execute("DELETE FROM videos WHERE video_id = %s", (video_id,))
            db.execute("DELETE FROM entities WHERE id = ANY(%s)", (orphans,))
            merge_log.prune(ops.DIALECT, db)

    # entities and characters --------------------------------------------
    @_guarded
    def entities(self, kind: EntityKind | None = None) -> list[Entity]:
        self.identity_barrier()
        where, params = ("n.kind = %s", [EntityKind(kind).value]) if kind is not None else ("TRUE", [])
        with self._read() as db:
            rows = db.execute(f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE {where} ORDER BY n.id", params)
            return [entity_from_row(r) for r in rows]

    @_guarded
    def get_entity(self, entity_id: int) -> Entity:
        with self._read() as db:
            row = db.execute(f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE n.id = %s", (entity_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no entity {entity_id}")
        return entity_from_row(row)

    @_guarded
    def entity_bank(self, entity_id: int) -> list[Vector]:
        self.get_entity(entity_id)
        with self._read() as db:
            rows = db.execute("SELECT vector FROM entity_embeddings WHERE entity_id = %s ORDER BY ord", (entity_id,))
            return [as_array(r[0]) for r in rows]

    @_guarded
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

    @_guarded
    def entity_crops(self, entity_id: int, limit: int = 3) -> list[bytes]:
        with self._read() as db:
            rows = db.execute("SELECT b.data FROM faces f JOIN blobs b ON b.id = f.crop_blob WHERE f.entity_id = %s"
                              " ORDER BY f.quality DESC, f.det_score DESC, f.id LIMIT %s", (entity_id, limit))
            return [bytes(r[0]) for r in rows]

    @_guarded
    def entity_snippets(self, entity_id: int, limit: int = 3) -> list[bytes]:
        with self._read() as db:
            rows = db.execute("SELECT b.data FROM voices v JOIN blobs b ON b.id = v.audio_blob WHERE v.entity_id = %s"
                              " ORDER BY v.end_s - v.start_s DESC, v.id LIMIT %s", (entity_id, limit))
            return [bytes(r[0]) for r in rows]

    @_guarded
    def rename_entity(self, entity_id: int, name: str) -> None:
        with self._tx() as db:
            if db.execute("UPDATE entities SET name = %s WHERE id = %s", (name, entity_id)).rowcount == 0:
                raise NotFoundError(f"no entity {entity_id}")

    @_guarded
    def merge_entities(self, keep: int, absorb: int) -> None:
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.IDENTITY_LOCK,))
            merge_log.merge_recorded(ops.DIALECT, db, keep, absorb, source="manual", evidence="merged by hand")

    @_guarded
    def entity_merges(self) -> list[EntityMerge]:
        with self._read() as db:
            return merge_log.merges(ops.DIALECT, db)

    @_guarded
    def undo_merge(self, merge_id: int) -> Entity:
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.IDENTITY_LOCK,))
            absorbed, _ = merge_log.undo(ops.DIALECT, db, merge_id)
        return self.get_entity(absorbed)

    @_guarded
    def split_entity(self, entity_id: int, observation_ids: Sequence[int]) -> Entity:
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.IDENTITY_LOCK,))
            new_id = ops.split_entity(db, entity_id, observation_ids)
        return self.get_entity(new_id)

    @_guarded
    def delete_entity(self, entity_id: int) -> None:
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.IDENTITY_LOCK,))
            ops.delete_entity(db, entity_id)

    @_guarded
    def links(self, min_confidence: float = 0.0) -> list[FaceVoiceLink]:
        with self._read() as db:
            rows = db.execute(
                "SELECT face_id, voice_id, confidence, source, evidence FROM ("
                " SELECT DISTINCT ON (face_id, voice_id) * FROM links ORDER BY face_id, voice_id, seq DESC) q"
                " WHERE confidence >= %s ORDER BY face_id, voice_id", (min_confidence,))
            return [FaceVoiceLink(f, v, c, LinkSource(s), e) for f, v, c, s, e in rows]

    @_guarded
    def characters(self, before_clip: int | None = None, video_id: str | None = None) -> list[Character]:
        with self._read() as db:
            visible = self._visible_entities(db, before_clip, video_id)
            where, params = _clip_scope(before_clip, video_id)
            evidence = db.execute(f"SELECT face_id, voice_id, confidence FROM links WHERE {where} ORDER BY seq",
                                  params).fetchall()
            base_ids = dict(db.execute("SELECT entity_id, id FROM characters").fetchall())
            names = dict(db.execute("SELECT id, name FROM entities WHERE name <> ''").fetchall())
        return group_characters(visible, evidence, base_ids, names, self.link_confidence)

    def _visible_entities(self, db: Conn, before_clip: int | None, video_id: str | None) -> list[int]:
        """Entities seen (first seen, observed or linked) within the scope."""
        if before_clip is None and video_id is None:
            return [r[0] for r in db.execute("SELECT id FROM entities")]
        where, params = _clip_scope(before_clip, video_id)
        first = where.replace("clip_index", "first_clip")
        sql = (
            f"SELECT id FROM entities WHERE {first}"
            f" UNION SELECT entity_id FROM faces WHERE entity_id IS NOT NULL AND {where}"
            f" UNION SELECT entity_id FROM voices WHERE entity_id IS NOT NULL AND {where}"
            f" UNION SELECT e.entity_id FROM edges e JOIN memories m ON m.id = e.memory_id"
            f" WHERE {where.replace('video_id', 'm.video_id').replace('clip_index', 'm.clip_index')}"
        )
        return [r[0] for r in db.execute(sql, params * 4)]

    # memories ------------------------------------------------------------
    @_guarded
    def get_memory(self, memory_id: int) -> Memory:
        with self._read() as db:
            row = db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = %s", (memory_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no memory {memory_id}")
        return memory_from_row(row)

    @_guarded
    def memories(
        self, video_id: str | None = None, clip_index: int | None = None, flt: SearchFilter | None = None
    ) -> list[Memory]:
        where, params = filter_sql(flt)
        if video_id is not None:
            where, params = f"{where} AND m.video_id = %s", [*params, video_id]
        if clip_index is not None:
            where, params = f"{where} AND m.clip_index = %s", [*params, clip_index]
        with self._read() as db:
            rows = db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where}"
                              " ORDER BY m.video_id, m.clip_index, m.id", params)
            return [memory_from_row(r) for r in rows]

    @_guarded
    def memories_of_entities(self, entity_ids: Sequence[int], flt: SearchFilter | None = None) -> list[Memory]:
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        where, params = filter_sql(flt)
        with self._read() as db:
            rows = db.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN"
                f" (SELECT memory_id FROM edges WHERE entity_id = ANY(%s)) AND {where}"
                " ORDER BY m.video_id, m.clip_index, m.id", [ids, *params])
            return [memory_from_row(r) for r in rows]

    @_guarded
    def delete_memory(self, memory_id: int) -> None:
        with self._tx() as db:
            ops.delete_memory(db, memory_id)

    @_guarded
    def adjust_weight(self, memory_id: int, delta: float) -> None:
        with self._tx() as db:
            if db.execute("UPDATE memories SET weight = weight + %s WHERE id = %s",
                          (delta, memory_id)).rowcount == 0:
                raise NotFoundError(f"no memory {memory_id}")

    @_guarded
    def faces(self, video_id: str, clip_index: int | None = None) -> list[FaceObservation]:
        where, params = _clip_scope(clip_index, video_id, exact=True, alias="f")
        with self._read() as db:
            rows = db.execute(f"SELECT {FACE_COLUMNS} FROM faces f LEFT JOIN blobs b ON b.id = f.crop_blob"
                              f" WHERE {where} ORDER BY f.clip_index, f.id", params)
            return [face_from_row(r) for r in rows]

    @_guarded
    def face_sightings(self, video_id: str) -> list[tuple[float, int]]:
        with self._read() as db:
            rows = db.execute("SELECT time_s, entity_id FROM faces WHERE video_id = %s AND entity_id IS NOT NULL"
                              " ORDER BY time_s, id", (video_id,))
            return [(float(t), int(e)) for t, e in rows]

    @_guarded
    def mouth_motions(self, video_id: str) -> list[tuple[float, int, float]]:
        with self._read() as db:
            rows = db.execute("SELECT time_s, entity_id, mouth_motion FROM faces WHERE video_id = %s"
                              " AND entity_id IS NOT NULL AND mouth_motion IS NOT NULL ORDER BY time_s, id",
                              (video_id,))
            return [(float(t), int(e), float(m)) for t, e, m in rows]

    @_guarded
    def voice_spans(self, video_id: str) -> list[tuple[float, float, int]]:
        with self._read() as db:
            rows = db.execute("SELECT start_s, end_s, entity_id FROM voices WHERE video_id = %s"
                              " AND entity_id IS NOT NULL ORDER BY start_s, id", (video_id,))
            return [(float(a), float(b), int(e)) for a, b, e in rows]

    @_guarded
    def voices(self, video_id: str, clip_index: int | None = None) -> list[VoiceSegment]:
        where, params = _clip_scope(clip_index, video_id, exact=True, alias="v")
        with self._read() as db:
            rows = db.execute(f"SELECT {VOICE_COLUMNS} FROM voices v WHERE {where}"
                              " ORDER BY v.clip_index, v.start_s, v.id", params)
            return [voice_from_row(r) for r in rows]

    @_guarded
    def voice_audio(self, voice_id: int) -> bytes | None:
        """The WAV snippet stored with voice segment ``voice_id``, if any."""
        with self._read() as db:
            row = db.execute("SELECT b.data FROM voices v LEFT JOIN blobs b ON b.id = v.audio_blob WHERE v.id = %s",
                             (voice_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no voice segment {voice_id}")
        return None if row[0] is None else bytes(row[0])

    # search --------------------------------------------------------------
    @_guarded
    def vector_search(self, query: Vector, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        dim = self._dim()
        if dim is None or k <= 0:
            return []
        q = normalized(query)
        if len(q) != dim:
            raise IntegrityError(f"query has {len(q)} dimensions, the store uses {dim}")
        where, params = filter_sql(flt)
        want = max(2 * k, k + 16)
        with self._read() as db:
            db.execute("SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan',"
                       " 'relaxed_order', true)", (str(max(EF_SEARCH_MIN, 4 * k)),))
            rows = db.execute(
                f"WITH c AS MATERIALIZED (SELECT m.id FROM memories m WHERE {where}"
                f" ORDER BY m.embedding <=> %s LIMIT %s)"
                f" SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN (SELECT id FROM c)", [*params, q, want]
            ).fetchall()
        scored = [ScoredMemory(m, float(as_array(m.embedding) @ q)) for m in map(memory_from_row, rows)]
        scored.sort(key=lambda s: (-s.score, s.memory.id))
        return scored[:k]

    @_guarded
    def keyword_search(self, query: str, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` by ``ts_rank_cd`` over the words of ``query`` (OR); free text is never parsed as syntax."""
        if k <= 0:
            return []
        where, params = filter_sql(flt)
        with self._read() as db:
            rows = db.execute(
                "WITH q AS (SELECT to_tsquery('simple', string_agg(quote_literal(lexeme), ' | ')) AS q"
                "  FROM unnest(m3_keywords(%s))),"
                f" r AS MATERIALIZED (SELECT m.id, ts_rank_cd(m.keywords, q.q, 1) AS score FROM memories m, q"
                f"  WHERE m.keywords @@ q.q AND {where} ORDER BY score DESC, m.id LIMIT %s)"
                f" SELECT {MEMORY_COLUMNS}, r.score FROM r JOIN memories m ON m.id = r.id ORDER BY r.score DESC, m.id",
                [query, *params, k],
            ).fetchall()
        return [ScoredMemory(memory_from_row(r), float(r[-1])) for r in rows]

    @_guarded
    def reembed_memories(
        self,
        name: str,
        dim: int,
        embed: Callable[[list[str]], Iterable[Vector]],
        *,
        batch: int = 256,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """All embeddings replaced, the column retyped and its HNSW index rebuilt, in one transaction."""
        if dim <= 0:
            raise IntegrityError(f"embedding dimension must be positive, got {dim}")
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.MODEL_LOCK,))
            db.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
            db.execute("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")
            row = db.execute("SELECT count(*) FROM memories").fetchone()
            total, done, last_id = int(row[0]) if row else 0, 0, 0
            while rows := db.execute("SELECT id, text FROM memories WHERE id > %s ORDER BY id LIMIT %s",
                                     (last_id, batch)).fetchall():
                vectors = [normalized(v) for v in embed([r[1] for r in rows])]
                if len(vectors) != len(rows) or any(len(v) != dim for v in vectors):
                    raise IntegrityError(f"the embedder {name!r} returned vectors that are not {dim}-d, one per text")
                with db.cursor() as cur:
                    cur.executemany("UPDATE memories SET embedding = %s WHERE id = %s",
                                    [(v, r[0]) for v, r in zip(vectors, rows, strict=True)])
                done, last_id = done + len(rows), rows[-1][0]
                if progress is not None:
                    progress(done, total)
            _set_model(db, name, dim)
        return done

    def iter_memory_vectors(self, flt: SearchFilter | None = None) -> Iterator[tuple[int, Vector]]:
        """Batches of 5000 rows in id order, each read in its own transaction."""
        last_id = 0
        while batch := self._vector_batch(last_id, flt):
            yield from batch
            last_id = batch[-1][0]

    @_guarded
    def _vector_batch(self, after_id: int, flt: SearchFilter | None) -> list[tuple[int, Vector]]:
        where, params = filter_sql(flt)
        with self._read() as db:
            rows = db.execute(f"SELECT m.id, m.embedding FROM memories m WHERE m.id > %s AND {where}"
                              " ORDER BY m.id LIMIT 5000", [after_id, *params]).fetchall()
        return [(int(i), as_array(v)) for i, v in rows]

    # maintenance -----------------------------------------------------------
    @_guarded
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

    @_guarded
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

    @_guarded
    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for status output and tests)."""
        tables = ("videos", "clips", "entities", "entity_embeddings", "faces", "voices", "memories", "edges",
                  "links", "blobs", "characters", "clip_timings")
        with self._read() as db:
            counts = {t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}  # type: ignore[index]
        counts["memories_fts"] = counts["memories"]  # the tsvector is a column of every memory row
        return counts


def _model(db: Conn) -> tuple[str, int] | None:
    rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('embedding_model', 'embedding_dim')").fetchall())
    if "embedding_dim" not in rows:
        return None
    return rows.get("embedding_model", ""), int(rows["embedding_dim"])


def _set_model(db: Conn, name: str, dim: int) -> None:
    """Record the model and give the vector column its dimension and HNSW index (cosine)."""
    with db.cursor() as cur:
        cur.executemany("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE"
                        " SET value = excluded.value", [("embedding_model", name), ("embedding_dim", str(dim))])
    db.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
    db.execute(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
    db.execute("CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)")


def _set_clip(db: Conn, clip: Clip, status: str, reason: str) -> None:
    db.execute(
        "INSERT INTO clips (video_id, clip_index, start_s, end_s, status, reason, updated_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (video_id, clip_index) DO UPDATE SET"
        " start_s = excluded.start_s, end_s = excluded.end_s, status = excluded.status,"
        " reason = excluded.reason, updated_at = excluded.updated_at",
        (clip.video_id, clip.index, clip.start_s, clip.end_s, status, reason, utc_now()),
    )


def _clip_scope(
    clip_index: int | None, video_id: str | None, *, exact: bool = False, alias: str = ""
) -> tuple[str, list[Any]]:
    """Condition on ``video_id`` and ``clip_index`` (``<=`` unless ``exact``) columns."""
    prefix = f"{alias}." if alias else ""
    parts: list[str] = []
    params: list[Any] = []
    if video_id is not None:
        parts.append(f"{prefix}video_id = %s")
        params.append(video_id)
    if clip_index is not None:
        parts.append(f"{prefix}clip_index {'=' if exact else '<='} %s")
        params.append(clip_index)
    return " AND ".join(parts) or "TRUE", params


def _begin_consolidation(db: Conn, clip: Clip) -> None:
    """Lock the clip's row; refuse a clip that is not stored or is consolidated already."""
    row = db.execute("SELECT status FROM clips WHERE video_id = %s AND clip_index = %s FOR UPDATE",
                     (clip.video_id, clip.index)).fetchone()
    if row is None or row[0] != ClipStatus.DONE.value:
        raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is not stored",
                             hint="ingest the clip before consolidating it")
    if db.execute("SELECT 1 FROM consolidated_clips WHERE video_id = %s AND clip_index = %s",
                  (clip.video_id, clip.index)).fetchone():
        raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is already consolidated")
