"""Identity corrections on either store: merge, split and delete entities, delete memories.

Each function runs inside a transaction opened by the caller, on a connection of the
backend ``d`` names. The SQL is written once, with ``?`` placeholders rendered for ``d``;
rows and vectors are read through :class:`~m3agent.store.sql.rows.SQLRows`. The one real
difference is how the keyword index finds a tag (:data:`TAG_SEARCH`). Tags in memory text are
rewritten with :mod:`m3agent.tags` (token-exact), so merging entity 3 never touches ``<face_30>``.

What a deletion removes (derived text included, so nothing points at what is gone):

- an entity: its observations with their crops and snippets, its measured
  attributes, bank, edges, links and base character id; every memory that names (by edge or tag) no
  other entity, and every link bookkeeping line (``Equivalence: ...``) that
  names it; in the other memories its tag becomes "someone" (their text
  embedding is kept: a vector, no text).
- a memory: its edges and index entries, and the transcript (``voices.text``
  and ``voices.words``) of the voice segments it quotes; the segments keep
  their timing, speaker embedding and audio as identity evidence.
- either: the free text derived from what is gone, in every video it touched: the consolidation's notes
  (they quote the drafts it refused) and the words a memorization model gave as a link's evidence. Such
  text may quote a deleted sentence in part or in other words, so it is cleared whole, not searched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.domain import EntityKind
from m3agent.errors import IntegrityError
from m3agent.store import merge_log
from m3agent.store.index.vectors import from_blob
from m3agent.store.sql import dialect
from m3agent.store.sql.dialect import Connection, Dialect, Rows, render
from m3agent.store.sql.rows import ROWS
from m3agent.store.sqlite.schema import utc_now

if TYPE_CHECKING:
    from m3agent.domain import Vector


def _fts_tag_search(entity_id: int) -> tuple[str, str]:
    """FTS5 splits ``<face_3>`` into the token ``face_3``."""
    terms = " OR ".join(f'"{kind}_{entity_id}"' for kind in ("face", "voice"))
    return "id IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)", terms


def _tsvector_tag_search(entity_id: int) -> tuple[str, str]:
    """``m3_keywords`` (pg_migrations) makes ``<face_3>`` the lexeme ``face3``."""
    return "keywords @@ to_tsquery('simple', ?)", f"face{entity_id} | voice{entity_id}"


# (condition on memories, its one parameter) that finds the memories whose text tags an entity
TAG_SEARCH: dict[Dialect, Callable[[int], tuple[str, str]]] = {
    Dialect.SQLITE: _fts_tag_search, Dialect.POSTGRES: _tsvector_tag_search}


def _run(d: Dialect, db: Connection, sql: str, params: Sequence[Any] = ()) -> Rows:
    return db.execute(render(sql, d), params)


def read_bank(d: Dialect, db: Connection, entity_id: int) -> list[Vector]:
    """The exemplars of an entity's bank, in order."""
    rows = _run(d, db, "SELECT vector FROM entity_embeddings WHERE entity_id = ? ORDER BY ord", (entity_id,))
    return [ROWS[d].vector_from_db(r[0]) for r in rows]


def merge_entities(d: Dialect, db: Connection, keep: int, absorb: int) -> None:
    """Fold ``absorb`` into ``keep`` and delete ``absorb``."""
    if keep == absorb:
        raise IntegrityError(f"cannot merge entity {keep} with itself")
    kind = ROWS[d].require_entity(db, keep)
    if ROWS[d].require_entity(db, absorb) != kind:
        raise IntegrityError(f"cannot merge a {ROWS[d].require_entity(db, absorb)} entity into a {kind} entity")
    _rewrite_tags(d, db, keep, kind, absorb)
    _run(d, db, "INSERT INTO edges (entity_id, memory_id, weight) SELECT ?, memory_id, weight FROM edges"
         " WHERE entity_id = ? ON CONFLICT (entity_id, memory_id) DO UPDATE SET"
         " weight = edges.weight + excluded.weight", (keep, absorb))
    _run(d, db, "DELETE FROM edges WHERE entity_id = ?", (absorb,))
    for table in ("faces", "voices", "entity_attributes"):
        _run(d, db, f"UPDATE {table} SET entity_id = ? WHERE entity_id = ?", (keep, absorb))
    ROWS[d].write_bank(db, keep, read_bank(d, db, absorb))
    for role in ("face_id", "voice_id"):  # links of absorb (same kind as keep, so the same role)
        _run(d, db, f"UPDATE links SET {role} = ? WHERE {role} = ?", (keep, absorb))
    _merge_details(d, db, keep, absorb)
    _keep_smaller_character(d, db, keep, absorb)
    _run(d, db, "DELETE FROM entities WHERE id = ?", (absorb,))


def _rewrite_tags(d: Dialect, db: Connection, keep: int, kind: str, absorb: int) -> None:
    def swap(tag: tags.Tag) -> tags.Token | None:
        if tag.kind in tags.ENTITY_KINDS and tag.id == absorb:
            return tags.Tag(tags.TagKind(kind), keep)
        return None

    rows = _run(d, db, "SELECT m.id, m.text FROM memories m JOIN edges e ON e.memory_id = m.id"
                " WHERE e.entity_id = ?", (absorb,)).fetchall()
    for memory_id, text in rows:
        new_text = tags.rewrite(text, swap)
        if new_text != text:
            _run(d, db, "UPDATE memories SET text = ? WHERE id = ?", (new_text, memory_id))


def _merge_details(d: Dialect, db: Connection, keep: int, absorb: int) -> None:
    """The survivor keeps its name (takes the absorbed one's if it has none) and, when both were first seen
    in one video, spans the clips of both (a clip bound that is unknown, NULL, does not count)."""
    sql = "SELECT name, video_id, first_clip, last_clip FROM entities WHERE id = ?"
    name, video_id, first, last = _run(d, db, sql, (keep,)).fetchone()
    other_name, other_video_id, other_first, other_last = _run(d, db, sql, (absorb,)).fetchone()
    if video_id == other_video_id:
        first, last = _known(min, first, other_first), _known(max, last, other_last)
    _run(d, db, "UPDATE entities SET name = ?, first_clip = ?, last_clip = ? WHERE id = ?",
         (name or other_name, first, last, keep))


def _known(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else pick(a, b)


def _keep_smaller_character(d: Dialect, db: Connection, keep: int, absorb: int) -> None:
    """The survivor owns the smaller of the two base character ids."""
    ids = dict(_run(d, db, "SELECT entity_id, id FROM characters WHERE entity_id IN (?, ?)", (keep, absorb)).fetchall())
    if absorb in ids and (keep not in ids or ids[absorb] < ids[keep]):
        _run(d, db, "DELETE FROM characters WHERE entity_id = ?", (keep,))
        _run(d, db, "UPDATE characters SET entity_id = ? WHERE entity_id = ?", (keep, absorb))


def link_places(d: Dialect, db: Connection, face: int, voice: int) -> list[tuple[str | None, int | None]]:
    """Where a link made by hand between ``face`` and ``voice`` is recorded: in every video where both occur,
    at the first clip from which both have been observed (so answers scoped before that clip do not see it);
    at the voice's first clip when they never share a video; without a clip when neither was observed."""
    firsts = [dict(_run(d, db, f"SELECT video_id, min(clip_index) FROM {table} WHERE entity_id = ?"
                               " GROUP BY video_id", (entity,)).fetchall())
              for table, entity in (("faces", face), ("voices", voice))]
    shared = sorted(set(firsts[0]) & set(firsts[1]))
    if shared:
        return [(video, max(firsts[0][video], firsts[1][video])) for video in shared]
    if firsts[1]:
        video = min(firsts[1])
        return [(video, firsts[1][video])]
    return [(None, None)]


def split_entity(d: Dialect, db: Connection, entity_id: int, observation_ids: Sequence[int]) -> int:
    """Move observations of ``entity_id`` (face or voice row ids) to a new entity; returns its id."""
    kind = EntityKind(ROWS[d].require_entity(db, entity_id))
    table = "faces" if kind is EntityKind.FACE else "voices"
    wanted = sorted(set(observation_ids))
    if not wanted:
        raise IntegrityError("split_entity needs at least one observation id")
    among, ids = ROWS[d].one_of("id", wanted)
    rows = _run(d, db, f"SELECT id, video_id, clip_index, embedding FROM {table} WHERE entity_id = ?"
                f" AND {among} ORDER BY video_id, clip_index, id", (entity_id, *ids)).fetchall()
    if len(rows) != len(wanted):
        found = {r[0] for r in rows}
        raise IntegrityError(f"observations {[i for i in wanted if i not in found]} are not {table} of "
                             f"entity {entity_id}")
    new_id = _new_entity_like(d, db, kind, rows)
    _split_attributes(d, db, table, entity_id, new_id, [(r[1], r[2]) for r in rows])
    _run(d, db, f"UPDATE {table} SET entity_id = ? WHERE {among}", (new_id, *ids))
    moved = [from_blob(bytes(r[3])) for r in rows if r[3] is not None]
    for vector in moved:  # exemplars equal to a moved observation's embedding go with it
        _run(d, db, "DELETE FROM entity_embeddings WHERE entity_id = ? AND vector = ?",
             (entity_id, ROWS[d].vector_to_db(vector)))
    ROWS[d].write_bank(db, new_id, moved)
    return new_id


def _split_attributes(d: Dialect, db: Connection, table: str, entity_id: int, new_id: int,
                      moving: Sequence[tuple[str, int]]) -> None:
    """Before ``moving`` observations (their video and clip) go from ``entity_id`` to ``new_id``: each clip's
    measured attributes follow the majority of the entity's observations in that clip (a tie stays), their
    weight scaled to the share that made the majority (the evidence behind them shrank)."""
    moved: dict[tuple[str, int], int] = {}
    for key in moving:
        moved[key] = moved.get(key, 0) + 1
    totals = {(str(v), int(c)): int(n) for v, c, n in _run(
        d, db, f"SELECT video_id, clip_index, count(*) FROM {table} WHERE entity_id = ? GROUP BY video_id, clip_index",
        (entity_id,))}
    for (video_id, clip_index), count in moved.items():
        share = count / max(totals.get((video_id, clip_index), count), count)
        owner, kept = (new_id, share) if share > 0.5 else (entity_id, 1.0 - share)
        _run(d, db, "UPDATE entity_attributes SET entity_id = ?, weight = weight * ? WHERE entity_id = ?"
             " AND video_id = ? AND clip_index = ?", (owner, kept, entity_id, video_id, clip_index))


def _new_entity_like(d: Dialect, db: Connection, kind: EntityKind, rows: list[Any]) -> int:
    """A new entity of ``kind`` first seen in the video of the first of ``rows``, over their clips there."""
    video_id = rows[0][1]
    clips = [r[2] for r in rows if r[1] == video_id]
    row = _run(d, db, "INSERT INTO entities (kind, name, video_id, first_clip, last_clip, created_at)"
               " VALUES (?, '', ?, ?, ?, ?) RETURNING id",
               (kind.value, video_id, min(clips), max(clips), utc_now())).fetchone()
    new_id = int(row[0])
    _run(d, db, "INSERT INTO characters (entity_id) VALUES (?)", (new_id,))
    return new_id


def delete_entity(d: Dialect, db: Connection, entity_id: int) -> None:
    """Remove the entity and what memory text says about it (see the module docstring);
    observations (with their media), bank, edges and links cascade."""
    ROWS[d].require_entity(db, entity_id)
    naming = _memories_naming(d, db, entity_id)
    touched = _videos_observing(d, db, entity_id) | {video_id for _, _, _, video_id in naming}
    for memory_id, text, others, _ in naming:
        if not others or dialect.is_link_line(text):
            _run(d, db, "DELETE FROM memories WHERE id = ?", (memory_id,))
        else:
            _run(d, db, "UPDATE memories SET text = ? WHERE id = ?", (dialect.unnamed(text, entity_id), memory_id))
    _run(d, db, "DELETE FROM entities WHERE id = ?", (entity_id,))
    merge_log.prune(MERGES[d], db)
    clear_derived_text(d, db, touched)


def _videos_observing(d: Dialect, db: Connection, entity_id: int) -> set[str]:
    """Every video where the entity's face is seen or its voice heard."""
    rows = _run(d, db, "SELECT video_id FROM faces WHERE entity_id = ? UNION SELECT video_id FROM voices"
                " WHERE entity_id = ?", (entity_id, entity_id)).fetchall()
    return {str(r[0]) for r in rows}


LLM_LINK_WORDS = "stated by the memorization model (its words were cleared with deleted memories)"


def clear_derived_text(d: Dialect, db: Connection, video_ids: set[str]) -> None:
    """Clear the free text derived from memories of ``video_ids`` (module docstring): consolidation notes,
    and the evidence words of the model-stated links seen there."""
    for video_id in sorted(video_ids):
        _run(d, db, "UPDATE consolidated_clips SET notes = '[]' WHERE video_id = ? AND notes <> '[]'", (video_id,))
        _run(d, db, "UPDATE links SET evidence = ? WHERE video_id = ? AND source = 'llm' AND evidence <> ?",
             (LLM_LINK_WORDS, video_id, LLM_LINK_WORDS))


def _memories_naming(d: Dialect, db: Connection, entity_id: int) -> list[tuple[int, str, set[int], str]]:
    """(id, text, other entities named, video) of every memory linked to ``entity_id`` or tagging it."""
    tag_condition, tag = TAG_SEARCH[d](entity_id)
    naming = f"id IN (SELECT memory_id FROM edges WHERE entity_id = ?) OR {tag_condition}"
    rows = _run(d, db, f"SELECT id, text, video_id FROM memories WHERE {naming}", (entity_id, tag)).fetchall()
    linked: dict[int, set[int]] = {}
    for memory_id, linked_id in _run(d, db, "SELECT memory_id, entity_id FROM edges WHERE memory_id IN"
                                     f" (SELECT id FROM memories WHERE {naming})", (entity_id, tag)):
        linked.setdefault(int(memory_id), set()).add(int(linked_id))
    found = []
    for memory_id, text, video_id in rows:
        named = linked.get(int(memory_id), set()) | set(tags.entity_ids(text))
        if entity_id in named:
            found.append((int(memory_id), str(text), named - {entity_id}, str(video_id)))
    return found


def delete_memory(d: Dialect, db: Connection, memory_id: int) -> None:
    """Remove the memory and the transcript of the voice segments it quotes (module docstring)."""
    row = _run(d, db, "SELECT video_id FROM memories WHERE id = ?", (memory_id,)).fetchone()
    dialect.delete_memory(db, d, memory_id)  # NotFoundError when there is no such memory
    merge_log.prune(MERGES[d], db)
    clear_derived_text(d, db, {str(row[0])})


def orphan_entities_of_video(d: Dialect, db: Connection, video_id: str) -> list[int]:
    """Entities that belong to ``video_id`` only: first seen there (or of no video but observed
    there) and with no observation or memory edge in any other video."""
    rows = _run(d, db, "SELECT n.id FROM entities n WHERE (n.video_id = ? OR (n.video_id IS NULL AND ("
                "   EXISTS (SELECT 1 FROM faces f WHERE f.entity_id = n.id AND f.video_id = ?)"
                "   OR EXISTS (SELECT 1 FROM voices s WHERE s.entity_id = n.id AND s.video_id = ?)"
                "   OR EXISTS (SELECT 1 FROM edges e JOIN memories m ON m.id = e.memory_id"
                "              WHERE e.entity_id = n.id AND m.video_id = ?))))"
                " AND NOT EXISTS (SELECT 1 FROM faces f WHERE f.entity_id = n.id AND f.video_id <> ?)"
                " AND NOT EXISTS (SELECT 1 FROM voices s WHERE s.entity_id = n.id AND s.video_id <> ?)"
                " AND NOT EXISTS (SELECT 1 FROM edges e JOIN memories m ON m.id = e.memory_id"
                "                 WHERE e.entity_id = n.id AND m.video_id <> ?)", (video_id,) * 7).fetchall()
    return [int(r[0]) for r in rows]


def _merges(d: Dialect) -> merge_log.Dialect:
    marker = "?" if d is Dialect.SQLITE else "%s"
    return merge_log.Dialect(marker, partial(read_bank, d), ROWS[d].write_bank, partial(merge_entities, d))


MERGES = {d: _merges(d) for d in Dialect}  # how merge_log runs on each backend
