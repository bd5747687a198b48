"""One SQL text for the statements both stores run, rendered for SQLite (``?``) or PostgreSQL (``%s``).

Statements are written once with ``?`` placeholders; :func:`render` gives PostgreSQL's ``%s`` form
(``?`` inside quoted literals is left alone, ``%`` doubled as psycopg wants). The operations whose
SQL is the same on both stores live here too, so the two stores cannot drift: deleting a memory
(with the transcript it quotes), storing a face-voice link, recording a stage timing, recording
the sources of a consolidated fact and what a consolidation changed, forgetting a video's
consolidation; and the text rules of deleting an entity (:data:`NEUTRAL`, link lines). Both
``sqlite3.Connection`` and ``psycopg.Connection`` have the ``execute(sql, params)`` these use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from m3agent import tags
from m3agent.domain import ForgottenConsolidation, LinkSource
from m3agent.errors import IntegrityError, NotFoundError
from m3agent.store.location import StoreKind

if TYPE_CHECKING:
    from m3agent.domain import Clip, FaceVoiceLink

SLACK_S = 0.01  # spans are stored as floats; a speech memory spans exactly its segment

Dialect = StoreKind  # the backend a memory lives in is the SQL it speaks: one enum names both


class Rows(Protocol):
    """What both drivers' cursors offer: fetching, iterating, the count of rows a write touched."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Cursor(Protocol):
    def executemany(self, sql: str, params_seq: Iterable[Sequence[Any]], /) -> Any: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """What both drivers' connections offer: ``execute(sql, params)`` returning a cursor, ``cursor()``."""

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ..., /) -> Rows: ...

    def cursor(self) -> Cursor: ...


def execute_many(db: Connection, sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """Run ``sql`` (in the driver's style) once per parameter row, batched by the driver (psycopg pipelines)."""
    cursor = db.cursor()
    try:
        cursor.executemany(sql, rows)
    finally:
        cursor.close()


@lru_cache(maxsize=1024)  # statements are few, but some are built with a placeholder per listed id
def render(sql: str, dialect: Dialect) -> str:
    """``sql`` (``?`` placeholders) in ``dialect``'s parameter style."""
    if dialect is Dialect.SQLITE:
        return sql
    parts = sql.split("'")  # even parts are outside quoted literals ('' escapes split into empty parts)
    return "'".join(p.replace("%", "%%").replace("?", "%s") if i % 2 == 0 else p.replace("%", "%%")
                    for i, p in enumerate(parts))


def marks(count: int) -> str:
    """``count`` comma-separated ``?`` placeholders, for an ``IN (...)`` list."""
    return ", ".join("?" * count)


MEMORY_SPAN = "SELECT text, video_id, clip_index, start_s, end_s FROM memories WHERE id = ?"
QUOTABLE_SEGMENTS = (
    "SELECT v.id, v.text FROM voices v JOIN edges e ON e.entity_id = v.entity_id AND e.memory_id = ?"
    " WHERE v.video_id = ? AND v.clip_index = ? AND v.start_s >= ? AND v.end_s <= ? AND v.text <> ''"
)
DELETE_MEMORY = "DELETE FROM memories WHERE id = ?"
CLEAR_TRANSCRIPT = "UPDATE voices SET text = '', words = '[]' WHERE id = ?"
INSERT_LINK = (
    "INSERT INTO links (face_id, voice_id, confidence, source, evidence, video_id, clip_index)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
EPISODIC_UP_TO = (
    "SELECT id FROM memories WHERE id IN ({ids}) AND kind = 'episodic' AND video_id = ? AND clip_index <= ?"
)
INSERT_SOURCE = (
    "INSERT INTO memory_sources (memory_id, source_id, clip_index) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
)
MEMORY_STATE = "SELECT weight, last_clip_index FROM memories WHERE id = ?"
UPSERT_CHANGE = (
    "INSERT INTO consolidation_changes (memory_id, video_id, clip_index, weight_delta, last_before, last_after)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (memory_id, video_id, clip_index) DO UPDATE SET"
    " weight_delta = consolidation_changes.weight_delta + excluded.weight_delta, last_after = excluded.last_after"
)
FACT_PROVENANCE = "consolidate/%"  # how m3agent.memorize.consolidation.consolidate marks the facts it writes
CONSOLIDATION_FACTS = "SELECT id FROM memories WHERE video_id = ? AND kind = 'semantic' AND provenance LIKE ?"
CHANGES_OF_VIDEO = (
    "SELECT c.memory_id, c.weight_delta, c.last_before, c.last_after, m.last_clip_index"
    " FROM consolidation_changes c JOIN memories m ON m.id = c.memory_id"
    " WHERE c.video_id = ? ORDER BY c.memory_id, c.clip_index DESC"
)
RESTORE_MEMORY = "UPDATE memories SET weight = weight - ?, last_clip_index = ? WHERE id = ?"
DELETE_FACTS = "DELETE FROM memories WHERE video_id = ? AND kind = 'semantic' AND provenance LIKE ?"
DELETE_SOURCES_IN_VIDEO = "DELETE FROM memory_sources WHERE source_id IN (SELECT id FROM memories WHERE video_id = ?)"
DELETE_CHANGES = "DELETE FROM consolidation_changes WHERE video_id = ?"
COUNT_CONSOLIDATED = "SELECT count(*) FROM consolidated_clips WHERE video_id = ?"
DELETE_CONSOLIDATED = "DELETE FROM consolidated_clips WHERE video_id = ?"
UPSERT_TIMING = (
    "INSERT INTO clip_timings (video_id, clip_index, stage, seconds) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (video_id, clip_index, stage) DO UPDATE SET seconds = excluded.seconds"
)


def delete_memory(db: Connection, dialect: Dialect, memory_id: int) -> None:
    """Remove the memory and the transcript of the voice segments it quotes (inside the caller's transaction).

    A quoted segment is one of an entity the memory names, inside its span, whose text the memory
    contains: the words are gone with the memory, the segment (who spoke when) stays.
    """
    row = db.execute(render(MEMORY_SPAN, dialect), (memory_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no memory {memory_id}")
    text, video_id, clip_index, start_s, end_s = row
    segments = db.execute(render(QUOTABLE_SEGMENTS, dialect),
                          (memory_id, video_id, clip_index, start_s - SLACK_S, end_s + SLACK_S)).fetchall()
    quoted = [segment_id for segment_id, said in segments if said.strip() and said.strip() in text]
    db.execute(render(DELETE_MEMORY, dialect), (memory_id,))
    for segment_id in quoted:
        db.execute(render(CLEAR_TRANSCRIPT, dialect), (segment_id,))


def insert_link(db: Connection, dialect: Dialect, link: FaceVoiceLink, video_id: str | None,
                clip_index: int | None) -> None:
    """Store ``link`` as seen in clip ``clip_index`` of ``video_id`` (already checked by the caller)."""
    db.execute(render(INSERT_LINK, dialect), (link.face_id, link.voice_id, link.confidence,
                                              LinkSource(link.source).value, link.evidence, video_id, clip_index))


def record_timing(db: Connection, dialect: Dialect, clip: Clip, stage: str, seconds: float) -> None:
    """Seconds ``stage`` took on ``clip`` (a rerun's timing replaces the old one)."""
    db.execute(render(UPSERT_TIMING, dialect), (clip.video_id, clip.index, stage, float(seconds)))


def add_sources(db: Connection, dialect: Dialect, clip: Clip, memory_id: int, source_ids: Sequence[int]) -> None:
    """Record that ``memory_id`` rests on ``source_ids``, episodic memories of the video up to ``clip``."""
    unique = sorted(set(source_ids))
    if not unique:
        return
    sql = EPISODIC_UP_TO.format(ids=marks(len(unique)))
    found = {int(r[0]) for r in db.execute(render(sql, dialect), (*unique, clip.video_id, clip.index)).fetchall()}
    check_sources(unique, found, clip)
    for source_id in unique:
        db.execute(render(INSERT_SOURCE, dialect), (memory_id, source_id, clip.index))


def check_sources(wanted: Sequence[int], found: set[int], clip: Clip) -> None:
    """Refuse sources that are not episodic memories of ``clip``'s video up to ``clip``."""
    bad = [s for s in wanted if s not in found]
    if bad:
        raise IntegrityError(
            f"memories {bad} are no episodic memories of {clip.video_id!r} up to clip {clip.index}",
            hint="a consolidated fact rests only on episodic memories of its clip and earlier ones",
        )


@contextmanager
def recorded_change(db: Connection, dialect: Dialect, clip: Clip, memory_id: int) -> Iterator[None]:
    """Record what the block changes in memory ``memory_id`` (weight, last confirmed clip) as a change of the
    consolidation unit ending at ``clip``, to be taken back by :func:`forget_consolidation`."""
    before = db.execute(render(MEMORY_STATE, dialect), (memory_id,)).fetchone()
    yield
    after = db.execute(render(MEMORY_STATE, dialect), (memory_id,)).fetchone()
    if before is None or after is None:
        return
    db.execute(render(UPSERT_CHANGE, dialect), (memory_id, clip.video_id, clip.index, float(after[0] - before[0]),
                                                before[1], after[1]))


def forget_consolidation(db: Connection, dialect: Dialect, video_id: str) -> ForgottenConsolidation:
    """Take back the consolidation of ``video_id`` inside the caller's transaction (see
    :meth:`~m3agent.store.protocol.MemoryStore.forget_consolidation`)."""
    if db.execute(render("SELECT 1 FROM videos WHERE video_id = ?", dialect), (video_id,)).fetchone() is None:
        raise NotFoundError(f"no video {video_id!r}", hint="list the videos with `m3agent videos`")
    facts = {int(r[0]) for r in db.execute(render(CONSOLIDATION_FACTS, dialect),
                                           (video_id, FACT_PROVENANCE)).fetchall()}
    changes = [r for r in db.execute(render(CHANGES_OF_VIDEO, dialect), (video_id,)).fetchall()
               if int(r[0]) not in facts]
    restored = _restore(db, dialect, changes)
    clips = int(db.execute(render(COUNT_CONSOLIDATED, dialect), (video_id,)).fetchone()[0])
    db.execute(render(DELETE_FACTS, dialect), (video_id, FACT_PROVENANCE))
    for sql in (DELETE_SOURCES_IN_VIDEO, DELETE_CHANGES, DELETE_CONSOLIDATED):
        db.execute(render(sql, dialect), (video_id,))
    return ForgottenConsolidation(video_id, facts=len(facts), clips=clips, restored=restored)


def _restore(db: Connection, dialect: Dialect, changes: Sequence[Any]) -> int:
    """Undo recorded changes, given newest first per memory: the weights added are taken off; the last
    confirmed clip is put back for as long as it is still the one a change left (a later ingest that
    confirmed the memory again keeps its clip)."""
    by_memory: dict[int, list[Any]] = {}
    for row in changes:
        by_memory.setdefault(int(row[0]), []).append(row)
    for memory_id, rows in by_memory.items():
        last = rows[0][4]
        for _, _, before, after, _ in rows:
            if last != after:
                break
            last = before
        db.execute(render(RESTORE_MEMORY, dialect), (sum(float(r[1]) for r in rows), last, memory_id))
    return len(by_memory)


NEUTRAL = "someone"  # what a deleted entity's tag becomes in memories that stay


def is_link_line(text: str) -> bool:
    """A bookkeeping line recording a face-voice link (``Equivalence: <face_1>, <voice_2>``)."""
    return text.lstrip().lower().startswith("equivalence")


def unnamed(text: str, entity_id: int) -> str:
    """``text`` with every face/voice tag of ``entity_id`` replaced by :data:`NEUTRAL`
    (capitalised where it starts a sentence)."""
    out: list[tags.Token] = []
    for token in tags.tokenize(text):
        if isinstance(token, tags.Tag) and token.kind in ("face", "voice") and token.id == entity_id:
            before = tags.render(out).rstrip()
            starts = not before or before[-1] in ".!?"
            out.append(NEUTRAL.capitalize() if starts else NEUTRAL)
        else:
            out.append(token)
    return tags.render(out)
