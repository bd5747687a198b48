"""The transactional writers of one clip and of one consolidation, for both SQL stores.

Every method writes inside the transaction the store opened (``store.clip``, ``store.consolidation``);
nothing is visible to other connections until the writer's ``with`` block ends cleanly, when the clip
is marked done. Methods raise :class:`IntegrityError` for rows that do not belong to the clip, and
:class:`StoreError` once the writer is closed.

The SQL is written once with ``?`` placeholders and ``{larger}``/``{smaller}`` for the two-argument
``max``/``min`` (``greatest``/``least`` on PostgreSQL); a backend's writer names its ``dialect``,
which also picks how vectors are stored (:class:`~m3agent.store.sql.rows.SQLRows`) and how
:mod:`~m3agent.store.merge_log` runs (:data:`~m3agent.store.entity_ops.MERGES`). Given a ``barrier``
(PostgreSQL's identity lock), a writer takes it before creating or merging an entity, so two workers
never both create an entity for one person; a SQLite file has one writer at a time and needs none.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from m3agent.domain import (
    Clip,
    Entity,
    EntityAttribute,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    Memory,
    ShotRecord,
    VoiceSegment,
)
from m3agent.errors import IntegrityError, NotFoundError, StoreError
from m3agent.store import merge_log
from m3agent.store.entity_ops import MERGES
from m3agent.store.index.vectors import normalized, to_blob
from m3agent.store.sql import dialect
from m3agent.store.sql.dialect import Connection, Dialect, execute_many, render
from m3agent.store.sql.rows import ROWS, SQLRows, words_json
from m3agent.store.sqlite.schema import utc_now

if TYPE_CHECKING:
    from m3agent.domain import Vector

_SCALARS = {Dialect.SQLITE: {"larger": "max", "smaller": "min"},
            Dialect.POSTGRES: {"larger": "greatest", "smaller": "least"}}
INSERT_MEMORY = (
    "INSERT INTO memories (kind, text, video_id, clip_index, start_s, end_s, weight, confidence, provenance,"
    " last_clip_index, embedding, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
INSERT_EDGE = "INSERT INTO edges (entity_id, memory_id, weight) VALUES (?, ?, 1.0)"
REINFORCE = (
    "UPDATE memories SET weight = weight + ?, last_clip_index = CASE WHEN video_id = ?"
    " THEN {larger}(coalesce(last_clip_index, clip_index), ?) ELSE last_clip_index END WHERE id = ?"
)
WEAKEN = "UPDATE memories SET weight = {smaller}(weight, {larger}(?, weight - ?)) WHERE id = ?"
INSERT_ENTITY = (
    "INSERT INTO entities (kind, name, video_id, first_clip, last_clip, created_at) VALUES (?, ?, ?, ?, ?, ?)"
    " RETURNING id"
)
# only a later clip moves last_clip (no row is rewritten to the value it has, so no lock is taken for nothing)
SEEN_IN_CLIP = (
    "UPDATE entities SET last_clip = ? WHERE id = ? AND video_id = ? AND (last_clip IS NULL OR last_clip < ?)"
)
INSERT_FACE = (
    "INSERT INTO faces (video_id, clip_index, time_s, x1, y1, x2, y2, det_score, quality, track, embedding,"
    " crop_blob, entity_id, mouth_motion) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
INSERT_VOICE = (
    "INSERT INTO voices (video_id, clip_index, start_s, end_s, text, speaker, language, words, embedding,"
    " audio_blob, entity_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)

INSERT_ATTRIBUTE = (
    "INSERT INTO entity_attributes (entity_id, video_id, clip_index, name, value, confidence, weight, evidence)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
DELETE_ATTRIBUTE = "DELETE FROM entity_attributes WHERE entity_id = ? AND video_id = ? AND clip_index = ? AND name = ?"
UPSERT_SHOT = (
    "INSERT INTO shots (video_id, clip_index, start_s, end_s, cut, kind, confidence, motion, evidence)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (video_id, clip_index, start_s) DO UPDATE SET"
    " end_s = excluded.end_s, cut = excluded.cut, kind = excluded.kind, confidence = excluded.confidence,"
    " motion = excluded.motion, evidence = excluded.evidence"
)
SHOT_KINDS = ("still", "live", "uncertain")


class SQLClipWriter:
    """Writes of one clip inside the transaction its store opened; a subclass names its ``dialect``."""

    dialect: ClassVar[Dialect]

    def __init__(self, conn: Connection, clip: Clip, memory_dim: int | None,
                 barrier: Callable[[], None] | None = None) -> None:
        self.clip = clip
        self._conn = conn
        self._memory_dim = memory_dim
        self._barrier = barrier
        self._open = True

    @property
    def rows(self) -> SQLRows:
        """The row conversions of this writer's dialect."""
        return ROWS[self.dialect]

    @property
    def merges(self) -> merge_log.Dialect:
        """How the merge log runs on this writer's dialect."""
        return MERGES[self.dialect]

    def close(self) -> None:
        """End the writer (its store does, when the transaction ends): later writes raise StoreError."""
        self._open = False

    def _db(self) -> Connection:
        if not self._open:
            raise StoreError(f"the writer of clip {self.clip.index} of {self.clip.video_id!r} is closed")
        return self._conn

    def _sql(self, statement: str) -> str:
        return render(statement.format_map(_SCALARS[self.dialect]), self.dialect)

    def _insert(self, db: Connection, statement: str, params: Sequence[Any]) -> int:
        """Run an ``INSERT ... RETURNING id``; the new row's id."""
        return int(db.execute(self._sql(statement), params).fetchone()[0])

    def _lock_identity(self) -> None:
        if self._barrier is not None:
            self._barrier()

    def _check_clip(self, what: str, video_id: str, clip_index: int) -> None:
        if (video_id, clip_index) != (self.clip.video_id, self.clip.index):
            raise IntegrityError(
                f"{what} of clip {clip_index} of {video_id!r} given to the writer of clip "
                f"{self.clip.index} of {self.clip.video_id!r}",
                hint="open store.clip(...) for the clip the row belongs to",
            )

    # memories -------------------------------------------------------------
    def add_memory(self, memory: Memory) -> int:
        """Store ``memory`` (of this clip, with its embedding) and its entity edges; its new id."""
        db = self._db()
        self._check_clip("a memory", memory.video_id, memory.clip_index)
        embedding = self.rows.vector_to_db(self._memory_embedding(memory))
        last_clip = memory.last_clip_index if memory.last_clip_index is not None else memory.clip_index
        memory_id = self._insert(db, INSERT_MEMORY, (
            memory.kind.value, memory.text, memory.video_id, memory.clip_index, memory.start_s, memory.end_s,
            memory.weight, memory.confidence, memory.provenance, last_clip, embedding, utc_now()))
        self._link(db, memory_id, memory.entity_ids)
        return memory_id

    def _memory_embedding(self, memory: Memory) -> Vector:
        if memory.embedding is None:
            raise IntegrityError("a memory needs its text embedding", hint="embed the text before storing it")
        vector = normalized(memory.embedding)
        dim = self._memory_dim
        if dim is None:
            raise IntegrityError(
                "the store has no embedding model recorded", hint="call store.set_embedding_model(name, dim)"
            )
        if len(vector) != dim:
            raise IntegrityError(f"memory embedding has {len(vector)} dimensions, the store uses {dim}")
        return vector

    def _link(self, db: Connection, memory_id: int, entity_ids: Sequence[int]) -> None:
        unique = sorted(set(entity_ids))
        if not unique:
            return
        listed, params = self.rows.one_of("id", unique)
        known = {r[0] for r in db.execute(self._sql(f"SELECT id FROM entities WHERE {listed}"), params)}
        missing = [e for e in unique if e not in known]
        if missing:
            raise IntegrityError(f"memory names unknown entities {missing}", hint="create the entities first")
        execute_many(db, self._sql(INSERT_EDGE), [(e, memory_id) for e in unique])

    def reinforce(self, memory_id: int, delta: float = 1.0) -> None:
        """Add ``delta`` to the memory's weight and mark it confirmed by this clip."""
        cursor = self._db().execute(self._sql(REINFORCE), (delta, self.clip.video_id, self.clip.index, memory_id))
        if cursor.rowcount == 0:
            raise NotFoundError(f"no memory {memory_id}")

    def weaken(self, memory_id: int, amount: float, floor: float = 0.1) -> None:
        """Take ``amount`` off the memory's weight, never below ``floor`` (nor raising it)."""
        cursor = self._db().execute(self._sql(WEAKEN), (floor, amount, memory_id))
        if cursor.rowcount == 0:
            raise NotFoundError(f"no memory {memory_id}")

    # entities -------------------------------------------------------------
    def add_entity(self, kind: EntityKind, embeddings: Sequence[Vector], name: str = "") -> Entity:
        """A new entity first seen in this clip, with its own character and exemplar bank."""
        db = self._db()
        kind = EntityKind(kind)
        self._lock_identity()
        entity_id = self._insert(db, INSERT_ENTITY,
                                 (kind.value, name, self.clip.video_id, self.clip.index, self.clip.index, utc_now()))
        db.execute(self._sql("INSERT INTO characters (entity_id) VALUES (?)"), (entity_id,))
        self.rows.write_bank(db, entity_id, embeddings)
        return Entity(id=entity_id, kind=kind, name=name, first_clip=self.clip.index, last_clip=self.clip.index,
                      video_id=self.clip.video_id)

    def update_entity_bank(self, entity_id: int, embeddings: Sequence[Vector]) -> None:
        """Replace the entity's exemplar bank with ``embeddings``."""
        db = self._db()
        self.rows.require_entity(db, entity_id)
        db.execute(self._sql("DELETE FROM entity_embeddings WHERE entity_id = ?"), (entity_id,))
        self.rows.write_bank(db, entity_id, embeddings)

    def _touch_entity(self, db: Connection, entity_id: int | None, kind: EntityKind) -> None:
        if entity_id is None:
            return
        found = self.rows.require_entity(db, entity_id)
        if found != kind.value:
            raise IntegrityError(f"entity {entity_id} is a {found}, not a {kind.value}")
        db.execute(self._sql(SEEN_IN_CLIP), (self.clip.index, entity_id, self.clip.video_id, self.clip.index))

    # observations ---------------------------------------------------------
    def add_face(self, face: FaceObservation) -> int:
        """Store a face seen in this clip (its crop as a blob); its new id."""
        db = self._db()
        self._check_clip("a face", self.clip.video_id, face.clip_index)
        self._touch_entity(db, face.entity_id, EntityKind.FACE)
        crop = self._store_blob(db, "face_crop", face.crop_jpeg)
        b = face.bbox
        return self._insert(db, INSERT_FACE, (
            self.clip.video_id, face.clip_index, face.time_s, b.x1, b.y1, b.x2, b.y2, face.det_score, face.quality,
            face.track, _optional_blob(face.embedding), crop, face.entity_id, face.mouth_motion))

    def add_voice(self, segment: VoiceSegment, audio_wav: bytes | None = None) -> int:
        """Store a voice segment heard in this clip (its audio as a blob); its new id."""
        db = self._db()
        self._check_clip("a voice segment", self.clip.video_id, segment.clip_index)
        self._touch_entity(db, segment.entity_id, EntityKind.VOICE)
        audio = self._store_blob(db, "voice_wav", audio_wav)
        return self._insert(db, INSERT_VOICE, (
            self.clip.video_id, segment.clip_index, segment.start_s, segment.end_s, segment.text, segment.speaker,
            segment.language, words_json(segment.words), _optional_blob(segment.embedding), audio,
            segment.entity_id))

    # measured descriptions ---------------------------------------------------
    def add_attribute(self, attribute: EntityAttribute) -> int:
        """Store a measured description of an entity of this clip (a second one of the same entity and name in
        this clip replaces the first); its new id. :class:`IntegrityError` for an unknown entity, a confidence
        outside [0, 1], a negative weight or an empty name or value."""
        db = self._db()
        self._check_clip("an attribute", attribute.video_id, attribute.clip_index)
        self.rows.require_entity(db, attribute.entity_id)
        check_measure(f"attribute {attribute.name!r}", attribute.confidence, attribute.weight)
        if not attribute.name.strip() or not attribute.value.strip():
            raise IntegrityError(f"an attribute needs a name and a value, got {attribute.name!r}={attribute.value!r}")
        key = (attribute.entity_id, attribute.video_id, attribute.clip_index, attribute.name)
        db.execute(self._sql(DELETE_ATTRIBUTE), key)
        return self._insert(db, INSERT_ATTRIBUTE, (*key, attribute.value, attribute.confidence, attribute.weight,
                                                   attribute.evidence))

    def add_shot(self, shot: ShotRecord) -> None:
        """Store a shot of this clip with its kind (a shot starting where a stored one starts replaces it).
        :class:`IntegrityError` for a kind not in :data:`SHOT_KINDS`, a confidence outside [0, 1] or an end
        before the start."""
        db = self._db()
        self._check_clip("a shot", shot.video_id, shot.clip_index)
        check_measure("a shot's kind", shot.confidence, 0.0)
        if shot.kind not in SHOT_KINDS or shot.end_s < shot.start_s:
            raise IntegrityError(f"a shot needs a kind of {SHOT_KINDS} and an end after its start, got {shot}")
        db.execute(self._sql(UPSERT_SHOT), (shot.video_id, shot.clip_index, shot.start_s, shot.end_s, int(shot.cut),
                                             shot.kind, shot.confidence, shot.motion, shot.evidence))

    def _store_blob(self, db: Connection, kind: str, data: bytes | None) -> int | None:
        if data is None:
            return None
        return self._insert(db, "INSERT INTO blobs (kind, data) VALUES (?, ?) RETURNING id", (kind, data))

    # identity evidence and timings ------------------------------------------
    def set_link(self, link: FaceVoiceLink) -> None:
        """Store a face-voice link seen in this clip, after :func:`check_link`."""
        db = self._db()
        check_link(link, lambda entity_id: self.rows.require_entity(db, entity_id))
        dialect.insert_link(db, self.dialect, link, self.clip.video_id, self.clip.index)

    def merge_entities(self, keep: int, absorb: int, evidence: str) -> int:
        """Fold ``absorb`` into ``keep`` (automatic, for the reason in ``evidence``), recorded with this
        clip so it can be undone; returns the record id."""
        db = self._db()
        self._lock_identity()
        return merge_log.merge_recorded(self.merges, db, keep, absorb, source="auto", evidence=evidence,
                                        video_id=self.clip.video_id, clip_index=self.clip.index)

    def record_timing(self, stage: str, seconds: float) -> None:
        """Seconds ``stage`` took on this clip (a rerun's timing replaces the old one)."""
        dialect.record_timing(self._db(), self.dialect, self.clip, stage, seconds)


class SQLConsolidationWriter(SQLClipWriter):
    """A clip writer inside ``store.consolidation``, that also records the sources of facts and what it
    changed in existing memories (taken back by ``forget_consolidation``)."""

    def __init__(self, conn: Connection, clip: Clip, memory_dim: int | None,
                 barrier: Callable[[], None] | None = None) -> None:
        super().__init__(conn, clip, memory_dim, barrier)
        self.notes: list[str] = []
        self.seconds: float | None = None

    def add_sources(self, memory_id: int, source_ids: Sequence[int]) -> None:
        """Record that fact ``memory_id`` rests on the episodic memories ``source_ids``."""
        dialect.add_sources(self._db(), self.dialect, self.clip, memory_id, source_ids)

    def reinforce(self, memory_id: int, delta: float = 1.0) -> None:
        """As :meth:`SQLClipWriter.reinforce`, recorded as a change of this consolidation."""
        with dialect.recorded_change(self._db(), self.dialect, self.clip, memory_id):
            super().reinforce(memory_id, delta)

    def weaken(self, memory_id: int, amount: float, floor: float = 0.1) -> None:
        """As :meth:`SQLClipWriter.weaken`, recorded as a change of this consolidation."""
        with dialect.recorded_change(self._db(), self.dialect, self.clip, memory_id):
            super().weaken(memory_id, amount, floor)


def _optional_blob(vector: Vector | None) -> bytes | None:
    """A face or voice embedding as stored on both backends (a float32 blob)."""
    return None if vector is None else to_blob(vector)


def check_link(link: FaceVoiceLink, kind_of: Callable[[int], str]) -> None:
    """Refuse a link whose confidence is outside [0, 1] or whose ids do not have their roles.

    ``kind_of(entity_id)`` is the stored kind (raising NotFoundError for an unknown id); both
    backends' writers use it, so both enforce one rule.
    """
    if not 0.0 <= link.confidence <= 1.0:
        raise IntegrityError(f"link confidence must be in [0, 1], got {link.confidence}")
    for entity_id, role in ((link.face_id, EntityKind.FACE), (link.voice_id, EntityKind.VOICE)):
        if kind_of(entity_id) != role.value:
            raise IntegrityError(
                f"entity {entity_id} is not a {role.value}: a link joins face_id (a face) and voice_id (a voice)",
                hint="pass the face entity as face_id and the voice entity as voice_id",
            )


def check_measure(what: str, confidence: float, weight: float) -> None:
    """Refuse a confidence outside [0, 1] or a negative (or not finite) weight."""
    if not 0.0 <= confidence <= 1.0:
        raise IntegrityError(f"{what}: confidence must be in [0, 1], got {confidence}")
    if not 0.0 <= weight < float("inf"):
        raise IntegrityError(f"{what}: weight must be a finite number >= 0, got {weight}")


def check_unit(clips: Sequence[Clip]) -> Clip:
    """The last of the clips of one consolidation: at least one, of one video, in increasing index order."""
    if not clips:
        raise IntegrityError("a consolidation needs at least one clip")
    if len({c.video_id for c in clips}) != 1 or any(a.index >= b.index for a, b in itertools.pairwise(clips)):
        raise IntegrityError("the clips of one consolidation belong to one video, in increasing index order")
    return clips[-1]
