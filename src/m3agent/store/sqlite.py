"""The embedded default memory store: one SQLite file holding many videos.

``open_sqlite(location)`` opens (and creates or migrates) the file of a
:class:`~m3agent.store.location.StoreLocation` (specs are parsed there:
``sqlite:///relative.db``, ``sqlite:////absolute/path.db``, plain paths).
See :mod:`m3agent.store.protocol` for the contract and ``sqlite_migrations/``
for the schema.

Every public method holds the store's lock (one connection, shared by
threads) and turns SQLite failures into :class:`m3agent.errors.StoreError`
subclasses. Writes are transactions; a clip's writes are one transaction.

Deleting leaves nothing derived behind, in one transaction each: a video takes
its clips, rows, blobs and the entities seen only there; an entity takes its
observations and media, links, the memories about it alone (and link lines
naming it), and its tag in other memories becomes "someone"; a memory takes
its edges, index entries and the transcript of the voice segments it quotes
(details in :mod:`m3agent.store.sqlite_entities`). Keyword-index segments are
merged afterwards so deleted text leaves the file.
"""

from __future__ import annotations

import functools
import itertools
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
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
from m3agent.store import dialect, merge_log, sqlite_search
from m3agent.store import sqlite_entities as ops
from m3agent.store.characters import default_link_confidence, group_characters
from m3agent.store.memory_vectors import MemoryVectors
from m3agent.store.sqlite_errors import translated
from m3agent.store.sqlite_locks import video_lock
from m3agent.store.sqlite_rows import (
    ENTITY_COLUMNS,
    FACE_COLUMNS,
    MEMORY_COLUMNS,
    VOICE_COLUMNS,
    entity_from_row,
    face_from_row,
    filter_sql,
    memory_from_row,
    placeholders,
    video_from_row,
    voice_from_row,
)
from m3agent.store.sqlite_schema import connect, schema_version, utc_now
from m3agent.store.sqlite_writer import SQLiteClipWriter, SQLiteConsolidationWriter, check_unit
from m3agent.store.vectors import from_blob, normalized, to_blob

if TYPE_CHECKING:
    from m3agent.domain import Vector
    from m3agent.store.location import StoreLocation
    from m3agent.store.protocol import ClipWriter, ConsolidationWriter, MemoryStore

    def _conforms(store: SQLiteStore, writer: SQLiteClipWriter) -> tuple[MemoryStore, ClipWriter]:
        """Lets mypy check both classes against the protocols."""
        return store, writer


P = ParamSpec("P")
R = TypeVar("R")


def open_sqlite(location: StoreLocation, *, readonly: bool = False, create: bool = True,
                link_confidence: float | None = None, pool_size: int | None = None) -> SQLiteStore:
    """Open the SQLite memory at ``location.path`` (created and migrated unless told otherwise).

    ``link_confidence`` is ``settings.perception.link_accept_confidence`` (its default when ``None``).
    ``pool_size`` is ignored: a SQLite store is one connection.
    """
    accept = default_link_confidence() if link_confidence is None else link_confidence
    if not 0.0 < accept <= 1.0:
        raise ConfigError(f"link_confidence must be in (0, 1], got {accept}",
                          hint="set perception.link_accept_confidence between 0 and 1")
    path = location.path
    if path is None:
        raise ConfigError(f"memory store {location} is not a SQLite file", hint="open it with open_store")
    conn, readonly = connect(path, readonly=readonly, create=create)
    return SQLiteStore(conn, path, readonly=readonly, link_confidence=accept)


def _guarded(method: Callable[Concatenate[SQLiteStore, P], R]) -> Callable[Concatenate[SQLiteStore, P], R]:
    """Hold the store lock, refuse a closed store, translate SQLite errors."""

    @functools.wraps(method)
    def wrapper(self: SQLiteStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            self._require_open()
            with translated(str(self.path)):
                return method(self, *args, **kwargs)

    return wrapper


class SQLiteStore:
    """A :class:`~m3agent.store.protocol.MemoryStore` in one SQLite file."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, readonly: bool = False,
                 link_confidence: float) -> None:
        self.path = path.resolve()
        self.url = f"sqlite:///{self.path}"
        self.readonly = readonly
        self.link_confidence = link_confidence
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.RLock()
        self._savepoints = itertools.count()
        self._vectors: MemoryVectors | None = None

    # lifecycle -----------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._vectors = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r}{', readonly' if self.readonly else ''})"

    def _require_open(self) -> None:
        if self._conn is None:
            raise StoreError(f"the memory store {self.path} is closed")

    @property
    def _db(self) -> sqlite3.Connection:
        self._require_open()
        assert self._conn is not None
        return self._conn

    def _require_writable(self) -> None:
        if self.readonly:
            raise StoreReadOnlyError(f"the memory store {self.path} is open read-only")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (a savepoint when one is already open on this connection)."""
        self._require_writable()
        db = self._db
        if db.in_transaction:
            name = f"sp{next(self._savepoints)}"
            db.execute(f"SAVEPOINT {name}")
            try:
                yield db
            except BaseException:
                db.execute(f"ROLLBACK TO {name}")
                db.execute(f"RELEASE {name}")
                raise
            db.execute(f"RELEASE {name}")
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @_guarded
    def schema_version(self) -> int:
        return schema_version(self._db)

    @_guarded
    def embedding_model(self) -> tuple[str, int] | None:
        rows = dict(
            self._db.execute("SELECT key, value FROM meta WHERE key IN ('embedding_model', 'embedding_dim')").fetchall()
        )
        if "embedding_dim" not in rows:
            return None
        return rows.get("embedding_model", ""), int(rows["embedding_dim"])

    def _dim(self) -> int | None:
        model = self.embedding_model()
        return model[1] if model else None

    @_guarded
    def set_embedding_model(self, name: str, dim: int) -> None:
        if dim <= 0:
            raise IntegrityError(f"embedding dimension must be positive, got {dim}")
        current = self.embedding_model()
        if current == (name, dim):
            return
        with self._tx() as db:
            if current is not None and db.execute("SELECT 1 FROM memories LIMIT 1").fetchone():
                raise IntegrityError(
                    f"memories here are embedded with {current[0]} ({current[1]}-d), not {name} ({dim}-d)",
                    hint="re-embed the memories (m3agent reembed) or use another memory file",
                )
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [("embedding_model", name), ("embedding_dim", str(dim))],
            )
            db.execute("DELETE FROM vector_snapshots")
        self._vectors = None

    # videos and clips ----------------------------------------------------
    @_guarded
    def add_video(self, video: Video) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO videos (video_id, source, duration_s, title, metadata, added_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (video_id) DO UPDATE SET source = excluded.source,"
                " duration_s = excluded.duration_s, title = excluded.title, metadata = excluded.metadata",
                (video.video_id, video.source, video.duration_s, video.title, json.dumps(video.metadata), utc_now()),
            )

    @_guarded
    def get_video(self, video_id: str) -> Video:
        row = self._db.execute(
            "SELECT video_id, source, duration_s, title, metadata FROM videos WHERE video_id = ?", (video_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"no video {video_id!r} in {self.path}")
        return video_from_row(row)

    @_guarded
    def videos(self) -> list[Video]:
        rows = self._db.execute("SELECT video_id, source, duration_s, title, metadata FROM videos ORDER BY id")
        return [video_from_row(r) for r in rows]

    @contextmanager
    def clip(self, clip: Clip) -> Iterator[ClipWriter]:
        """One transaction for all writes of ``clip``; marks it done when the block ends cleanly."""
        with self._lock, translated(str(self.path)), self._tx() as db:
            self._begin_clip(db, clip)
            writer = SQLiteClipWriter(db, clip, self._dim())
            try:
                yield writer
                self._set_clip(db, clip, ClipStatus.DONE.value, "")
            finally:
                writer.close()

    def _begin_clip(self, db: sqlite3.Connection, clip: Clip) -> None:
        if clip.index < 0 or clip.end_s < clip.start_s:
            raise IntegrityError(f"invalid clip {clip}")
        if db.execute("SELECT 1 FROM videos WHERE video_id = ?", (clip.video_id,)).fetchone() is None:
            raise NotFoundError(f"no video {clip.video_id!r}", hint="add_video before writing its clips")
        if self._clip_status(db, clip) == ClipStatus.DONE.value:
            raise IntegrityError(
                f"clip {clip.index} of {clip.video_id!r} is already stored",
                hint="delete the video to ingest it again",
            )
        self._set_clip(db, clip, "pending", "")

    def _set_clip(self, db: sqlite3.Connection, clip: Clip, status: str, reason: str) -> None:
        db.execute(
            "INSERT INTO clips (video_id, clip_index, start_s, end_s, status, reason, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (video_id, clip_index) DO UPDATE SET"
            " start_s = excluded.start_s, end_s = excluded.end_s, status = excluded.status,"
            " reason = excluded.reason, updated_at = excluded.updated_at",
            (clip.video_id, clip.index, clip.start_s, clip.end_s, status, reason, utc_now()),
        )

    @_guarded
    def mark_clip(self, clip: Clip, status: ClipStatus, reason: str = "") -> None:
        """Record ``status``; a done clip keeps its rows and stays done (a late failure report is dropped)."""
        with self._tx() as db:
            if db.execute("SELECT 1 FROM videos WHERE video_id = ?", (clip.video_id,)).fetchone() is None:
                raise NotFoundError(f"no video {clip.video_id!r}", hint="add_video before writing its clips")
            if self._clip_status(db, clip) == ClipStatus.DONE.value:
                return
            self._set_clip(db, clip, ClipStatus(status).value, reason)

    @staticmethod
    def _clip_status(db: sqlite3.Connection, clip: Clip) -> str | None:
        row = db.execute(
            "SELECT status FROM clips WHERE video_id = ? AND clip_index = ?", (clip.video_id, clip.index)
        ).fetchone()
        return None if row is None else str(row[0])

    @contextmanager
    def video_lock(self, video_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        """The writer lock of ``video_id`` (see :mod:`m3agent.store.sqlite_locks`); the store lock is not held."""
        with self._lock:
            self._require_open()
            self._require_writable()
        with video_lock(self.path, video_id, wait=wait, on_wait=on_wait):
            yield

    @contextmanager
    def consolidation(self, clips: Sequence[Clip], model: str) -> Iterator[ConsolidationWriter]:
        """One transaction for what ``model`` consolidated from done ``clips``; recorded when it ends cleanly."""
        started = time.perf_counter()
        last = check_unit(clips)
        with self._lock, translated(str(self.path)), self._tx() as db:
            for clip in clips:
                self._begin_consolidation(db, clip)
            writer = SQLiteConsolidationWriter(db, last, self._dim())
            try:
                yield writer
                seconds = (writer.seconds or time.perf_counter() - started) / len(clips)
                db.executemany(
                    "INSERT INTO consolidated_clips (video_id, clip_index, model, notes, seconds, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(c.video_id, c.index, model, json.dumps(writer.notes if c is last else []), seconds, utc_now())
                     for c in clips])
            finally:
                writer.close()

    def _begin_consolidation(self, db: sqlite3.Connection, clip: Clip) -> None:
        if self._clip_status(db, clip) != ClipStatus.DONE.value:
            raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is not stored",
                                 hint="ingest the clip before consolidating it")
        if db.execute("SELECT 1 FROM consolidated_clips WHERE video_id = ? AND clip_index = ?",
                      (clip.video_id, clip.index)).fetchone():
            raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is already consolidated")

    @_guarded
    def consolidated_clips(self, video_id: str) -> dict[int, ConsolidatedClip]:
        rows = self._db.execute(
            "SELECT clip_index, model, notes, seconds FROM consolidated_clips WHERE video_id = ? ORDER BY clip_index",
            (video_id,))
        return {r[0]: ConsolidatedClip(video_id, r[0], r[1], tuple(json.loads(r[2])), r[3]) for r in rows}

    @_guarded
    def forget_consolidation(self, video_id: str) -> ForgottenConsolidation:
        with self._tx() as db:
            forgotten = dialect.forget_consolidation(db, dialect.Dialect.SQLITE, video_id)
            merge_log.prune(ops.DIALECT, db)
        self._purge_keywords()
        return forgotten

    @_guarded
    def memory_sources(self, memory_ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
        ids = sorted(set(memory_ids))
        found: dict[int, list[int]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            for memory_id, source_id in self._db.execute(
                f"SELECT memory_id, source_id FROM memory_sources WHERE memory_id IN ({placeholders(len(chunk))})"
                " ORDER BY memory_id, source_id", chunk):
                found.setdefault(memory_id, []).append(source_id)
        return {k: tuple(v) for k, v in found.items()}

    @_guarded
    def clips(self, video_id: str) -> list[tuple[Clip, ClipStatus, str]]:
        rows = self._db.execute(
            "SELECT clip_index, start_s, end_s, status, reason FROM clips"
            " WHERE video_id = ? AND status <> 'pending' ORDER BY clip_index",
            (video_id,),
        )
        return [(Clip(video_id, r[0], r[1], r[2]), ClipStatus(r[3]), r[4]) for r in rows]

    @_guarded
    def clip_timings(self, video_id: str) -> dict[int, dict[str, float]]:
        """Recorded stage seconds per clip index of ``video_id``."""
        timings: dict[int, dict[str, float]] = {}
        for clip_index, stage, seconds in self._db.execute(
            "SELECT clip_index, stage, seconds FROM clip_timings WHERE video_id = ? ORDER BY clip_index, stage",
            (video_id,),
        ):
            timings.setdefault(clip_index, {})[stage] = seconds
        return timings

    def delete_video(self, video_id: str) -> None:
        """Delete ``video_id``; refused (:class:`StoreError`) while another process ingests it."""
        self.get_video(video_id)  # a missing video is reported before any lock file is made for it
        self._require_writable()
        with video_lock(self.path, video_id, wait=False):
            self._delete_video(video_id)

    @_guarded
    def _delete_video(self, video_id: str) -> None:
        with self._tx() as db:
            if db.execute("SELECT 1 FROM videos WHERE video_id = ?", (video_id,)).fetchone() is None:
                raise NotFoundError(f"no video {video_id!r}")
            orphans = ops.orphan_entities_of_video(db, video_id)
            db.execute("UPDATE entities SET first_clip = NULL, last_clip = NULL WHERE video_id = ?", (video_id,))
            db.execute("DELETE FROM videos WHERE video_id = ?", (video_id,))
            db.executemany("DELETE FROM entities WHERE id = ?", [(e,) for e in orphans])
            merge_log.prune(ops.DIALECT, db)
        self._purge_keywords()

    def _purge_keywords(self) -> None:
        """Merge the FTS segments so deleted text leaves the file (not only the index)."""
        if not self._db.in_transaction:
            self._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")

    # entities and characters --------------------------------------------
    @_guarded
    def entities(self, kind: EntityKind | None = None) -> list[Entity]:
        where, params = ("n.kind = ?", [EntityKind(kind).value]) if kind is not None else ("1", [])
        rows = self._db.execute(f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE {where} ORDER BY n.id", params)
        return [entity_from_row(r) for r in rows]

    @_guarded
    def get_entity(self, entity_id: int) -> Entity:
        row = self._db.execute(f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE n.id = ?", (entity_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no entity {entity_id}")
        return entity_from_row(row)

    @_guarded
    def entity_bank(self, entity_id: int) -> list[Vector]:
        self.get_entity(entity_id)
        rows = self._db.execute("SELECT vector FROM entity_embeddings WHERE entity_id = ? ORDER BY ord", (entity_id,))
        return [from_blob(r[0]) for r in rows]

    @_guarded
    def entity_crops(self, entity_id: int, limit: int = 3) -> list[bytes]:
        rows = self._db.execute(
            "SELECT b.data FROM faces f JOIN blobs b ON b.id = f.crop_blob WHERE f.entity_id = ?"
            " ORDER BY f.quality DESC, f.det_score DESC, f.id LIMIT ?",
            (entity_id, limit),
        )
        return [bytes(r[0]) for r in rows]

    @_guarded
    def entity_snippets(self, entity_id: int, limit: int = 3) -> list[bytes]:
        rows = self._db.execute(
            "SELECT b.data FROM voices v JOIN blobs b ON b.id = v.audio_blob WHERE v.entity_id = ?"
            " ORDER BY v.end_s - v.start_s DESC, v.id LIMIT ?",
            (entity_id, limit),
        )
        return [bytes(r[0]) for r in rows]

    @_guarded
    def rename_entity(self, entity_id: int, name: str) -> None:
        with self._tx() as db:
            if db.execute("UPDATE entities SET name = ? WHERE id = ?", (name, entity_id)).rowcount == 0:
                raise NotFoundError(f"no entity {entity_id}")

    @_guarded
    def merge_entities(self, keep: int, absorb: int) -> None:
        with self._tx() as db:
            merge_log.merge_recorded(ops.DIALECT, db, keep, absorb, source="manual", evidence="merged by hand")

    @_guarded
    def entity_merges(self) -> list[EntityMerge]:
        return merge_log.merges(ops.DIALECT, self._db)

    @_guarded
    def undo_merge(self, merge_id: int) -> Entity:
        with self._tx() as db:
            absorbed, _ = merge_log.undo(ops.DIALECT, db, merge_id)
        return self.get_entity(absorbed)

    @_guarded
    def split_entity(self, entity_id: int, observation_ids: Sequence[int]) -> Entity:
        with self._tx() as db:
            new_id = ops.split_entity(db, entity_id, observation_ids)
        return self.get_entity(new_id)

    @_guarded
    def delete_entity(self, entity_id: int) -> None:
        with self._tx() as db:
            ops.delete_entity(db, entity_id)
        self._purge_keywords()

    @_guarded
    def links(self, min_confidence: float = 0.0) -> list[FaceVoiceLink]:
        rows = self._db.execute(
            "SELECT face_id, voice_id, confidence, source, evidence FROM links q WHERE seq ="
            " (SELECT max(seq) FROM links WHERE face_id = q.face_id AND voice_id = q.voice_id)"
            " AND confidence >= ? ORDER BY face_id, voice_id",
            (min_confidence,),
        )
        return [FaceVoiceLink(f, v, c, LinkSource(s), e) for f, v, c, s, e in rows]

    @_guarded
    def characters(self, before_clip: int | None = None, video_id: str | None = None) -> list[Character]:
        db = self._db
        visible = self._visible_entities(before_clip, video_id)
        where, params = _clip_scope(before_clip, video_id)
        evidence = db.execute(f"SELECT face_id, voice_id, confidence FROM links WHERE {where} ORDER BY seq", params)
        base_ids = dict(db.execute("SELECT entity_id, id FROM characters").fetchall())
        names = dict(db.execute("SELECT id, name FROM entities WHERE name <> ''").fetchall())
        return group_characters(visible, evidence, base_ids, names, self.link_confidence)

    def _visible_entities(self, before_clip: int | None, video_id: str | None) -> list[int]:
        """Entities seen (first seen, observed or linked) within the scope."""
        db = self._db
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
        row = self._db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no memory {memory_id}")
        return memory_from_row(row)

    @_guarded
    def memories(
        self, video_id: str | None = None, clip_index: int | None = None, flt: SearchFilter | None = None
    ) -> list[Memory]:
        where, params = filter_sql(flt)
        if video_id is not None:
            where, params = f"{where} AND m.video_id = ?", [*params, video_id]
        if clip_index is not None:
            where, params = f"{where} AND m.clip_index = ?", [*params, clip_index]
        rows = self._db.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY m.video_id, m.clip_index, m.id",
            params,
        )
        return [memory_from_row(r) for r in rows]

    @_guarded
    def memories_of_entities(self, entity_ids: Sequence[int], flt: SearchFilter | None = None) -> list[Memory]:
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        where, params = filter_sql(flt)
        rows = self._db.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN"
            f" (SELECT memory_id FROM edges WHERE entity_id IN ({placeholders(len(ids))})) AND {where}"
            " ORDER BY m.video_id, m.clip_index, m.id",
            [*ids, *params],
        )
        return [memory_from_row(r) for r in rows]

    @_guarded
    def delete_memory(self, memory_id: int) -> None:
        with self._tx() as db:
            ops.delete_memory(db, memory_id)
        self._purge_keywords()

    @_guarded
    def adjust_weight(self, memory_id: int, delta: float) -> None:
        with self._tx() as db:
            cursor = db.execute("UPDATE memories SET weight = weight + ? WHERE id = ?", (delta, memory_id))
            if cursor.rowcount == 0:
                raise NotFoundError(f"no memory {memory_id}")

    @_guarded
    def faces(self, video_id: str, clip_index: int | None = None) -> list[FaceObservation]:
        where, params = _clip_scope(clip_index, video_id, exact=True, alias="f")
        rows = self._db.execute(
            f"SELECT {FACE_COLUMNS} FROM faces f LEFT JOIN blobs b ON b.id = f.crop_blob"
            f" WHERE {where} ORDER BY f.clip_index, f.id",
            params,
        )
        return [face_from_row(r) for r in rows]

    @_guarded
    def face_sightings(self, video_id: str) -> list[tuple[float, int]]:
        rows = self._db.execute(
            "SELECT time_s, entity_id FROM faces WHERE video_id = ? AND entity_id IS NOT NULL ORDER BY time_s",
            (video_id,),
        )
        return [(float(t), int(e)) for t, e in rows]

    @_guarded
    def mouth_motions(self, video_id: str) -> list[tuple[float, int, float]]:
        rows = self._db.execute(
            "SELECT time_s, entity_id, mouth_motion FROM faces WHERE video_id = ? AND entity_id IS NOT NULL"
            " AND mouth_motion IS NOT NULL ORDER BY time_s",
            (video_id,),
        )
        return [(float(t), int(e), float(m)) for t, e, m in rows]

    @_guarded
    def voice_spans(self, video_id: str) -> list[tuple[float, float, int]]:
        rows = self._db.execute(
            "SELECT start_s, end_s, entity_id FROM voices WHERE video_id = ? AND entity_id IS NOT NULL"
            " ORDER BY start_s",
            (video_id,),
        )
        return [(float(a), float(b), int(e)) for a, b, e in rows]

    @_guarded
    def voices(self, video_id: str, clip_index: int | None = None) -> list[VoiceSegment]:
        where, params = _clip_scope(clip_index, video_id, exact=True, alias="v")
        rows = self._db.execute(
            f"SELECT {VOICE_COLUMNS} FROM voices v WHERE {where} ORDER BY v.clip_index, v.start_s, v.id", params
        )
        return [voice_from_row(r) for r in rows]

    @_guarded
    def voice_audio(self, voice_id: int) -> bytes | None:
        """The WAV snippet stored with voice segment ``voice_id``, if any."""
        row = self._db.execute(
            "SELECT b.data FROM voices v LEFT JOIN blobs b ON b.id = v.audio_blob WHERE v.id = ?", (voice_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"no voice segment {voice_id}")
        return None if row[0] is None else bytes(row[0])

    # search --------------------------------------------------------------
    @_guarded
    def vector_search(self, query: Vector, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        index = self._synced_vectors()
        if index is None:
            return []
        q = normalized(query)
        if len(q) != index.dim:
            raise IntegrityError(f"query has {len(q)} dimensions, the store uses {index.dim}")
        return sqlite_search.vector_search(self._db, index, q, k, flt)

    def _synced_vectors(self) -> MemoryVectors | None:
        """The vector index, caught up with the committed rows (not while a transaction is open)."""
        dim = self._dim()
        if dim is None:
            return None
        if self._vectors is None or self._vectors.dim != dim:
            self._vectors = MemoryVectors(dim)
        if not self._db.in_transaction:
            self._vectors.sync(self._db, writable=not self.readonly)
        return self._vectors

    @_guarded
    def keyword_search(self, query: str, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        return sqlite_search.keyword_search(self._db, query, k, flt)

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
        """All embeddings replaced and the model recorded in one transaction: an error (or an
        interruption) in the middle leaves the store as it was. The derived vector index is dropped
        and rebuilt from the rows on the next search."""
        if dim <= 0:
            raise IntegrityError(f"embedding dimension must be positive, got {dim}")
        with self._tx() as db:
            total = int(db.execute("SELECT count(*) FROM memories").fetchone()[0])
            done = last_id = 0
            while rows := db.execute(
                "SELECT id, text FROM memories WHERE id > ? ORDER BY id LIMIT ?", (last_id, batch)
            ).fetchall():
                vectors = [normalized(v) for v in embed([r[1] for r in rows])]
                if len(vectors) != len(rows) or any(len(v) != dim for v in vectors):
                    raise IntegrityError(f"the embedder {name!r} returned vectors that are not {dim}-d, one per text")
                db.executemany("UPDATE memories SET embedding = ? WHERE id = ?",
                               [(to_blob(v), r[0]) for v, r in zip(vectors, rows, strict=True)])
                done, last_id = done + len(rows), rows[-1][0]
                if progress is not None:
                    progress(done, total)
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [("embedding_model", name), ("embedding_dim", str(dim))],
            )
            db.execute("DELETE FROM vector_snapshots")
        self._vectors = None
        return done

    def iter_memory_vectors(self, flt: SearchFilter | None = None) -> Iterator[tuple[int, Vector]]:
        """Batches of 5000 rows in id order; the lock is held per batch, not across the iteration."""
        last_id = 0
        while batch := self._vector_batch(last_id, flt):
            yield from batch
            last_id = batch[-1][0]

    @_guarded
    def _vector_batch(self, after_id: int, flt: SearchFilter | None) -> list[tuple[int, Vector]]:
        where, params = filter_sql(flt)
        rows = self._db.execute(
            f"SELECT m.id, m.embedding FROM memories m WHERE m.id > ? AND {where} ORDER BY m.id LIMIT 5000",
            [after_id, *params],
        ).fetchall()
        return [(int(i), from_blob(blob)) for i, blob in rows]

    # maintenance -----------------------------------------------------------
    @_guarded
    def build_vector_index(self) -> int:
        """Catch the vector index up with the rows and persist it; returns the rows it covers."""
        index = self._synced_vectors()
        if index is None:
            return 0
        if not self.readonly and index.changes:
            index.persist(self._db)
        return index.mirror.n_alive

    @_guarded
    def compact(self) -> None:
        """Rewrite derived data without deleted residue, then VACUUM the file.

        Re-saves the vector snapshot (or drops it for small stores), forgets
        tombstones it covers, merges the FTS index and reclaims free pages.
        """
        self._require_writable()
        index = self._synced_vectors()
        db = self._db
        with self._tx():
            if index is None or index.ann is None:
                db.execute("DELETE FROM vector_snapshots")
        if index is not None and index.ann is not None:
            index.persist(db)
        covered = index.tomb_seq if index is not None else 1 << 62
        with self._tx():
            db.execute("DELETE FROM memory_tombstones WHERE seq <= ?", (covered,))
        self._purge_keywords()
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @_guarded
    def check(self) -> list[str]:
        """SQLite's integrity check and foreign-key check; an empty list means healthy."""
        db = self._db
        problems = [r[0] for r in db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        problems += [f"foreign key: {tuple(r)}" for r in db.execute("PRAGMA foreign_key_check")]
        return problems

    @_guarded
    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for status output and tests)."""
        tables = (
            "videos",
            "clips",
            "entities",
            "entity_embeddings",
            "faces",
            "voices",
            "memories",
            "edges",
            "links",
            "blobs",
            "characters",
            "clip_timings",
            "memory_tombstones",
        )
        counts = {t: int(self._db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}
        counts["memories_fts"] = int(self._db.execute("SELECT count(*) FROM memories_fts_docsize").fetchone()[0])
        return counts


def _clip_scope(
    clip_index: int | None, video_id: str | None, *, exact: bool = False, alias: str = ""
) -> tuple[str, list[Any]]:
    """Condition on ``video_id`` and ``clip_index`` (``<=`` unless ``exact``) columns."""
    prefix = f"{alias}." if alias else ""
    parts: list[str] = []
    params: list[Any] = []
    if video_id is not None:
        parts.append(f"{prefix}video_id = ?")
        params.append(video_id)
    if clip_index is not None:
        parts.append(f"{prefix}clip_index {'=' if exact else '<='} ?")
        params.append(clip_index)
    return " AND ".join(parts) or "1", params
