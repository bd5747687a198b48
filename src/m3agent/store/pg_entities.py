"""Identity corrections on PostgreSQL: merge, split and delete entities, delete memories.

The same rules as :mod:`m3agent.store.sqlite_entities` (read its docstring for
what each deletion removes), written in PostgreSQL's dialect; the text rules
("someone", link lines) are shared through :mod:`m3agent.store.dialect`. Each function
runs inside a transaction opened by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.domain import EntityKind
from m3agent.errors import IntegrityError
from m3agent.store import dialect, merge_log
from m3agent.store.pg_rows import as_array, require_entity, write_bank
from m3agent.store.sqlite_schema import utc_now
from m3agent.store.vectors import from_blob

if TYPE_CHECKING:
    import psycopg

    Conn = psycopg.Connection[Any]


def _read_bank(db: Conn, entity_id: int) -> list[merge_log.Vector]:
    rows = db.execute("SELECT vector FROM entity_embeddings WHERE entity_id = %s ORDER BY ord", (entity_id,))
    return [as_array(r[0]) for r in rows]


def merge_entities(db: Conn, keep: int, absorb: int) -> None:
    """Fold ``absorb`` into ``keep`` and delete ``absorb``."""
    if keep == absorb:
        raise IntegrityError(f"cannot merge entity {keep} with itself")
    kind = require_entity(db, keep)
    if require_entity(db, absorb) != kind:
        raise IntegrityError(f"cannot merge a {require_entity(db, absorb)} entity into a {kind} entity")
    _rewrite_tags(db, keep, kind, absorb)
    db.execute("INSERT INTO edges (entity_id, memory_id, weight) SELECT %s, memory_id, weight FROM edges"
               " WHERE entity_id = %s ON CONFLICT (entity_id, memory_id) DO UPDATE SET"
               " weight = edges.weight + excluded.weight", (keep, absorb))
    db.execute("DELETE FROM edges WHERE entity_id = %s", (absorb,))
    for table in ("faces", "voices"):
        db.execute(f"UPDATE {table} SET entity_id = %s WHERE entity_id = %s", (keep, absorb))
    bank = [as_array(r[0]) for r in db.execute("SELECT vector FROM entity_embeddings WHERE entity_id = %s ORDER BY ord",
                                     (absorb,))]
    write_bank(db, keep, bank)
    for role in ("face_id", "voice_id"):
        db.execute(f"UPDATE links SET {role} = %s WHERE {role} = %s", (keep, absorb))
    db.execute(
        "UPDATE entities k SET name = CASE WHEN k.name = '' THEN a.name ELSE k.name END,"
        " first_clip = CASE WHEN k.video_id IS NOT DISTINCT FROM a.video_id THEN least(k.first_clip, a.first_clip)"
        "   ELSE k.first_clip END,"
        " last_clip = CASE WHEN k.video_id IS NOT DISTINCT FROM a.video_id THEN greatest(k.last_clip, a.last_clip)"
        "   ELSE k.last_clip END"
        " FROM entities a WHERE k.id = %s AND a.id = %s", (keep, absorb))
    _keep_smaller_character(db, keep, absorb)
    db.execute("DELETE FROM entities WHERE id = %s", (absorb,))


DIALECT = merge_log.Dialect("%s", _read_bank, write_bank, merge_entities)


def _rewrite_tags(db: Conn, keep: int, kind: str, absorb: int) -> None:
    def swap(tag: tags.Tag) -> tags.Token | None:
        if tag.kind in tags.ENTITY_KINDS and tag.id == absorb:
            return tags.Tag(tags.TagKind(kind), keep)
        return None

    rows = db.execute("SELECT m.id, m.text FROM memories m JOIN edges e ON e.memory_id = m.id"
                      " WHERE e.entity_id = %s", (absorb,)).fetchall()
    for memory_id, text in rows:
        new_text = tags.rewrite(text, swap)
        if new_text != text:
            db.execute("UPDATE memories SET text = %s WHERE id = %s", (new_text, memory_id))


def _keep_smaller_character(db: Conn, keep: int, absorb: int) -> None:
    """The survivor owns the smaller of the two base character ids."""
    ids = dict(db.execute("SELECT entity_id, id FROM characters WHERE entity_id IN (%s, %s)", (keep, absorb)))
    if absorb in ids and (keep not in ids or ids[absorb] < ids[keep]):
        db.execute("DELETE FROM characters WHERE entity_id = %s", (keep,))
        db.execute("UPDATE characters SET entity_id = %s WHERE entity_id = %s", (keep, absorb))


def split_entity(db: Conn, entity_id: int, observation_ids: Sequence[int]) -> int:
    """Move observations of ``entity_id`` (face or voice row ids) to a new entity; returns its id."""
    kind = EntityKind(require_entity(db, entity_id))
    table = "faces" if kind is EntityKind.FACE else "voices"
    wanted = sorted(set(observation_ids))
    if not wanted:
        raise IntegrityError("split_entity needs at least one observation id")
    rows = db.execute(f"SELECT id, video_id, clip_index, embedding FROM {table} WHERE entity_id = %s"
                      " AND id = ANY(%s) ORDER BY video_id, clip_index, id", (entity_id, wanted)).fetchall()
    if len(rows) != len(wanted):
        found = {r[0] for r in rows}
        raise IntegrityError(f"observations {[i for i in wanted if i not in found]} are not {table} of "
                             f"entity {entity_id}")
    video_id = rows[0][1]
    clips = [r[2] for r in rows if r[1] == video_id]
    row = db.execute("INSERT INTO entities (kind, name, video_id, first_clip, last_clip, created_at)"
                     " VALUES (%s, '', %s, %s, %s, %s) RETURNING id",
                     (kind.value, video_id, min(clips), max(clips), utc_now())).fetchone()
    assert row is not None
    new_id = int(row[0])
    db.execute("INSERT INTO characters (entity_id) VALUES (%s)", (new_id,))
    db.execute(f"UPDATE {table} SET entity_id = %s WHERE id = ANY(%s)", (new_id, wanted))
    moved = [from_blob(bytes(r[3])) for r in rows if r[3] is not None]
    for vector in moved:  # exemplars equal to a moved observation's embedding go with it
        db.execute("DELETE FROM entity_embeddings WHERE entity_id = %s AND vector = %s", (entity_id, vector))
    write_bank(db, new_id, moved)
    return new_id


def delete_entity(db: Conn, entity_id: int) -> None:
    """Remove the entity and what memory text says about it; observations, bank, edges and links cascade."""
    require_entity(db, entity_id)
    for memory_id, text, others in _memories_naming(db, entity_id):
        if not others or dialect.is_link_line(text):
            db.execute("DELETE FROM memories WHERE id = %s", (memory_id,))
        else:
            db.execute("UPDATE memories SET text = %s WHERE id = %s", (dialect.unnamed(text, entity_id), memory_id))
    db.execute("DELETE FROM entities WHERE id = %s", (entity_id,))
    merge_log.prune(DIALECT, db)


def _memories_naming(db: Conn, entity_id: int) -> list[tuple[int, str, set[int]]]:
    """(id, text, other entities named) of every memory linked to ``entity_id`` or tagging it."""
    rows = db.execute(
        "SELECT id, text, ARRAY(SELECT e.entity_id FROM edges e WHERE e.memory_id = m.id) FROM memories m"
        " WHERE id IN (SELECT memory_id FROM edges WHERE entity_id = %s)"
        " OR keywords @@ to_tsquery('simple', %s)",
        (entity_id, f"face{entity_id} | voice{entity_id}"),
    ).fetchall()
    found = []
    for memory_id, text, linked in rows:
        named = {int(e) for e in linked} | set(tags.entity_ids(text))
        if entity_id in named:
            found.append((int(memory_id), str(text), named - {entity_id}))
    return found


def delete_memory(db: Conn, memory_id: int) -> None:
    """Remove the memory and the transcript of the voice segments it quotes."""
    dialect.delete_memory(db, dialect.Dialect.POSTGRES, memory_id)
    merge_log.prune(DIALECT, db)


def orphan_entities_of_video(db: Conn, video_id: str) -> list[int]:
    """Entities that belong to ``video_id`` only (see the SQLite twin)."""
    rows = db.execute(
        "SELECT n.id FROM entities n WHERE (n.video_id = %(v)s OR (n.video_id IS NULL AND ("
        "   EXISTS (SELECT 1 FROM faces f WHERE f.entity_id = n.id AND f.video_id = %(v)s)"
        "   OR EXISTS (SELECT 1 FROM voices s WHERE s.entity_id = n.id AND s.video_id = %(v)s)"
        "   OR EXISTS (SELECT 1 FROM edges e JOIN memories m ON m.id = e.memory_id"
        "              WHERE e.entity_id = n.id AND m.video_id = %(v)s))))"
        " AND NOT EXISTS (SELECT 1 FROM faces f WHERE f.entity_id = n.id AND f.video_id <> %(v)s)"
        " AND NOT EXISTS (SELECT 1 FROM voices s WHERE s.entity_id = n.id AND s.video_id <> %(v)s)"
        " AND NOT EXISTS (SELECT 1 FROM edges e JOIN memories m ON m.id = e.memory_id"
        "                 WHERE e.entity_id = n.id AND m.video_id <> %(v)s)",
        {"v": video_id},
    ).fetchall()
    return [int(r[0]) for r in rows]
