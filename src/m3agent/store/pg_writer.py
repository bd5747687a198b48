"""The transactional writer of one clip on PostgreSQL (see :meth:`PostgresStore.clip`).

Same contract as :mod:`m3agent.store.sqlite_writer`: every write happens in
the clip's open transaction and is invisible to other connections until the
``with`` block ends cleanly. Creating an entity first takes the store's
identity lock (see :meth:`PostgresStore.identity_barrier`), so two workers
never both create an entity for one person.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from m3agent.domain import Clip, Entity, EntityKind, FaceObservation, FaceVoiceLink, Memory, VoiceSegment
from m3agent.errors import IntegrityError, NotFoundError, StoreError
from m3agent.store import dialect, merge_log
from m3agent.store.pg_entities import DIALECT
from m3agent.store.pg_rows import require_entity, write_bank
from m3agent.store.sqlite_rows import words_json
from m3agent.store.sqlite_schema import utc_now
from m3agent.store.sqlite_writer import check_link
from m3agent.store.vectors import normalized, to_blob

if TYPE_CHECKING:
    import psycopg

    from m3agent.domain import Vector

    Conn = psycopg.Connection[Any]


class PgClipWriter:
    """Writes of one clip inside the transaction its store opened."""

    def __init__(self, conn: Conn, clip: Clip, memory_dim: int | None, barrier: Callable[[], None]) -> None:
        self.clip = clip
        self._conn = conn
        self._memory_dim = memory_dim
        self._barrier = barrier
        self._open = True

    def close(self) -> None:
        self._open = False

    def _db(self) -> Conn:
        if not self._open:
            raise StoreError(f"the writer of clip {self.clip.index} of {self.clip.video_id!r} is closed")
        return self._conn

    def _check_clip(self, what: str, video_id: str, clip_index: int) -> None:
        if (video_id, clip_index) != (self.clip.video_id, self.clip.index):
            raise IntegrityError(
                f"{what} of clip {clip_index} of {video_id!r} given to the writer of clip "
                f"{self.clip.index} of {self.clip.video_id!r}",
                hint="open store.clip(...) for the clip the row belongs to",
            )

    # memories -------------------------------------------------------------
    def add_memory(self, memory: Memory) -> int:
        db = self._db()
        self._check_clip("a memory", memory.video_id, memory.clip_index)
        embedding = self._memory_embedding(memory)
        row = db.execute(
            "INSERT INTO memories (kind, text, video_id, clip_index, start_s, end_s, weight, confidence,"
            " provenance, last_clip_index, embedding, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (memory.kind.value, memory.text, memory.video_id, memory.clip_index, memory.start_s, memory.end_s,
             memory.weight, memory.confidence, memory.provenance,
             memory.last_clip_index if memory.last_clip_index is not None else memory.clip_index,
             embedding, utc_now()),
        ).fetchone()
        assert row is not None
        memory_id = int(row[0])
        self._link(memory_id, memory.entity_ids)
        return memory_id

    def _memory_embedding(self, memory: Memory) -> Vector:
        if memory.embedding is None:
            raise IntegrityError("a memory needs its text embedding", hint="embed the text before storing it")
        vector = normalized(memory.embedding)
        if self._memory_dim is None:
            raise IntegrityError(
                "the store has no embedding model recorded", hint="call store.set_embedding_model(name, dim)"
            )
        if len(vector) != self._memory_dim:
            raise IntegrityError(f"memory embedding has {len(vector)} dimensions, the store uses {self._memory_dim}")
        return vector

    def _link(self, memory_id: int, entity_ids: Sequence[int]) -> None:
        unique = sorted(set(entity_ids))
        if not unique:
            return
        known = {r[0] for r in self._conn.execute("SELECT id FROM entities WHERE id = ANY(%s)", (unique,))}
        missing = [e for e in unique if e not in known]
        if missing:
            raise IntegrityError(f"memory names unknown entities {missing}", hint="create the entities first")
        with self._conn.cursor() as cur:
            cur.executemany("INSERT INTO edges (entity_id, memory_id, weight) VALUES (%s, %s, 1.0)",
                            [(e, memory_id) for e in unique])

    def reinforce(self, memory_id: int, delta: float = 1.0) -> None:
        cursor = self._db().execute(
            "UPDATE memories SET weight = weight + %s, last_clip_index = CASE WHEN video_id = %s"
            " THEN greatest(coalesce(last_clip_index, clip_index), %s) ELSE last_clip_index END WHERE id = %s",
            (delta, self.clip.video_id, self.clip.index, memory_id),
        )
        if cursor.rowcount == 0:
            raise NotFoundError(f"no memory {memory_id}")

    def weaken(self, memory_id: int, amount: float, floor: float = 0.1) -> None:
        cursor = self._db().execute(
            "UPDATE memories SET weight = least(weight, greatest(%s, weight - %s)) WHERE id = %s",
            (floor, amount, memory_id),
        )
        if cursor.rowcount == 0:
            raise NotFoundError(f"no memory {memory_id}")

    # entities -------------------------------------------------------------
    def add_entity(self, kind: EntityKind, embeddings: Sequence[Vector], name: str = "") -> Entity:
        db = self._db()
        kind = EntityKind(kind)
        self._barrier()
        row = db.execute(
            "INSERT INTO entities (kind, name, video_id, first_clip, last_clip, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (kind.value, name, self.clip.video_id, self.clip.index, self.clip.index, utc_now()),
        ).fetchone()
        assert row is not None
        entity_id = int(row[0])
        db.execute("INSERT INTO characters (entity_id) VALUES (%s)", (entity_id,))
        write_bank(db, entity_id, embeddings)
        return Entity(id=entity_id, kind=kind, name=name, first_clip=self.clip.index, last_clip=self.clip.index,
                      video_id=self.clip.video_id)

    def update_entity_bank(self, entity_id: int, embeddings: Sequence[Vector]) -> None:
        db = self._db()
        require_entity(db, entity_id)
        db.execute("DELETE FROM entity_embeddings WHERE entity_id = %s", (entity_id,))
        write_bank(db, entity_id, embeddings)

    def _touch_entity(self, entity_id: int | None, kind: EntityKind) -> None:
        if entity_id is None:
            return
        found = require_entity(self._conn, entity_id)
        if found != kind.value:
            raise IntegrityError(f"entity {entity_id} is a {found}, not a {kind.value}")
        self._conn.execute(
            "UPDATE entities SET last_clip = greatest(coalesce(last_clip, %s), %s)"
            " WHERE id = %s AND video_id = %s AND last_clip IS DISTINCT FROM greatest(coalesce(last_clip, %s), %s)",
            (self.clip.index, self.clip.index, entity_id, self.clip.video_id, self.clip.index, self.clip.index),
        )

    # observations ---------------------------------------------------------
    def add_face(self, face: FaceObservation) -> int:
        db = self._db()
        self._check_clip("a face", self.clip.video_id, face.clip_index)
        self._touch_entity(face.entity_id, EntityKind.FACE)
        crop = store_blob(db, "face_crop", face.crop_jpeg)
        b = face.bbox
        row = db.execute(
            "INSERT INTO faces (video_id, clip_index, time_s, x1, y1, x2, y2, det_score, quality, track,"
            " embedding, crop_blob, entity_id, mouth_motion)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (self.clip.video_id, face.clip_index, face.time_s, b.x1, b.y1, b.x2, b.y2, face.det_score,
             face.quality, face.track, optional_blob(face.embedding), crop, face.entity_id, face.mouth_motion),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def add_voice(self, segment: VoiceSegment, audio_wav: bytes | None = None) -> int:
        db = self._db()
        self._check_clip("a voice segment", self.clip.video_id, segment.clip_index)
        self._touch_entity(segment.entity_id, EntityKind.VOICE)
        audio = store_blob(db, "voice_wav", audio_wav)
        row = db.execute(
            "INSERT INTO voices (video_id, clip_index, start_s, end_s, text, speaker, language, words,"
            " embedding, audio_blob, entity_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (self.clip.video_id, segment.clip_index, segment.start_s, segment.end_s, segment.text, segment.speaker,
             segment.language, words_json(segment.words), optional_blob(segment.embedding), audio,
             segment.entity_id),
        ).fetchone()
        assert row is not None
        return int(row[0])

    # identity evidence and timings ------------------------------------------
    def set_link(self, link: FaceVoiceLink) -> None:
        db = self._db()
        check_link(link, lambda entity_id: require_entity(db, entity_id))
        dialect.insert_link(db, dialect.Dialect.POSTGRES, link, self.clip)

    def merge_entities(self, keep: int, absorb: int, evidence: str) -> int:
        """Fold ``absorb`` into ``keep`` (automatic, for the reason in ``evidence``), recorded with this
        clip so it can be undone; returns the record id."""
        db = self._db()
        self._barrier()
        return merge_log.merge_recorded(DIALECT, db, keep, absorb, source="auto", evidence=evidence,
                                        video_id=self.clip.video_id, clip_index=self.clip.index)

    def record_timing(self, stage: str, seconds: float) -> None:
        dialect.record_timing(self._db(), dialect.Dialect.POSTGRES, self.clip, stage, seconds)


def store_blob(db: Conn, kind: str, data: bytes | None) -> int | None:
    if data is None:
        return None
    row = db.execute("INSERT INTO blobs (kind, data) VALUES (%s, %s) RETURNING id", (kind, data)).fetchone()
    assert row is not None
    return int(row[0])


def optional_blob(vector: Vector | None) -> bytes | None:
    return None if vector is None else to_blob(vector)


class PgConsolidationWriter(PgClipWriter):
    """A clip writer inside :meth:`PostgresStore.consolidation`, that also records the sources of facts
    and what it changed in existing memories (taken back by ``forget_consolidation``)."""

    def __init__(self, conn: Conn, clip: Clip, memory_dim: int | None, barrier: Callable[[], None]) -> None:
        super().__init__(conn, clip, memory_dim, barrier)
        self.notes: list[str] = []
        self.seconds: float | None = None

    def add_sources(self, memory_id: int, source_ids: Sequence[int]) -> None:
        dialect.add_sources(self._db(), dialect.Dialect.POSTGRES, self.clip, memory_id, source_ids)

    def reinforce(self, memory_id: int, delta: float = 1.0) -> None:
        with dialect.recorded_change(self._db(), dialect.Dialect.POSTGRES, self.clip, memory_id):
            super().reinforce(memory_id, delta)

    def weaken(self, memory_id: int, amount: float, floor: float = 0.1) -> None:
        with dialect.recorded_change(self._db(), dialect.Dialect.POSTGRES, self.clip, memory_id):
            super().weaken(memory_id, amount, floor)
