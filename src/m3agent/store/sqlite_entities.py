"""Identity corrections on the SQLite store: merge, split and delete entities, delete memories.

Each function runs inside a transaction opened by the caller. Tags in memory
text are rewritten with :mod:`m3agent.tags` (token-exact), so merging entity
3 never touches ``<face_30>``.

What a deletion removes (derived text included, so nothing points at what is gone):

- an entity: its observations with their crops and snippets, its bank, edges,
  links and base character id; every memory that names (by edge or tag) no
  other entity, and every link bookkeeping line (``Equivalence: ...``) that
  names it; in the other memories its tag becomes "someone" (their text
  embedding is kept: a vector, no text).
- a memory: its edges and index entries, and the transcript (``voices.text``
  and ``voices.words``) of the voice segments it quotes; the segments keep
  their timing, speaker embedding and audio as identity evidence.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from m3agent import tags
from m3agent.domain import EntityKind
from m3agent.errors import IntegrityError
from m3agent.store import dialect, merge_log
from m3agent.store.sqlite_rows import placeholders, require_entity, write_bank
from m3agent.store.sqlite_schema import utc_now
from m3agent.store.vectors import from_blob


def _read_bank(db: sqlite3.Connection, entity_id: int) -> list[merge_log.Vector]:
    rows = db.execute("SELECT vector FROM entity_embeddings WHERE entity_id = ? ORDER BY ord", (entity_id,))
    return [from_blob(r[0]) for r in rows]


def merge_entities(db: sqlite3.Connection, keep: int, absorb: int) -> None:
    """Fold ``absorb`` into ``keep`` and delete ``absorb``."""
    if keep == absorb:
        raise IntegrityError(f"cannot merge entity {keep} with itself")
    kind = require_entity(db, keep)
    if require_entity(db, absorb) != kind:
        raise IntegrityError(f"cannot merge a {require_entity(db, absorb)} entity into a {kind} entity")
    _rewrite_tags(db, keep, kind, absorb)
    _move_edges(db, keep, absorb)
    for table in ("faces", "voices"):
        db.execute(f"UPDATE {table} SET entity_id = ? WHERE entity_id = ?", (keep, absorb))
    bank = [
        from_blob(r[0])
        for r in db.execute("SELECT vector FROM entity_embeddings WHERE entity_id = ? ORDER BY ord", (absorb,))
    ]
    write_bank(db, keep, bank)
    _move_links(db, keep, absorb)
    _merge_details(db, keep, absorb)
    _keep_smaller_character(db, keep, absorb)
    db.execute("DELETE FROM entities WHERE id = ?", (absorb,))


DIALECT = merge_log.Dialect("?", _read_bank, write_bank, merge_entities)


def _rewrite_tags(db: sqlite3.Connection, keep: int, kind: str, absorb: int) -> None:
    def swap(tag: tags.Tag) -> tags.Token | None:
        if tag.kind in tags.ENTITY_KINDS and tag.id == absorb:
            return tags.Tag(tags.TagKind(kind), keep)
        return None

    rows = db.execute(
        "SELECT m.id, m.text FROM memories m JOIN edges e ON e.memory_id = m.id WHERE e.entity_id = ?",
        (absorb,),
    ).fetchall()
    for memory_id, text in rows:
        new_text = tags.rewrite(text, swap)
        if new_text != text:
            db.execute("UPDATE memories SET text = ? WHERE id = ?", (new_text, memory_id))


def _move_edges(db: sqlite3.Connection, keep: int, absorb: int) -> None:
    db.execute(
        "INSERT INTO edges (entity_id, memory_id, weight) SELECT ?, memory_id, weight FROM edges"
        " WHERE entity_id = ? ON CONFLICT (entity_id, memory_id) DO UPDATE SET weight = weight + excluded.weight",
        (keep, absorb),
    )
    db.execute("DELETE FROM edges WHERE entity_id = ?", (absorb,))


def _move_links(db: sqlite3.Connection, keep: int, absorb: int) -> None:
    """Re-point links of ``absorb`` (same kind as ``keep``, so the same role) to ``keep``."""
    for role in ("face_id", "voice_id"):
        db.execute(f"UPDATE links SET {role} = ? WHERE {role} = ?", (keep, absorb))


def _merge_details(db: sqlite3.Connection, keep: int, absorb: int) -> None:
    db.execute(
        "UPDATE entities SET"
        " name = CASE WHEN name = '' THEN (SELECT name FROM entities WHERE id = :absorb) ELSE name END,"
        " first_clip = CASE WHEN video_id IS (SELECT video_id FROM entities WHERE id = :absorb)"
        "   THEN min(first_clip, (SELECT first_clip FROM entities WHERE id = :absorb)) ELSE first_clip END,"
        " last_clip = CASE WHEN video_id IS (SELECT video_id FROM entities WHERE id = :absorb)"
        "   THEN max(last_clip, (SELECT last_clip FROM entities WHERE id = :absorb)) ELSE last_clip END"
        " WHERE id = :keep",
        {"keep": keep, "absorb": absorb},
    )


def _keep_smaller_character(db: sqlite3.Connection, keep: int, absorb: int) -> None:
    """The survivor owns the smaller of the two base character ids."""
    ids = dict(db.execute("SELECT entity_id, id FROM characters WHERE entity_id IN (?, ?)", (keep, absorb)).fetchall())
    if absorb in ids and (keep not in ids or ids[absorb] < ids[keep]):
        db.execute("DELETE FROM characters WHERE entity_id = ?", (keep,))
        db.execute("UPDATE characters SET entity_id = ? WHERE entity_id = ?", (keep, absorb))


def split_entity(db: sqlite3.Connection, entity_id: int, observation_ids: Sequence[int]) -> int:
    """Move observations of ``entity_id`` (face or voice row ids) to a new entity; returns its id."""
    kind = EntityKind(require_entity(db, entity_id))
    table = "faces" if kind is EntityKind.FACE else "voices"
    wanted = sorted(set(observation_ids))
    if not wanted:
        raise IntegrityError("split_entity needs at least one observation id")
    rows = db.execute(
        f"SELECT id, video_id, clip_index, embedding FROM {table}"
        f" WHERE entity_id = ? AND id IN ({placeholders(len(wanted))}) ORDER BY video_id, clip_index, id",
        (entity_id, *wanted),
    ).fetchall()
    if len(rows) != len(wanted):
        found = {r[0] for r in rows}
        missing = [i for i in wanted if i not in found]
        raise IntegrityError(f"observations {missing} are not {table} of entity {entity_id}")
    new_id = _new_entity_like(db, kind, rows)
    db.execute(f"UPDATE {table} SET entity_id = ? WHERE id IN ({placeholders(len(wanted))})", (new_id, *wanted))
    moved = [bytes(r[3]) for r in rows if r[3] is not None]
    _split_bank(db, entity_id, new_id, moved)
    return new_id


def _new_entity_like(db: sqlite3.Connection, kind: EntityKind, rows: list[tuple[object, ...]]) -> int:
    video_id = rows[0][1]
    clips = [r[2] for r in rows if r[1] == video_id]
    cursor = db.execute(
        "INSERT INTO entities (kind, name, video_id, first_clip, last_clip, created_at) VALUES (?, '', ?, ?, ?, ?)",
        (kind.value, video_id, min(clips), max(clips), utc_now()),  # type: ignore[type-var]
    )
    new_id = int(cursor.lastrowid or 0)
    db.execute("INSERT INTO characters (entity_id) VALUES (?)", (new_id,))
    return new_id


def _split_bank(db: sqlite3.Connection, old: int, new: int, moved: list[bytes]) -> None:
    """Exemplars equal to a moved observation's embedding go with it to the new entity."""
    moved_set = set(moved)
    db.executemany("DELETE FROM entity_embeddings WHERE entity_id = ? AND vector = ?", [(old, v) for v in moved_set])
    write_bank(db, new, [from_blob(v) for v in moved])


def delete_entity(db: sqlite3.Connection, entity_id: int) -> None:
    """Remove the entity and what memory text says about it (see the module docstring);
    observations (with their media), bank, edges and links cascade."""
    require_entity(db, entity_id)
    for memory_id, text, others in _memories_naming(db, entity_id):
        if not others or dialect.is_link_line(text):
            db.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        else:
            db.execute("UPDATE memories SET text = ? WHERE id = ?", (dialect.unnamed(text, entity_id), memory_id))
    db.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
    merge_log.prune(DIALECT, db)


def _memories_naming(db: sqlite3.Connection, entity_id: int) -> list[tuple[int, str, set[int]]]:
    """(id, text, other entities named) of every memory linked to ``entity_id`` or tagging it."""
    tokens = " OR ".join(f'"{kind}_{entity_id}"' for kind in ("face", "voice"))  # the tags' keyword tokens
    rows = db.execute(
        "SELECT id, text FROM memories WHERE id IN (SELECT memory_id FROM edges WHERE entity_id = ?)"
        " OR id IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)",
        (entity_id, tokens),
    ).fetchall()
    found = []
    for memory_id, text in rows:
        linked = {r[0] for r in db.execute("SELECT entity_id FROM edges WHERE memory_id = ?", (memory_id,))}
        named = linked | set(tags.entity_ids(text))
        if entity_id in named:
            found.append((memory_id, text, named - {entity_id}))
    return found


def delete_memory(db: sqlite3.Connection, memory_id: int) -> None:
    """Remove the memory and the transcript of the voice segments it quotes (module docstring)."""
    dialect.delete_memory(db, dialect.Dialect.SQLITE, memory_id)
    merge_log.prune(DIALECT, db)


def orphan_entities_of_video(db: sqlite3.Connection, video_id: str) -> list[int]:
    """Entities that belong to ``video_id`` only: first seen there (or of no video but observed
    there) and with no observation or memory edge in any other video."""
    rows = db.execute(
        "SELECT n.id FROM entities n WHERE (n.video_id = :v OR (n.video_id IS NULL AND ("
        "   EXISTS (SELECT 1 FROM faces f WHERE f.entity_id = n.id AND f.video_id = :v)"
        "   OR EXISTS (SELECT 1 FROM voices s WHERE s.entity_id = n.id AND s.video_id = :v)"
        "   OR EXISTS (SELECT 1 FROM edges e JOIN memories m ON m.id = e.memory_id"
        "              WHERE e.entity_id = n.id AND m.video_id = :v))))"
        " AND NOT EXISTS (SELECT 1 FROM faces f WHERE f.entity_id = n.id AND f.video_id <> :v)"
        " AND NOT EXISTS (SELECT 1 FROM voices s WHERE s.entity_id = n.id AND s.video_id <> :v)"
        " AND NOT EXISTS (SELECT 1 FROM edges e JOIN memories m ON m.id = e.memory_id"
        "                 WHERE e.entity_id = n.id AND m.video_id <> :v)",
        {"v": video_id},
    ).fetchall()
    return [r[0] for r in rows]
