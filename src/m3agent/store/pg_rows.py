"""SQL fragments and row -> domain conversions of the PostgreSQL store (``%s`` parameters), and the entity
lookups its writer and its identity corrections (:mod:`~m3agent.store.pg_entities`) share (here, so neither
imports the other)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent.domain import Memory, MemoryKind, SearchFilter
from m3agent.errors import NotFoundError

if TYPE_CHECKING:
    import psycopg

    from m3agent.domain import Vector

    Conn = psycopg.Connection[Any]

MEMORY_COLUMNS = (
    "m.id, m.kind, m.text, m.video_id, m.clip_index, m.start_s, m.end_s, m.weight, m.confidence, "
    "m.provenance, m.last_clip_index, m.embedding, "
    "ARRAY(SELECT e.entity_id FROM edges e WHERE e.memory_id = m.id ORDER BY e.entity_id)"
)

def placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


def filter_sql(flt: SearchFilter | None, alias: str = "m") -> tuple[str, list[Any]]:
    """A WHERE condition (never empty) and its parameters for memories aliased ``alias``."""
    if flt is None:
        return "TRUE", []
    parts: list[str] = []
    params: list[Any] = []
    if flt.video_ids is not None:
        parts.append(f"{alias}.video_id = ANY(%s)")
        params.append(list(flt.video_ids))
    if flt.before_clip is not None:
        parts.append(f"{alias}.clip_index <= %s")
        params.append(flt.before_clip)
    if flt.start_s is not None:
        parts.append(f"{alias}.end_s >= %s")
        params.append(flt.start_s)
    if flt.end_s is not None:
        parts.append(f"{alias}.start_s <= %s")
        params.append(flt.end_s)
    if flt.kinds is not None:
        parts.append(f"{alias}.kind = ANY(%s)")
        params.append([MemoryKind(k).value for k in flt.kinds])
    if flt.entity_ids is not None:
        parts.append(f"{alias}.id IN (SELECT memory_id FROM edges WHERE entity_id = ANY(%s))")
        params.append(list(flt.entity_ids))
    if flt.exclude_clips:
        pairs = sorted(flt.exclude_clips)
        parts.append(f"({alias}.video_id, {alias}.clip_index) NOT IN (VALUES {', '.join(['(%s, %s)'] * len(pairs))})")
        params.extend(x for pair in pairs for x in pair)
    return " AND ".join(parts) or "TRUE", params


def as_array(value: Any) -> Vector:
    """A ``vector`` column value (pgvector's ``Vector``) as a float32 numpy array."""
    import numpy as np

    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype=np.float32).reshape(-1)


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A :class:`Memory` from a :data:`MEMORY_COLUMNS` row (vector column read as a numpy array)."""
    return Memory(
        kind=MemoryKind(row[1]),
        text=row[2],
        video_id=row[3],
        clip_index=row[4],
        start_s=row[5],
        end_s=row[6],
        entity_ids=tuple(int(e) for e in row[12]),
        weight=row[7],
        confidence=row[8],
        provenance=row[9],
        id=row[0],
        last_clip_index=row[10],
        embedding=as_array(row[11]),
    )


def require_entity(db: Conn, entity_id: int) -> str:
    """The kind of entity ``entity_id``; :class:`NotFoundError` when it does not exist."""
    row = db.execute("SELECT kind FROM entities WHERE id = %s", (entity_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no entity {entity_id}")
    return str(row[0])


def write_bank(db: Conn, entity_id: int, embeddings: Sequence[Vector]) -> None:
    """Append ``embeddings`` to the entity's bank after its current exemplars."""
    if not len(embeddings):
        return
    row = db.execute("SELECT coalesce(max(ord) + 1, 0) FROM entity_embeddings WHERE entity_id = %s",
                     (entity_id,)).fetchone()
    start = int(row[0]) if row else 0
    vectors = [as_array(v) for v in embeddings]
    with db.cursor() as cur:
        cur.executemany("INSERT INTO entity_embeddings (entity_id, ord, vector) VALUES (%s, %s, %s)",
                        [(entity_id, start + i, v) for i, v in enumerate(vectors)])
