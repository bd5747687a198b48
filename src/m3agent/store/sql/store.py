"""The memory store both backends share: every method whose logic is one on SQLite and PostgreSQL.

It is written in four parts: the backend's primitives and the statement helpers
(:mod:`m3agent.store.sql.base`), the people side (:mod:`m3agent.store.sql.people`: entities,
characters, observations), the vectors (:mod:`m3agent.store.sql.vectors`) and, here, videos, clips,
consolidation records, memories and counts. :class:`SQLStore` writes each statement once, with ``?``
placeholders rendered for its backend (:func:`m3agent.store.sql.dialect.render`), and reads rows through its
dialect's :class:`~m3agent.store.sql.rows.SQLRows`. Its subclasses (:class:`~m3agent.store.sqlite.store.SQLiteStore`,
:class:`~m3agent.store.postgres.store.PostgresStore`) provide only what really differs:

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

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from m3agent.domain import (
    Clip,
    ClipStatus,
    ConsolidatedClip,
    ForgottenConsolidation,
    Memory,
    SearchFilter,
    Video,
)
from m3agent.errors import IntegrityError, NotFoundError, VideoMismatchError
from m3agent.store import entity_ops, merge_log
from m3agent.store.protocol import ClipRecord
from m3agent.store.sql import dialect
from m3agent.store.sql.base import C, guarded
from m3agent.store.sql.people import SQLPeople
from m3agent.store.sql.rows import video_from_row
from m3agent.store.sql.vectors import SQLVectors
from m3agent.store.sql.writer import check_unit
from m3agent.store.sqlite.schema import utc_now

if TYPE_CHECKING:
    from m3agent.store.protocol import ClipWriter, ConsolidationWriter

TABLES = ("videos", "clips", "entities", "entity_embeddings", "faces", "voices", "memories", "edges", "links",
          "blobs", "characters", "clip_timings", "entity_attributes", "shots")  # what counts() reports


class SQLStore(SQLPeople[C], SQLVectors[C]):
    """A :class:`~m3agent.store.protocol.MemoryStore` in SQL; ``C`` is the driver's connection type."""

    _counted: ClassVar[tuple[str, ...]] = TABLES

    @guarded
    def schema_version(self) -> int:
        """The last migration applied to this memory."""
        with self._read() as db:
            return self._schema_version(db)

    # videos and clips ------------------------------------------------------
    @guarded
    def add_video(self, video: Video) -> None:
        """Register a video; adding an existing id again updates its source, duration, title and metadata.

        One id names one file: when both the stored video and ``video`` carry a fingerprint and they differ,
        :class:`VideoMismatchError` is raised and nothing changes (a stored video without one is stamped).
        """
        with self._tx() as db:
            row = self._run(db, "SELECT fingerprint, source FROM videos WHERE video_id = ?",
                            (video.video_id,)).fetchone()
            if row is not None and row[0] and video.fingerprint and row[0] != video.fingerprint:
                raise VideoMismatchError(
                    f"video {video.video_id!r} already holds another file ({Path(str(row[1])).name}); "
                    f"{Path(video.source).name} differs in content, so its clips are not mixed into it")
            self._run(db, "INSERT INTO videos (video_id, source, duration_s, title, metadata, added_at, fingerprint)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (video_id) DO UPDATE SET source = excluded.source,"
                      " duration_s = excluded.duration_s, title = excluded.title, metadata = excluded.metadata,"
                      " fingerprint = CASE WHEN excluded.fingerprint = '' THEN videos.fingerprint"
                      " ELSE excluded.fingerprint END",
                      (video.video_id, video.source, video.duration_s, video.title, json.dumps(video.metadata),
                       utc_now(), video.fingerprint))

    @guarded
    def get_video(self, video_id: str) -> Video:
        """The video ``video_id``; :class:`NotFoundError` when it is not stored."""
        with self._read() as db:
            row = self._run(db, "SELECT video_id, source, duration_s, title, metadata, fingerprint FROM videos"
                            " WHERE video_id = ?", (video_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no video {video_id!r} in {self._where}")
        return video_from_row(row)

    @guarded
    def videos(self) -> list[Video]:
        """Every video, in the order they were added."""
        with self._read() as db:
            rows = self._run(db, "SELECT video_id, source, duration_s, title, metadata, fingerprint FROM videos"
                             " ORDER BY id")
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
    def clips(self, video_id: str) -> list[ClipRecord]:
        """Recorded (not pending) clips of a video in index order, with status and reason."""
        with self._read() as db:
            rows = self._run(db, "SELECT clip_index, start_s, end_s, status, reason FROM clips"
                             " WHERE video_id = ? AND status <> 'pending' ORDER BY clip_index", (video_id,))
            return [ClipRecord(Clip(video_id, r[0], r[1], r[2]), ClipStatus(r[3]), r[4]) for r in rows]

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

    # maintenance -----------------------------------------------------------
    @guarded
    def counts(self) -> dict[str, int]:
        """Row counts of the main tables and of the keyword index (for status output and tests)."""
        with self._read() as db:
            counts = {t: int(self._run(db, f"SELECT count(*) FROM {t}").fetchone()[0]) for t in self._counted}
            counts["memories_fts"] = self._keyword_rows(db, counts)
        return counts
