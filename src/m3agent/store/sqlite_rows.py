"""SQL fragments and row <-> domain conversions of the SQLite store, and the entity lookups its writer and its
identity corrections (:mod:`~m3agent.store.sqlite_entities`) share (here, so neither imports the other)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent.domain import (
    BBox,
    Entity,
    EntityKind,
    FaceObservation,
    Memory,
    MemoryKind,
    SearchFilter,
    Video,
    VoiceSegment,
    Word,
)
from m3agent.errors import NotFoundError
from m3agent.store.vectors import from_blob, to_blob

if TYPE_CHECKING:
    from m3agent.domain import Vector

MEMORY_COLUMNS = (
    "m.id, m.kind, m.text, m.video_id, m.clip_index, m.start_s, m.end_s, m.weight, m.confidence, "
    "m.provenance, m.last_clip_index, m.embedding, "
    "(SELECT group_concat(e.entity_id) FROM edges e WHERE e.memory_id = m.id) AS entity_list"
)
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


def placeholders(count: int) -> str:
    return ", ".join("?" * count)


def filter_sql(flt: SearchFilter | None, alias: str = "m") -> tuple[str, list[Any]]:
    """A WHERE condition (never empty) and its parameters for memories aliased ``alias``."""
    if flt is None:
        return "1", []
    parts: list[str] = []
    params: list[Any] = []
    if flt.video_ids is not None:
        parts.append(f"{alias}.video_id IN ({placeholders(len(flt.video_ids))})" if flt.video_ids else "0")
        params.extend(flt.video_ids)
    if flt.before_clip is not None:
        parts.append(f"{alias}.clip_index <= ?")
        params.append(flt.before_clip)
    if flt.start_s is not None:
        parts.append(f"{alias}.end_s >= ?")
        params.append(flt.start_s)
    if flt.end_s is not None:
        parts.append(f"{alias}.start_s <= ?")
        params.append(flt.end_s)
    if flt.kinds is not None:
        parts.append(f"{alias}.kind IN ({placeholders(len(flt.kinds))})" if flt.kinds else "0")
        params.extend(MemoryKind(k).value for k in flt.kinds)
    if flt.entity_ids is not None:
        inner = placeholders(len(flt.entity_ids))
        parts.append(f"{alias}.id IN (SELECT memory_id FROM edges WHERE entity_id IN ({inner}))" if inner else "0")
        params.extend(flt.entity_ids)
    if flt.exclude_clips:
        pairs = sorted(flt.exclude_clips)
        values = ", ".join("(?, ?)" for _ in pairs)
        parts.append(f"({alias}.video_id, {alias}.clip_index) NOT IN (VALUES {values})")
        params.extend(x for pair in pairs for x in pair)
    return " AND ".join(parts) or "1", params


_FTS_TOKEN = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str) -> str:
    """A safe FTS5 MATCH expression for free user text: its words as quoted terms joined by OR.

    Operators (AND, OR, NOT, NEAR), quotes, ``*``, ``-`` and ``:`` lose their
    meaning; an empty string means "no searchable words".
    """
    terms = dict.fromkeys(t.lower() for t in _FTS_TOKEN.findall(text))
    return " OR ".join(f'"{t}"' for t in terms)


def memory_from_row(row: Sequence[Any], with_embedding: bool = True) -> Memory:
    entity_list = row[12]
    entity_ids = tuple(sorted(int(x) for x in entity_list.split(","))) if entity_list else ()
    return Memory(
        kind=MemoryKind(row[1]),
        text=row[2],
        video_id=row[3],
        clip_index=row[4],
        start_s=row[5],
        end_s=row[6],
        entity_ids=entity_ids,
        weight=row[7],
        confidence=row[8],
        provenance=row[9],
        id=row[0],
        last_clip_index=row[10],
        embedding=from_blob(row[11]) if with_embedding else None,
    )


def face_from_row(row: Sequence[Any]) -> FaceObservation:
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
    return json.dumps(
        [{"text": w.text, "start_s": w.start_s, "end_s": w.end_s, "probability": w.probability} for w in words]
    )


def entity_from_row(row: Sequence[Any]) -> Entity:
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
    return Video(video_id=row[0], source=row[1], duration_s=row[2], title=row[3], metadata=json.loads(row[4]))


def require_entity(db: sqlite3.Connection, entity_id: int) -> str:
    """The kind of entity ``entity_id``; :class:`NotFoundError` when it does not exist."""
    row = db.execute("SELECT kind FROM entities WHERE id = ?", (entity_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no entity {entity_id}")
    return str(row[0])


def write_bank(db: sqlite3.Connection, entity_id: int, embeddings: Sequence[Vector]) -> None:
    """Append ``embeddings`` to the entity's bank after its current exemplars."""
    start = db.execute(
        "SELECT coalesce(max(ord) + 1, 0) FROM entity_embeddings WHERE entity_id = ?", (entity_id,)
    ).fetchone()[0]
    db.executemany(
        "INSERT INTO entity_embeddings (entity_id, ord, vector) VALUES (?, ?, ?)",
        [(entity_id, start + i, to_blob(v)) for i, v in enumerate(embeddings)],
    )
