"""Row <-> domain conversions and SQL fragments of both SQL stores, written once.

What cannot be written once is chosen by a :class:`SQLRows`'s dialect: how a memory row lists its
entity ids (``group_concat`` text on SQLite, an ``ARRAY`` on PostgreSQL), how a memory or bank
vector is stored (a float32 blob, a pgvector ``vector``) and how a filter tests "one of" (an ``IN``
list, ``= ANY`` of one array). :data:`ROWS` holds one per dialect; the backend modules
(:mod:`~m3agent.store.sqlite.rows`, :mod:`~m3agent.store.postgres.rows`) bind theirs. The entity look-ups
the writers and the identity corrections share live here too, so neither imports the other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.domain import (
    BBox,
    Entity,
    EntityAttribute,
    EntityKind,
    FaceObservation,
    Memory,
    MemoryKind,
    SearchFilter,
    ShotRecord,
    Video,
    VoiceSegment,
    Word,
)
from m3agent.errors import NotFoundError
from m3agent.store.index.vectors import from_blob, to_blob
from m3agent.store.sql.dialect import Connection, Dialect, execute_many, marks, render

if TYPE_CHECKING:
    import sqlite3

    from m3agent.domain import Vector

_MEMORY_FIELDS = (
    "m.id, m.kind, m.text, m.video_id, m.clip_index, m.start_s, m.end_s, m.weight, m.confidence, "
    "m.provenance, m.last_clip_index, m.embedding, "
)
_ENTITY_LISTS = {  # the memory's entity ids, the last column of a memory row
    Dialect.SQLITE: "(SELECT group_concat(e.entity_id) FROM edges e WHERE e.memory_id = m.id) AS entity_list",
    Dialect.POSTGRES: "ARRAY(SELECT e.entity_id FROM edges e WHERE e.memory_id = m.id ORDER BY e.entity_id)",
}
_CONTAINS = {  # the text of memory ``m`` contains the parameter (case-sensitive, as Python's ``in``)
    Dialect.SQLITE: "instr(m.text, ?) > 0",
    Dialect.POSTGRES: "strpos(m.text, ?) > 0",
}
FACE_COLUMNS = (
    "f.id, f.clip_index, f.time_s, f.x1, f.y1, f.x2, f.y2, f.det_score, f.quality, f.track, "
    "f.embedding, b.data, f.entity_id, f.mouth_motion"
)
VOICE_COLUMNS = (
    "v.id, v.clip_index, v.start_s, v.end_s, v.text, v.speaker, v.embedding, v.words, v.entity_id, v.language"
)
ENTITY_COLUMNS = (
    "n.id, n.kind, n.name, n.first_clip, n.last_clip, n.video_id, "
    "(SELECT count(*) FROM faces f WHERE f.entity_id = n.id)"
    " + (SELECT count(*) FROM voices v WHERE v.entity_id = n.id)"
)
ATTRIBUTE_COLUMNS = "id, entity_id, video_id, clip_index, name, value, confidence, weight, evidence"
SHOT_COLUMNS = "video_id, clip_index, start_s, end_s, cut, kind, confidence, motion, evidence"
NEXT_ORD = "SELECT coalesce(max(ord) + 1, 0) FROM entity_embeddings WHERE entity_id = ?"
INSERT_EXEMPLAR = "INSERT INTO entity_embeddings (entity_id, ord, vector) VALUES (?, ?, ?)"


def placeholders(count: int) -> str:
    """``count`` comma-separated ``?`` placeholders (SQLite's style; render them for PostgreSQL)."""
    return marks(count)


def as_array(value: Any) -> Vector:
    """A ``vector`` column value (pgvector's ``Vector``) or any 1-d sequence as a float32 numpy array."""
    import numpy as np

    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype=np.float32).reshape(-1)


@dataclass(frozen=True, slots=True)
class SQLRows:
    """The rows of one dialect: memory columns and converter, vector codec, filters, entity banks."""

    dialect: Dialect

    @property
    def memory_columns(self) -> str:
        """The SELECT list of a memory row (table aliased ``m``), read by :meth:`memory_from_row`."""
        return _MEMORY_FIELDS + _ENTITY_LISTS[self.dialect]

    def text_contains_any(self, count: int) -> str:
        """A condition (``?`` placeholders) that memory ``m``'s text contains one of ``count`` parameters."""
        return "(" + " OR ".join([_CONTAINS[self.dialect]] * count) + ")"

    def vector_to_db(self, vector: Vector) -> Any:
        """``vector`` as the memory and bank vector columns store it."""
        return to_blob(vector) if self.dialect is Dialect.SQLITE else as_array(vector)

    def vector_from_db(self, value: Any) -> Vector:
        """A memory or bank vector column value as a float32 numpy array."""
        return from_blob(value) if self.dialect is Dialect.SQLITE else as_array(value)

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``, with ``?`` placeholders: an ``IN`` list on SQLite, one array
        parameter (``= ANY``, planned once whatever the count) on PostgreSQL; ``FALSE`` for no values."""
        if not values:
            return "FALSE", []
        if self.dialect is Dialect.POSTGRES:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({marks(len(values))})", list(values)

    def filter_sql(self, flt: SearchFilter | None, alias: str = "m", *, probe: bool = False) -> tuple[str, list[Any]]:
        """A WHERE condition (never empty) in this dialect's parameter style, and its parameters, for
        memories aliased ``alias``. ``probe``: the rows are few and chosen already (by id), so entity links
        are looked up per row rather than listed for the whole filter (the same rows pass)."""
        if flt is None:
            return "TRUE", []
        parts = [_range(f"{alias}.clip_index <= ?", flt.before_clip), _range(f"{alias}.end_s >= ?", flt.start_s),
                 _range(f"{alias}.start_s <= ?", flt.end_s)]
        if flt.video_ids is not None:
            parts.insert(0, self.one_of(f"{alias}.video_id", flt.video_ids))
        if flt.kinds is not None:
            parts.append(self.one_of(f"{alias}.kind", [MemoryKind(k).value for k in flt.kinds]))
        if flt.entity_ids is not None:
            named, ids = self.one_of("entity_id", flt.entity_ids)
            if probe:
                parts.append((f"EXISTS (SELECT 1 FROM edges x WHERE x.memory_id = {alias}.id AND x.{named})", ids))
            else:
                parts.append((f"{alias}.id IN (SELECT memory_id FROM edges WHERE {named})", ids))
        if flt.exclude_clips:
            pairs = sorted(flt.exclude_clips)
            values = ", ".join("(?, ?)" for _ in pairs)
            parts.append((f"({alias}.video_id, {alias}.clip_index) NOT IN (VALUES {values})",
                          [x for pair in pairs for x in pair]))
        where = " AND ".join(sql for sql, _ in parts if sql) or "TRUE"
        return render(where, self.dialect), [p for _, params in parts for p in params]

    def memory_from_row(self, row: Sequence[Any], with_embedding: bool = True) -> Memory:
        """A :class:`Memory` from a :attr:`memory_columns` row (the embedding left out unless ``with_embedding``)."""
        listed = row[12] or ()
        ids = listed.split(",") if isinstance(listed, str) else listed  # group_concat text or an array
        return Memory(
            kind=MemoryKind(row[1]),
            text=row[2],
            video_id=row[3],
            clip_index=row[4],
            start_s=row[5],
            end_s=row[6],
            entity_ids=tuple(sorted(int(x) for x in ids)),
            weight=row[7],
            confidence=row[8],
            provenance=row[9],
            id=row[0],
            last_clip_index=row[10],
            embedding=self.vector_from_db(row[11]) if with_embedding else None,
        )

    def require_entity(self, db: Connection, entity_id: int) -> str:
        """The kind of entity ``entity_id``; :class:`NotFoundError` when it does not exist."""
        row = db.execute(render("SELECT kind FROM entities WHERE id = ?", self.dialect), (entity_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no entity {entity_id}")
        return str(row[0])

    def write_bank(self, db: Connection, entity_id: int, embeddings: Sequence[Vector]) -> None:
        """Append ``embeddings`` to the entity's bank after its current exemplars."""
        if not len(embeddings):
            return
        start = int(db.execute(render(NEXT_ORD, self.dialect), (entity_id,)).fetchone()[0])
        execute_many(db, render(INSERT_EXEMPLAR, self.dialect),
                     [(entity_id, start + i, self.vector_to_db(v)) for i, v in enumerate(embeddings)])


SQLITE_ROWS = SQLRows(Dialect.SQLITE)
PG_ROWS = SQLRows(Dialect.POSTGRES)
ROWS = {Dialect.SQLITE: SQLITE_ROWS, Dialect.POSTGRES: PG_ROWS}


def _range(condition: str, bound: float | int | None) -> tuple[str, list[Any]]:
    """``condition`` on its one parameter ``bound``, or nothing (an empty part) when there is no bound."""
    return ("", []) if bound is None else (condition, [bound])


def face_from_row(row: Sequence[Any]) -> FaceObservation:
    """A :class:`FaceObservation` from a :data:`FACE_COLUMNS` row (embeddings are blobs on both stores)."""
    return FaceObservation(
        clip_index=row[1],
        time_s=row[2],
        bbox=BBox(row[3], row[4], row[5], row[6]),
        det_score=row[7],
        quality=row[8],
        track=row[9],
        embedding=from_blob(row[10]) if row[10] is not None else None,
        crop_jpeg=bytes(row[11]) if row[11] is not None else None,
        entity_id=row[12],
        id=row[0],
        mouth_motion=row[13],
    )


def voice_from_row(row: Sequence[Any]) -> VoiceSegment:
    """A :class:`VoiceSegment` from a :data:`VOICE_COLUMNS` row (words stored as JSON text)."""
    words = tuple(Word(**w) for w in json.loads(row[7]))
    return VoiceSegment(
        clip_index=row[1],
        start_s=row[2],
        end_s=row[3],
        text=row[4],
        speaker=row[5],
        embedding=from_blob(row[6]) if row[6] is not None else None,
        words=words,
        entity_id=row[8],
        language=row[9],
        id=row[0],
    )


def words_json(words: Sequence[Word]) -> str:
    """The JSON text a voice row stores its words as (read back by :func:`voice_from_row`)."""
    return json.dumps(
        [{"text": w.text, "start_s": w.start_s, "end_s": w.end_s, "probability": w.probability} for w in words]
    )


def entity_from_row(row: Sequence[Any]) -> Entity:
    """An :class:`Entity` from an :data:`ENTITY_COLUMNS` row."""
    return Entity(
        id=row[0],
        kind=EntityKind(row[1]),
        name=row[2],
        first_clip=row[3],
        last_clip=row[4],
        video_id=row[5],
        n_observations=row[6],
    )


def video_from_row(row: sqlite3.Row | Sequence[Any]) -> Video:
    """A :class:`Video` from a ``video_id, source, duration_s, title, metadata, fingerprint`` row."""
    return Video(video_id=row[0], source=row[1], duration_s=row[2], title=row[3], metadata=json.loads(row[4]),
                 fingerprint=row[5])


def attribute_from_row(row: Sequence[Any]) -> EntityAttribute:
    """An :class:`EntityAttribute` from an :data:`ATTRIBUTE_COLUMNS` row."""
    return EntityAttribute(entity_id=int(row[1]), video_id=row[2], clip_index=int(row[3]), name=row[4], value=row[5],
                           confidence=float(row[6]), weight=float(row[7]), evidence=row[8], id=int(row[0]))


def shot_from_row(row: Sequence[Any]) -> ShotRecord:
    """A :class:`ShotRecord` from a :data:`SHOT_COLUMNS` row (``cut`` stored as 0/1 on both stores)."""
    return ShotRecord(video_id=row[0], clip_index=int(row[1]), start_s=float(row[2]), end_s=float(row[3]),
                      cut=bool(row[4]), kind=row[5], confidence=float(row[6]),
                      motion=None if row[7] is None else float(row[7]), evidence=row[8])
