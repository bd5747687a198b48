"""Entity merges recorded with their grounds, and undone from the record (both backends).

A merge folds one entity into another and deletes it
(:func:`m3agent.store.entity_ops.merge_entities`). Just before, :func:`capture` notes what the merge will
change: the absorbed entity's row, its observations, measured attributes, bank, memory edges,
character base id and links, the kept entity's details, and the text of the
memories whose tags the merge rewrites. :func:`record` stores that snapshot
(table ``entity_merges``) with who merged (``auto`` or ``manual``) and why.

:func:`undo` brings the absorbed entity back under its old id with all of
that, and restores a rewritten memory's text where it is still what the merge
left (a memory changed since keeps its text and is counted). Evidence that
arrived after the merge (later clips matched against the merged bank) stays
with the kept entity. Forgetting reaches the records (:func:`prune`), and an
undone record keeps only who merged what and why. The identity resolver never merges an undone pair
automatically again.

The SQL is written once with ``?`` parameters; :class:`Dialect` adapts it (:func:`m3agent.store.sql.dialect.render`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from m3agent.domain import EntityMerge, MergedEntity
from m3agent.errors import IntegrityError, NotFoundError
from m3agent.store.sql import dialect
from m3agent.store.sqlite.schema import utc_now

Vector = Any  # numpy float32 vector (kept untyped here: no numpy import at module import)


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one backend runs the shared SQL: parameter marker and entity bank access."""

    marker: str  # "?" (SQLite) or "%s" (PostgreSQL)
    read_bank: Callable[[Any, int], list[Vector]]
    write_bank: Callable[[Any, int, Sequence[Vector]], None]
    merge: Callable[[Any, int, int], None]  # fold the second entity into the first and delete it

    def run(self, db: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        style = dialect.Dialect.SQLITE if self.marker == "?" else dialect.Dialect.POSTGRES
        return db.execute(dialect.render(sql, style), tuple(params))


def merge_recorded(d: Dialect, db: Any, keep: int, absorb: int, *, source: str, evidence: str,
                   video_id: str | None = None, clip_index: int | None = None) -> int:
    """Merge ``absorb`` into ``keep``, recorded in ``entity_merges`` so it can be undone; returns the record id."""
    if keep == absorb:
        raise IntegrityError(f"cannot merge entity {keep} with itself")
    snapshot = capture(d, db, keep, absorb)
    d.merge(db, keep, absorb)
    return record(d, db, keep, absorb, snapshot, source=source, evidence=evidence,
                  video_id=video_id, clip_index=clip_index)


def capture(d: Dialect, db: Any, keep: int, absorb: int) -> dict[str, Any]:
    """What merging ``absorb`` into ``keep`` will change (call before the merge)."""
    entity = d.run(db, "SELECT kind, name, video_id, first_clip, last_clip, created_at FROM entities WHERE id = ?",
                   (absorb,)).fetchone()
    kept = d.run(db, "SELECT name FROM entities WHERE id = ?", (keep,)).fetchone()
    if entity is None or kept is None:
        raise NotFoundError(f"no entity {absorb if entity is None else keep}")
    table = "faces" if entity[0] == "face" else "voices"
    edges = [list(r) for r in d.run(db, "SELECT memory_id, weight FROM edges WHERE entity_id = ?", (absorb,))]
    memory_ids = [int(m) for m, _ in edges]
    keep_edges = [list(r) for r in _rows_in(d, db, "SELECT memory_id, weight FROM edges WHERE entity_id = ?"
                                            " AND memory_id IN ({})", (keep,), memory_ids)]
    texts = [list(r) for r in _rows_in(d, db, "SELECT id, text FROM memories WHERE 1 = ? AND id IN ({})",
                                       (1,), memory_ids)]
    role = "face_id" if entity[0] == "face" else "voice_id"
    return {
        "entity": {"kind": entity[0], "name": entity[1], "video_id": entity[2], "first_clip": entity[3],
                   "last_clip": entity[4], "created_at": entity[5]},
        "keep_name": kept[0],
        "table": table,
        "observations": [int(r[0]) for r in d.run(db, f"SELECT id FROM {table} WHERE entity_id = ?", (absorb,))],
        "attributes": [int(r[0]) for r in d.run(db, "SELECT id FROM entity_attributes WHERE entity_id = ?",
                                                (absorb,))],
        "bank": [[float(x) for x in v] for v in d.read_bank(db, absorb)],
        "edges": edges,
        "keep_edges": keep_edges,
        "texts": texts,
        "role": role,
        "links": [int(r[0]) for r in d.run(db, f"SELECT seq FROM links WHERE {role} = ?", (absorb,))],
        "characters": {str(e): int(c) for e, c in _rows_in(
            d, db, "SELECT entity_id, id FROM characters WHERE 1 = ? AND entity_id IN ({})", (1,), [keep, absorb])},
    }


def _rows_in(d: Dialect, db: Any, sql: str, params: Sequence[Any], ids: Sequence[int]) -> list[Any]:
    if not ids:
        return []
    return list(d.run(db, sql.format(", ".join("?" for _ in ids)), (*params, *ids)).fetchall())


def record(d: Dialect, db: Any, keep: int, absorb: int, snapshot: dict[str, Any], *, source: str,
           evidence: str, video_id: str | None = None, clip_index: int | None = None) -> int:
    """Store the merge just made (``snapshot`` from :func:`capture`); returns its id."""
    snapshot = {**snapshot, "merged_texts": {str(m): t for m, t in _rows_in(
        d, db, "SELECT id, text FROM memories WHERE 1 = ? AND id IN ({})", (1,), [m for m, _ in snapshot["texts"]])}}
    row = d.run(db, "INSERT INTO entity_merges (keep_id, absorbed_id, kind, source, evidence, video_id, clip_index,"
                " snapshot, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (keep, absorb, snapshot["entity"]["kind"], source, evidence, video_id, clip_index,
                 json.dumps(snapshot), utc_now())).fetchone()
    return int(row[0])


_COLUMNS = "id, keep_id, absorbed_id, kind, source, evidence, video_id, clip_index, created_at, undone_at"


def merges(d: Dialect, db: Any) -> list[EntityMerge]:
    """Every recorded merge, oldest first."""
    return [_merge(r) for r in d.run(db, f"SELECT {_COLUMNS} FROM entity_merges ORDER BY id")]


def merge_of_character(d: Dialect, db: Any, character_id: int) -> EntityMerge | None:
    """The newest merge in force whose two entities held base character id ``character_id`` before it (the
    snapshot's ``characters``): the one that folded that character into another; None when none did."""
    rows = d.run(db, f"SELECT {_COLUMNS}, snapshot FROM entity_merges WHERE undone_at IS NULL ORDER BY id DESC")
    for row in rows:
        if character_id in json.loads(row[-1]).get("characters", {}).values():
            return _merge(row[:-1])
    return None


def merged_entity(d: Dialect, db: Any, merge_id: int) -> MergedEntity | None:
    """The absorbed entity as merge ``merge_id`` recorded it (name, kind, observations); None when the merge
    was undone (the entity is back) or there is no such merge."""
    row = d.run(db, "SELECT snapshot FROM entity_merges WHERE id = ? AND undone_at IS NULL", (merge_id,)).fetchone()
    if row is None:
        return None
    snapshot = json.loads(row[0])
    entity = snapshot.get("entity", {})
    return MergedEntity(merge_id=merge_id, kind=str(entity.get("kind", "")), name=str(entity.get("name") or ""),
                        observations=tuple(int(i) for i in snapshot.get("observations", ())))


def _merge(r: Sequence[Any]) -> EntityMerge:
    return EntityMerge(id=int(r[0]), keep_id=int(r[1]), absorbed_id=int(r[2]), kind=str(r[3]), source=str(r[4]),
                       evidence=str(r[5]), video_id=r[6], clip_index=r[7], created_at=str(r[8]),
                       undone_at=r[9])


def undo(d: Dialect, db: Any, merge_id: int) -> tuple[int, int]:
    """Bring the absorbed entity of merge ``merge_id`` back; returns (its id, memories whose text was kept)."""
    row = d.run(db, "SELECT keep_id, absorbed_id, snapshot, undone_at FROM entity_merges WHERE id = ?",
                (merge_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no entity merge {merge_id}")
    keep, absorb, snap = int(row[0]), int(row[1]), json.loads(row[2])
    if row[3] is not None:
        raise IntegrityError(f"entity merge {merge_id} was already undone ({row[3]})",
                             hint="m3agent merges lists the merges that can still be undone")
    if d.run(db, "SELECT 1 FROM entities WHERE id = ?", (keep,)).fetchone() is None:
        raise IntegrityError(f"entity {keep}, which absorbed {absorb}, no longer exists: nothing to undo",
                             hint="if a later merge absorbed it, undo that one first (m3agent merges)")
    if d.run(db, "SELECT 1 FROM entities WHERE id = ?", (absorb,)).fetchone() is not None:
        raise IntegrityError(f"entity {absorb} exists again: cannot bring it back a second time")
    _restore_entity(d, db, keep, absorb, snap)
    kept = _restore_memories(d, db, keep, absorb, snap)
    if snap["links"]:
        role = snap["role"]
        d.run(db, f"UPDATE links SET {role} = ? WHERE {role} = ? AND seq IN ("
              + ", ".join("?" for _ in snap["links"]) + ")", (absorb, keep, *snap["links"]))
    # the snapshot's contents are back in the live tables: keep no second copy
    d.run(db, "UPDATE entity_merges SET undone_at = ?, snapshot = '{}' WHERE id = ?", (utc_now(), merge_id))
    return absorb, kept


def prune(d: Dialect, db: Any) -> None:
    """Forgetting reaches the records: after a deletion, a record whose kept entity is gone is dropped
    (nothing is left to undo), and a record keeps no text or edge of a memory that is gone."""
    rows = d.run(db, "SELECT m.id, m.snapshot, EXISTS (SELECT 1 FROM entities e WHERE e.id = m.keep_id)"
                 " FROM entity_merges m WHERE m.undone_at IS NULL").fetchall()
    for merge_id, text, kept in rows:
        if not kept:
            d.run(db, "DELETE FROM entity_merges WHERE id = ?", (merge_id,))
            continue
        snap = json.loads(text)
        named = {int(m) for m, _ in snap["edges"]} | {int(m) for m, _ in snap["texts"]}
        present = {int(r[0]) for r in _rows_in(d, db, "SELECT id FROM memories WHERE 1 = ? AND id IN ({})", (1,),
                                               sorted(named))}
        if present == named:
            continue
        for key in ("edges", "keep_edges", "texts"):
            snap[key] = [row for row in snap[key] if int(row[0]) in present]
        snap["merged_texts"] = {m: t for m, t in snap.get("merged_texts", {}).items() if int(m) in present}
        d.run(db, "UPDATE entity_merges SET snapshot = ? WHERE id = ?", (json.dumps(snap), merge_id))


def _restore_entity(d: Dialect, db: Any, keep: int, absorb: int, snap: dict[str, Any]) -> None:
    import numpy as np

    e = snap["entity"]
    d.run(db, "INSERT INTO entities (id, kind, name, video_id, first_clip, last_clip, created_at)"
          " VALUES (?, ?, ?, ?, ?, ?, ?)",
          (absorb, e["kind"], e["name"], e["video_id"], e["first_clip"], e["last_clip"], e["created_at"]))
    if snap["keep_name"] == "" and e["name"]:
        d.run(db, "UPDATE entities SET name = '' WHERE id = ? AND name = ?", (keep, e["name"]))
    bases = snap["characters"]
    d.run(db, "DELETE FROM characters WHERE entity_id = ?", (keep,))
    for entity_id in (keep, absorb):
        if str(entity_id) in bases:
            d.run(db, "INSERT INTO characters (id, entity_id) VALUES (?, ?)", (bases[str(entity_id)], entity_id))
    for table, ids in ((snap["table"], snap["observations"]), ("entity_attributes", snap.get("attributes", []))):
        if ids:
            d.run(db, f"UPDATE {table} SET entity_id = ? WHERE entity_id = ? AND id IN ("
                  + ", ".join("?" for _ in ids) + ")", (absorb, keep, *ids))
    bank = [np.asarray(v, dtype=np.float32) for v in snap["bank"]]
    d.write_bank(db, absorb, bank)
    _drop_exemplars(d, db, keep, bank)


def _drop_exemplars(d: Dialect, db: Any, keep: int, moved: Sequence[Vector]) -> None:
    """Remove from ``keep``'s bank the exemplars the merge brought in (equal within float rounding)."""
    import numpy as np

    if not moved:
        return
    current = d.read_bank(db, keep)
    stay = [v for v in current if not any(np.allclose(v, m, atol=1e-5) for m in moved)]
    if len(stay) != len(current):
        d.run(db, "DELETE FROM entity_embeddings WHERE entity_id = ?", (keep,))
        d.write_bank(db, keep, stay)


def _restore_memories(d: Dialect, db: Any, keep: int, absorb: int, snap: dict[str, Any]) -> int:
    """Edges back to their state before the merge; texts back where unchanged since. Returns texts kept."""
    present = {int(r[0]) for r in _rows_in(d, db, "SELECT id FROM memories WHERE 1 = ? AND id IN ({})", (1,),
                                           [m for m, _ in snap["edges"]])}
    keep_weight = {int(m): w for m, w in snap["keep_edges"]}
    for memory_id, weight in snap["edges"]:
        if memory_id not in present:
            continue
        d.run(db, "INSERT INTO edges (entity_id, memory_id, weight) VALUES (?, ?, ?)", (absorb, memory_id, weight))
        if memory_id in keep_weight:
            d.run(db, "UPDATE edges SET weight = ? WHERE entity_id = ? AND memory_id = ?",
                  (keep_weight[memory_id], keep, memory_id))
        else:
            d.run(db, "DELETE FROM edges WHERE entity_id = ? AND memory_id = ?", (keep, memory_id))
    kept = 0
    merged = snap.get("merged_texts", {})
    for memory_id, old_text in snap["texts"]:
        if memory_id not in present or old_text == merged.get(str(memory_id), old_text):
            continue
        cursor = d.run(db, "UPDATE memories SET text = ? WHERE id = ? AND text = ?",
                       (old_text, memory_id, merged[str(memory_id)]))
        kept += 0 if cursor.rowcount else 1
    return kept
