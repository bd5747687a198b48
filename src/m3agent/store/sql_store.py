"""The memory store both backends share: every method whose logic is one on SQLite and PostgreSQL.

:class:`SQLStore` writes each statement once, with ``?`` placeholders rendered for its backend
(:func:`m3agent.store.dialect.render`), and reads rows through its dialect's
:class:`~m3agent.store.sql_rows.SQLRows`. Its subclasses (:class:`~m3agent.store.sqlite.SQLiteStore`,
:class:`~m3agent.store.postgres.PostgresStore`) provide only what really differs:

- connections: ``_guard`` (around every public call: lock, open check, error translation),
  ``_read`` (a connection to read on), ``_tx`` (a write transaction), ``_unit`` (the one
  transaction of a clip or a consolidation), ``close``, ``_require_open``, the writer classes;
- locks across processes: ``video_lock``; on PostgreSQL ``_identity_lock`` and ``_lock_model``
  (no-ops here: a SQLite file has one writer at a time);
- the vector column and the indexes: ``_model_recorded``, ``_begin_reembed``, ``_nearest``,
  ``keyword_search``, ``_keyword_rows``, ``_after_delete`` (the clean-up deletions leave to the
  keyword index), ``compact``, ``check``; migrations run when a store is opened.

Deleting leaves nothing derived behind, in one transaction each: a video takes its clips, rows,
blobs and the entities seen only there; an entity takes its observations and media, links, the
memories about it alone (and link lines naming it), and its tag in other memories becomes
"someone"; a memory takes its edges, index entries and the transcript of the voice segments it
quotes (details in :mod:`m3agent.store.entity_ops`).
"""

from __future__ import annotations

import functools
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Generic, ParamSpec, Self, TypeVar

from m3agent.domain import (
    Character,
    Clip,
    ClipStatus,
    ConsolidatedClip,
    Entity,
    EntityAttribute,
    EntityKind,
    EntityMerge,
    FaceObservation,
    FaceVoiceLink,
    ForgottenConsolidation,
    LinkSource,
    Memory,
    ScoredMemory,
    SearchFilter,
    ShotRecord,
    Video,
    VoiceSegment,
)
from m3agent.errors import ConfigError, IntegrityError, NotFoundError, StoreReadOnlyError
from m3agent.store import dialect, entity_ops, merge_log
from m3agent.store.characters import default_link_confidence, group_characters
from m3agent.store.dialect import Connection, Dialect, Rows, render
from m3agent.store.sql_rows import (
    ATTRIBUTE_COLUMNS,
    ENTITY_COLUMNS,
    FACE_COLUMNS,
    ROWS,
    SHOT_COLUMNS,
    VOICE_COLUMNS,
    attribute_from_row,
    entity_from_row,
    face_from_row,
    shot_from_row,
    video_from_row,
    voice_from_row,
)
from m3agent.store.sql_writer import check_link, check_unit
from m3agent.store.sqlite_schema import utc_now
from m3agent.store.vectors import normalized

if TYPE_CHECKING:
    from m3agent.domain import Vector
    from m3agent.store.protocol import ClipWriter, ConsolidationWriter
    from m3agent.store.sql_writer import SQLClipWriter, SQLConsolidationWriter


C = TypeVar("C", bound=Connection)
S = TypeVar("S", bound="SQLStore[Any]")
P = ParamSpec("P")
R = TypeVar("R")
TABLES = ("videos", "clips", "entities", "entity_embeddings", "faces", "voices", "memories", "edges", "links",
          "blobs", "characters", "clip_timings", "entity_attributes", "shots")  # what counts() reports
BATCH = 5000  # rows per read of iter_memory_vectors
UPSERT_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


def link_confidence_of(value: float | None) -> float:
    """The ``link_confidence`` a store is opened with (the setting's default for ``None``), checked."""
    accept = default_link_confidence() if value is None else value
    if not 0.0 < accept <= 1.0:
        raise ConfigError(f"link_confidence must be in (0, 1], got {accept}",
                          hint="set perception.link_accept_confidence between 0 and 1")
    return accept


def guarded(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run ``method`` inside the store's guard: its lock, the open check, its driver's errors translated."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._guard():
            return method(self, *args, **kwargs)

    return wrapper


class SQLStore(ABC, Generic[C]):
    """A :class:`~m3agent.store.protocol.MemoryStore` in SQL; ``C`` is the driver's connection type."""

    dialect: ClassVar[Dialect]
    _writers: ClassVar[tuple[type[SQLClipWriter], type[SQLConsolidationWriter]]]  # of a clip, of a consolidation
    _row_lock: ClassVar[str] = ""  # appended to a read of a clip's row that decides a write (FOR UPDATE)
    _counted: ClassVar[tuple[str, ...]] = TABLES

    def __init__(self, url: str, where: str, *, readonly: bool, link_confidence: float) -> None:
        self.url = url
        self.readonly = readonly
        self.link_confidence = link_confidence
        self._where = where  # how messages name this memory (its file or its redacted URL)
        self._rows = ROWS[self.dialect]

    # what each backend provides --------------------------------------------
    @abstractmethod
    def close(self) -> None:
        """Release the connection(s); later calls raise :class:`StoreError`."""

    @abstractmethod
    def _require_open(self) -> None: ...

    @abstractmethod
    def _guard(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def _read(self) -> AbstractContextManager[C]: ...

    @abstractmethod
    def _tx(self) -> AbstractContextManager[C]: ...

    @abstractmethod
    def _unit(self) -> AbstractContextManager[C]:
        """The one transaction of a clip or a consolidation (its checks and locks taken)."""

    @abstractmethod
    def _schema_version(self, db: C) -> int: ...

    @abstractmethod
    def _model_recorded(self, db: C, dim: int) -> None:
        """Inside the transaction that records a new embedding model: fit the vector column or index to it."""

    @abstractmethod
    def _nearest(self, queries: Vector, k: int, flt: SearchFilter | None) -> list[ScoredMemory]:
        """Top-``k`` by the best cosine over the rows of ``queries`` (unit vectors, one per row)."""

    @abstractmethod
    def _keyword_rows(self, db: C, counts: dict[str, int]) -> int:
        """Rows of the keyword index (``counts`` holds the table counts)."""

    @abstractmethod
    def keyword_search(self, query: str, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` memories by the backend's keyword ranking that pass ``flt``; free text is never syntax."""

    @abstractmethod
    def video_lock(self, video_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> AbstractContextManager[None]:
        """The writer lock of ``video_id`` across processes (see the protocol)."""

    @abstractmethod
    def compact(self) -> None:
        """Rewrite the memory so deleted rows leave no bytes behind."""

    @abstractmethod
    def check(self) -> list[str]:
        """The problems the backend's checks find; an empty list means healthy."""

    def identity_barrier(self) -> None:
        """Serialise identity decisions across processes before an entity read; none needed here."""

    def _identity_lock(self, db: C) -> None:
        """Inside a transaction that corrects identities: wait for other processes' identity decisions."""

    def _lock_model(self, db: C) -> None:
        """Inside a transaction that changes the embedding model: exclude other processes doing so."""

    def _begin_reembed(self, db: C) -> None:
        """Inside the re-embedding transaction, before the first vector is replaced."""

    def _after_delete(self) -> None:
        """After a deletion committed: clean up what the indexes keep of deleted text."""

    # lifecycle -------------------------------------------------------------
    def __enter__(self) -> Self:
        """The store itself, closed when the ``with`` block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store, however the block ended."""
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}{', readonly' if self.readonly else ''})"

    def _require_writable(self) -> None:
        if self.readonly:
            raise StoreReadOnlyError(f"the memory store {self._where} is open read-only")

    def _run(self, db: C, sql: str, params: Sequence[Any] = ()) -> Rows:
        """Execute ``sql`` (``?`` placeholders) on ``db`` in this backend's parameter style."""
        return db.execute(render(sql, self.dialect), params)

    def _filter(self, flt: SearchFilter | None) -> tuple[str, list[Any]]:
        """The WHERE condition of ``flt`` on memories ``m`` with ``?`` placeholders, to join other ``?`` SQL.

        ``filter_sql`` writes it in the backend's style; it holds no literal ``%`` or ``?``, so its ``%s``
        read back as ``?`` exactly.
        """
        where, params = self._rows.filter_sql(flt)
        return where.replace("%s", "?"), params

    @guarded
    def schema_version(self) -> int:
        """The last migration applied to this memory."""
        with self._read() as db:
            return self._schema_version(db)

    @guarded
    def embedding_model(self) -> tuple[str, int] | None:
        """``(name, dim)`` of the text embeddings stored, or ``None`` while none is recorded."""
        with self._read() as db:
            return self._model(db)

    def _model(self, db: C) -> tuple[str, int] | None:
        rows = dict(self._run(db, "SELECT key, value FROM meta WHERE key IN ('embedding_model', 'embedding_dim')")
                    .fetchall())
        if "embedding_dim" not in rows:
            return None
        return rows.get("embedding_model", ""), int(rows["embedding_dim"])

    def _dim(self) -> int | None:
        model = self.embedding_model()
        return model[1] if model else None

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

    # videos and clips ------------------------------------------------------
    @guarded
    def add_video(self, video: Video) -> None:
        """Register a video; adding an existing id again updates its source, duration, title and metadata."""
        with self._tx() as db:
            self._run(db, "INSERT INTO videos (video_id, source, duration_s, title, metadata, added_at)"
                      " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (video_id) DO UPDATE SET source = excluded.source,"
                      " duration_s = excluded.duration_s, title = excluded.title, metadata = excluded.metadata",
                      (video.video_id, video.source, video.duration_s, video.title, json.dumps(video.metadata),
                       utc_now()))

    @guarded
    def get_video(self, video_id: str) -> Video:
        """The video ``video_id``; :class:`NotFoundError` when it is not stored."""
        with self._read() as db:
            row = self._run(db, "SELECT video_id, source, duration_s, title, metadata FROM videos"
                            " WHERE video_id = ?", (video_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no video {video_id!r} in {self._where}")
        return video_from_row(row)

    @guarded
    def videos(self) -> list[Video]:
        """Every video, in the order they were added."""
        with self._read() as db:
            rows = self._run(db, "SELECT video_id, source, duration_s, title, metadata FROM videos ORDER BY id")
            return [video_from_row(r) for r in rows]

    def _require_video(self, db: C, video_id: str, hint: str = "add_video before writing its clips") -> None:
        if self._run(db, "SELECT 1 FROM videos WHERE video_id = ?", (video_id,)).fetchone() is None:
            raise NotFoundError(f"no video {video_id!r}", hint=hint)

    @contextmanager
    def clip(self, clip: Clip) -> Iterator[ClipWriter]:
        """One transaction for all writes of ``clip``; marks it done when the block ends cleanly."""
        with self._unit() as db:
            self._begin_clip(db, clip)
            writer = self._writers[0](db, clip, self._dim(), self.identity_barrier)
            try:
                yield writer
                self._set_clip(db, clip, ClipStatus.DONE.value, "")
            finally:
                writer.close()

    def _begin_clip(self, db: C, clip: Clip) -> None:
        """Refuse an invalid or stored clip; otherwise hold its row (created pending) for this transaction."""
        if clip.index < 0 or clip.end_s < clip.start_s:
            raise IntegrityError(f"invalid clip {clip}")
        self._require_video(db, clip.video_id)
        self._run(db, "INSERT INTO clips (video_id, clip_index, start_s, end_s, status, reason, updated_at)"
                  " VALUES (?, ?, ?, ?, 'pending', '', ?) ON CONFLICT (video_id, clip_index) DO NOTHING",
                  (clip.video_id, clip.index, clip.start_s, clip.end_s, utc_now()))
        if self._clip_status(db, clip) == ClipStatus.DONE.value:
            raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is already stored",
                                 hint="delete the video to ingest it again")
        self._set_clip(db, clip, "pending", "")

    def _set_clip(self, db: C, clip: Clip, status: str, reason: str) -> None:
        self._run(db, "INSERT INTO clips (video_id, clip_index, start_s, end_s, status, reason, updated_at)"
                  " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (video_id, clip_index) DO UPDATE SET"
                  " start_s = excluded.start_s, end_s = excluded.end_s, status = excluded.status,"
                  " reason = excluded.reason, updated_at = excluded.updated_at",
                  (clip.video_id, clip.index, clip.start_s, clip.end_s, status, reason, utc_now()))

    def _clip_status(self, db: C, clip: Clip) -> str | None:
        row = self._run(db, "SELECT status FROM clips WHERE video_id = ? AND clip_index = ?" + self._row_lock,
                        (clip.video_id, clip.index)).fetchone()
        return None if row is None else str(row[0])

    @guarded
    def mark_clip(self, clip: Clip, status: ClipStatus, reason: str = "") -> None:
        """Record ``status``; a done clip keeps its rows and stays done (a late failure report is dropped)."""
        with self._tx() as db:
            self._require_video(db, clip.video_id)
            if self._clip_status(db, clip) != ClipStatus.DONE.value:
                self._set_clip(db, clip, ClipStatus(status).value, reason)

    @contextmanager
    def consolidation(self, clips: Sequence[Clip], model: str) -> Iterator[ConsolidationWriter]:
        """One transaction for what ``model`` consolidated from done ``clips``; recorded when it ends cleanly."""
        started = time.perf_counter()
        last = check_unit(clips)
        with self._unit() as db:
            for clip in clips:
                self._begin_consolidation(db, clip)
            writer = self._writers[1](db, last, self._dim(), self.identity_barrier)
            try:
                yield writer
                seconds = (writer.seconds or time.perf_counter() - started) / len(clips)
                for clip in clips:
                    self._run(db, "INSERT INTO consolidated_clips (video_id, clip_index, model, notes, seconds,"
                              " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                              (clip.video_id, clip.index, model, json.dumps(writer.notes if clip is last else []),
                               seconds, utc_now()))
            finally:
                writer.close()

    def _begin_consolidation(self, db: C, clip: Clip) -> None:
        """Refuse a clip that is not stored or is consolidated already (its row held on PostgreSQL)."""
        if self._clip_status(db, clip) != ClipStatus.DONE.value:
            raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is not stored",
                                 hint="ingest the clip before consolidating it")
        if self._run(db, "SELECT 1 FROM consolidated_clips WHERE video_id = ? AND clip_index = ?",
                     (clip.video_id, clip.index)).fetchone():
            raise IntegrityError(f"clip {clip.index} of {clip.video_id!r} is already consolidated")

    @guarded
    def consolidated_clips(self, video_id: str) -> dict[int, ConsolidatedClip]:
        """The consolidated clips of a video by index."""
        with self._read() as db:
            rows = self._run(db, "SELECT clip_index, model, notes, seconds FROM consolidated_clips"
                             " WHERE video_id = ? ORDER BY clip_index", (video_id,)).fetchall()
        return {r[0]: ConsolidatedClip(video_id, r[0], r[1], tuple(json.loads(r[2])), r[3]) for r in rows}

    @guarded
    def forget_consolidation(self, video_id: str) -> ForgottenConsolidation:
        """Take back the consolidation of ``video_id`` in one transaction (see the protocol)."""
        with self._tx() as db:
            forgotten = dialect.forget_consolidation(db, self.dialect, video_id)
            merge_log.prune(entity_ops.MERGES[self.dialect], db)
        self._after_delete()
        return forgotten

    @guarded
    def memory_sources(self, memory_ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
        """The recorded sources (episodic memory ids, ascending) of each of ``memory_ids`` that has any."""
        ids = sorted(set(memory_ids))
        found: dict[int, list[int]] = {}
        with self._read() as db:
            for start in range(0, len(ids), 500):  # a bounded IN list per statement
                among, params = self._rows.one_of("memory_id", ids[start:start + 500])
                for memory_id, source_id in self._run(db, f"SELECT memory_id, source_id FROM memory_sources"
                                                      f" WHERE {among} ORDER BY memory_id, source_id", params):
                    found.setdefault(int(memory_id), []).append(int(source_id))
        return {k: tuple(v) for k, v in found.items()}

    @guarded
    def clips(self, video_id: str) -> list[tuple[Clip, ClipStatus, str]]:
        """Recorded (not pending) clips of a video in index order, with status and reason."""
        with self._read() as db:
            rows = self._run(db, "SELECT clip_index, start_s, end_s, status, reason FROM clips"
                             " WHERE video_id = ? AND status <> 'pending' ORDER BY clip_index", (video_id,))
            return [(Clip(video_id, r[0], r[1], r[2]), ClipStatus(r[3]), r[4]) for r in rows]

    @guarded
    def recorded_clip(self, video_id: str, index: int) -> Clip | None:
        """Clip ``index`` of a video if it is recorded (not pending), else None."""
        with self._read() as db:
            row = self._run(db, "SELECT start_s, end_s FROM clips WHERE video_id = ? AND clip_index = ?"
                            " AND status <> 'pending'", (video_id, index)).fetchone()
        return None if row is None else Clip(video_id, index, row[0], row[1])

    @guarded
    def clip_timings(self, video_id: str) -> dict[int, dict[str, float]]:
        """Recorded stage seconds per clip index of ``video_id``."""
        timings: dict[int, dict[str, float]] = {}
        with self._read() as db:
            for clip_index, stage, seconds in self._run(db, "SELECT clip_index, stage, seconds FROM clip_timings"
                                                        " WHERE video_id = ? ORDER BY clip_index, stage",
                                                        (video_id,)):
                timings.setdefault(clip_index, {})[stage] = seconds
        return timings

    @guarded
    def delete_video(self, video_id: str) -> None:
        """Remove the video with its clips, rows and blobs, and the entities seen only there."""
        with self._tx() as db:
            self._require_video(db, video_id, hint="list the videos with `m3agent videos`")
            orphans = entity_ops.orphan_entities_of_video(self.dialect, db, video_id)
            self._run(db, "UPDATE entities SET first_clip = NULL, last_clip = NULL WHERE video_id = ?", (video_id,))
            self._run(db, "DELETE FROM videos WHERE video_id = ?", (video_id,))
            if orphans:
                among, params = self._rows.one_of("id", orphans)
                self._run(db, f"DELETE FROM entities WHERE {among}", params)
            merge_log.prune(entity_ops.MERGES[self.dialect], db)
        self._after_delete()

    # entities and characters -----------------------------------------------
    @guarded
    def entities(self, kind: EntityKind | None = None) -> list[Entity]:
        """Every entity (of ``kind``) by id, with its observation count."""
        self.identity_barrier()
        where, params = ("n.kind = ?", [EntityKind(kind).value]) if kind is not None else ("1 = 1", [])
        with self._read() as db:
            rows = self._run(db, f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE {where} ORDER BY n.id", params)
            return [entity_from_row(r) for r in rows]

    @guarded
    def get_entity(self, entity_id: int) -> Entity:
        """The entity ``entity_id``; :class:`NotFoundError` when there is none."""
        with self._read() as db:
            row = self._run(db, f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE n.id = ?", (entity_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no entity {entity_id}")
        return entity_from_row(row)

    @guarded
    def entity_bank(self, entity_id: int) -> list[Vector]:
        """The stored embedding exemplars of an entity, in order."""
        self.get_entity(entity_id)
        with self._read() as db:
            return entity_ops.read_bank(self.dialect, db, entity_id)

    @guarded
    def entity_crops(self, entity_id: int, limit: int = 3) -> list[bytes]:
        """The best face crops (JPEG) of a face entity: sharpest, surest detections first."""
        with self._read() as db:
            rows = self._run(db, "SELECT b.data FROM faces f JOIN blobs b ON b.id = f.crop_blob WHERE f.entity_id = ?"
                             " ORDER BY f.quality DESC, f.det_score DESC, f.id LIMIT ?", (entity_id, limit))
            return [bytes(r[0]) for r in rows]

    @guarded
    def entity_snippets(self, entity_id: int, limit: int = 3) -> list[bytes]:
        """Voice snippets (WAV) of a voice entity, from its longest segments first."""
        with self._read() as db:
            rows = self._run(db, "SELECT b.data FROM voices v JOIN blobs b ON b.id = v.audio_blob"
                             " WHERE v.entity_id = ? ORDER BY v.end_s - v.start_s DESC, v.id LIMIT ?",
                             (entity_id, limit))
            return [bytes(r[0]) for r in rows]

    @guarded
    def rename_entity(self, entity_id: int, name: str) -> None:
        """Give an entity a name (``""`` clears it); :class:`NotFoundError` when there is none."""
        self._update_one("UPDATE entities SET name = ? WHERE id = ?", (name, entity_id), f"no entity {entity_id}")

    def _update_one(self, sql: str, params: Sequence[Any], missing: str) -> None:
        """Run an UPDATE of one row by id; :class:`NotFoundError` (``missing``) when there is no such row."""
        with self._tx() as db:
            if self._run(db, sql, params).rowcount == 0:
                raise NotFoundError(missing)

    @guarded
    def merge_entities(self, keep: int, absorb: int) -> None:
        """Fold ``absorb`` into ``keep`` by hand, recorded so :meth:`undo_merge` can take it back."""
        with self._tx() as db:
            self._identity_lock(db)
            merge_log.merge_recorded(entity_ops.MERGES[self.dialect], db, keep, absorb, source="manual",
                                     evidence="merged by hand")

    @guarded
    def link_entities(self, link: FaceVoiceLink) -> None:
        """Record a face-voice link made outside ingest (by hand), with the writers' role checks, where
        :func:`~m3agent.store.entity_ops.link_places` puts it; the latest link of a pair wins."""
        with self._tx() as db:
            self._identity_lock(db)
            check_link(link, lambda entity_id: ROWS[self.dialect].require_entity(db, entity_id))
            for video_id, clip_index in entity_ops.link_places(self.dialect, db, link.face_id, link.voice_id):
                dialect.insert_link(db, self.dialect, link, video_id, clip_index)

    @guarded
    def entity_merges(self) -> list[EntityMerge]:
        """Every recorded merge (by hand or automatic), oldest first."""
        with self._read() as db:
            return merge_log.merges(entity_ops.MERGES[self.dialect], db)

    @guarded
    def undo_merge(self, merge_id: int) -> Entity:
        """Bring back the entity merge ``merge_id`` absorbed (see the protocol); returns it."""
        with self._tx() as db:
            self._identity_lock(db)
            absorbed, _ = merge_log.undo(entity_ops.MERGES[self.dialect], db, merge_id)
        return self.get_entity(absorbed)

    @guarded
    def split_entity(self, entity_id: int, observation_ids: Sequence[int]) -> Entity:
        """Move the given face/voice observations to a new entity of the same kind; returns it."""
        with self._tx() as db:
            self._identity_lock(db)
            new_id = entity_ops.split_entity(self.dialect, db, entity_id, observation_ids)
        return self.get_entity(new_id)

    @guarded
    def delete_entity(self, entity_id: int) -> None:
        """Remove the entity and what memory text says about it (see :mod:`m3agent.store.entity_ops`)."""
        with self._tx() as db:
            self._identity_lock(db)
            entity_ops.delete_entity(self.dialect, db, entity_id)
        self._after_delete()

    @guarded
    def entity_attributes(self, entity_ids: Sequence[int]) -> list[EntityAttribute]:
        """The measured descriptions of ``entity_ids`` (see the protocol), by entity, video, clip, name and id."""
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        among, params = self._rows.one_of("entity_id", ids)
        with self._read() as db:
            rows = self._run(db, f"SELECT {ATTRIBUTE_COLUMNS} FROM entity_attributes WHERE {among}"
                             " ORDER BY entity_id, video_id, clip_index, name, id", params)
            return [attribute_from_row(r) for r in rows]

    @guarded
    def shots(self, video_id: str) -> list[ShotRecord]:
        """The stored shots of a video (with still or live), in time order."""
        with self._read() as db:
            rows = self._run(db, f"SELECT {SHOT_COLUMNS} FROM shots WHERE video_id = ? ORDER BY start_s, clip_index",
                             (video_id,))
            return [shot_from_row(r) for r in rows]

    @guarded
    def links(self, min_confidence: float = 0.0) -> list[FaceVoiceLink]:
        """The latest link of every face-voice pair with at least ``min_confidence``, by (face, voice)."""
        with self._read() as db:
            rows = self._run(db, "SELECT face_id, voice_id, confidence, source, evidence FROM links q WHERE seq ="
                             " (SELECT max(seq) FROM links WHERE face_id = q.face_id AND voice_id = q.voice_id)"
                             " AND confidence >= ? ORDER BY face_id, voice_id", (min_confidence,))
            return [FaceVoiceLink(f, v, c, LinkSource(s), e) for f, v, c, s, e in rows]

    @guarded
    def characters(self, before_clip: int | None = None, video_id: str | None = None) -> list[Character]:
        """Entities grouped by links of at least ``link_confidence``; ids stay stable as evidence grows."""
        with self._read() as db:
            visible = self._visible_entities(db, before_clip, video_id)
            where, params = clip_scope(before_clip, video_id)
            evidence = self._run(db, f"SELECT face_id, voice_id, confidence FROM links WHERE {where} ORDER BY seq",
                                 params).fetchall()
            base_ids = dict(self._run(db, "SELECT entity_id, id FROM characters").fetchall())
            names = dict(self._run(db, "SELECT id, name FROM entities WHERE name <> ''").fetchall())
        return group_characters(visible, evidence, base_ids, names, self.link_confidence)

    def _visible_entities(self, db: C, before_clip: int | None, video_id: str | None) -> list[int]:
        """Entities seen (first seen, observed or linked) within the scope."""
        if before_clip is None and video_id is None:
            return [r[0] for r in self._run(db, "SELECT id FROM entities")]
        where, params = clip_scope(before_clip, video_id)
        first = where.replace("clip_index", "first_clip")
        sql = (
            f"SELECT id FROM entities WHERE {first}"
            f" UNION SELECT entity_id FROM faces WHERE entity_id IS NOT NULL AND {where}"
            f" UNION SELECT entity_id FROM voices WHERE entity_id IS NOT NULL AND {where}"
            f" UNION SELECT e.entity_id FROM edges e JOIN memories m ON m.id = e.memory_id"
            f" WHERE {where.replace('video_id', 'm.video_id').replace('clip_index', 'm.clip_index')}"
        )
        return [r[0] for r in self._run(db, sql, params * 4)]

    # memories --------------------------------------------------------------
    @guarded
    def get_memory(self, memory_id: int) -> Memory:
        """The memory ``memory_id``; :class:`NotFoundError` when there is none."""
        with self._read() as db:
            row = self._run(db, f"SELECT {self._rows.memory_columns} FROM memories m WHERE m.id = ?",
                            (memory_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no memory {memory_id}")
        return self._rows.memory_from_row(row)

    @guarded
    def memories(
        self, video_id: str | None = None, clip_index: int | None = None, flt: SearchFilter | None = None
    ) -> list[Memory]:
        """Memories in (video, clip, id) order, optionally restricted."""
        where, params = self._filter(flt)
        if video_id is not None:
            where, params = f"{where} AND m.video_id = ?", [*params, video_id]
        if clip_index is not None:
            where, params = f"{where} AND m.clip_index = ?", [*params, clip_index]
        return self._memories_where(where, params)

    @guarded
    def memories_containing(self, fragments: Sequence[str], flt: SearchFilter | None = None) -> list[Memory]:
        """Memories passing ``flt`` whose text contains any of ``fragments`` (case-sensitive), in (video, clip,
        id) order; the text test runs in SQL, so only the matching rows are read whole."""
        if not fragments:
            return []
        where, params = self._filter(flt)
        return self._memories_where(f"{where} AND {self._rows.text_contains_any(len(fragments))}",
                                    [*params, *fragments])

    def _memories_where(self, where: str, params: Sequence[Any]) -> list[Memory]:
        with self._read() as db:
            rows = self._run(db, f"SELECT {self._rows.memory_columns} FROM memories m WHERE {where}"
                             " ORDER BY m.video_id, m.clip_index, m.id", params)
            return [self._rows.memory_from_row(r) for r in rows]

    @guarded
    def memories_of_entities(self, entity_ids: Sequence[int], flt: SearchFilter | None = None) -> list[Memory]:
        """Memories linked to any of ``entity_ids`` (through the indexed adjacency), in (video, clip, id) order."""
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        among, ids_params = self._rows.one_of("entity_id", ids)
        where, params = self._filter(flt)
        return self._memories_where(f"m.id IN (SELECT memory_id FROM edges WHERE {among}) AND {where}",
                                    [*ids_params, *params])

    @guarded
    def delete_memory(self, memory_id: int) -> None:
        """Remove the memory, its edges and index entries, and the transcript of the segments it quotes."""
        with self._tx() as db:
            entity_ops.delete_memory(self.dialect, db, memory_id)
        self._after_delete()

    @guarded
    def adjust_weight(self, memory_id: int, delta: float) -> None:
        """Add ``delta`` to a memory's weight; :class:`NotFoundError` when there is no such memory."""
        self._update_one("UPDATE memories SET weight = weight + ? WHERE id = ?", (delta, memory_id),
                         f"no memory {memory_id}")

    @guarded
    def faces(self, video_id: str, clip_index: int | None = None) -> list[FaceObservation]:
        """The face observations of a video (of one clip), in clip order, with their crops."""
        where, params = clip_scope(clip_index, video_id, exact=True, alias="f")
        with self._read() as db:
            rows = self._run(db, f"SELECT {FACE_COLUMNS} FROM faces f LEFT JOIN blobs b ON b.id = f.crop_blob"
                             f" WHERE {where} ORDER BY f.clip_index, f.id", params)
            return [face_from_row(r) for r in rows]

    @guarded
    def face_sightings(self, video_id: str) -> list[tuple[float, int]]:
        """``(time_s, entity_id)`` of every identified face of a video, in time order (see the protocol)."""
        with self._read() as db:
            rows = self._run(db, "SELECT time_s, entity_id FROM faces WHERE video_id = ? AND entity_id IS NOT NULL"
                             " ORDER BY time_s, id", (video_id,))
            return [(float(t), int(e)) for t, e in rows]

    @guarded
    def mouth_motions(self, video_id: str) -> list[tuple[float, int, float]]:
        """``(time_s, entity_id, mouth_motion)`` of the identified faces whose mouth motion was measured."""
        with self._read() as db:
            rows = self._run(db, "SELECT time_s, entity_id, mouth_motion FROM faces WHERE video_id = ?"
                             " AND entity_id IS NOT NULL AND mouth_motion IS NOT NULL ORDER BY time_s, id",
                             (video_id,))
            return [(float(t), int(e), float(m)) for t, e, m in rows]

    @guarded
    def voice_spans(self, video_id: str) -> list[tuple[float, float, int]]:
        """``(start_s, end_s, entity_id)`` of every identified voice segment of a video, in time order."""
        with self._read() as db:
            rows = self._run(db, "SELECT start_s, end_s, entity_id FROM voices WHERE video_id = ?"
                             " AND entity_id IS NOT NULL ORDER BY start_s, id", (video_id,))
            return [(float(a), float(b), int(e)) for a, b, e in rows]

    @guarded
    def voices(self, video_id: str, clip_index: int | None = None) -> list[VoiceSegment]:
        """The voice segments of a video (of one clip), in clip and time order."""
        where, params = clip_scope(clip_index, video_id, exact=True, alias="v")
        with self._read() as db:
            rows = self._run(db, f"SELECT {VOICE_COLUMNS} FROM voices v WHERE {where}"
                             " ORDER BY v.clip_index, v.start_s, v.id", params)
            return [voice_from_row(r) for r in rows]

    @guarded
    def voice_audio(self, voice_id: int) -> bytes | None:
        """The WAV snippet stored with voice segment ``voice_id``, if any."""
        with self._read() as db:
            row = self._run(db, "SELECT b.data FROM voices v LEFT JOIN blobs b ON b.id = v.audio_blob"
                            " WHERE v.id = ?", (voice_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no voice segment {voice_id}")
        return None if row[0] is None else bytes(row[0])

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

    # maintenance -----------------------------------------------------------
    @guarded
    def counts(self) -> dict[str, int]:
        """Row counts of the main tables and of the keyword index (for status output and tests)."""
        with self._read() as db:
            counts = {t: int(self._run(db, f"SELECT count(*) FROM {t}").fetchone()[0]) for t in self._counted}
            counts["memories_fts"] = self._keyword_rows(db, counts)
        return counts


def clip_scope(clip_index: int | None, video_id: str | None, *, exact: bool = False,
               alias: str = "") -> tuple[str, list[Any]]:
    """Condition (``?`` placeholders) on ``video_id`` and ``clip_index`` (``<=`` unless ``exact``) columns."""
    prefix = f"{alias}." if alias else ""
    parts: list[str] = []
    params: list[Any] = []
    if video_id is not None:
        parts.append(f"{prefix}video_id = ?")
        params.append(video_id)
    if clip_index is not None:
        parts.append(f"{prefix}clip_index {'=' if exact else '<='} ?")
        params.append(clip_index)
    return " AND ".join(parts) or "1 = 1", params
