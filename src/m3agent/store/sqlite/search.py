"""Vector and keyword search over the SQLite memories.

Vector search asks :class:`MemoryVectors` for candidates, adds the rows newer
than its watermark (written since the last sync, e.g. inside the current
clip transaction), then fetches the candidates from SQLite *with the filter
applied again* and ranks them by the exact float32 cosine. Keyword search is
FTS5's BM25 on an escaped query, computed over :class:`KeywordIndex` when it
is ready (the same ranking and scores) and by FTS5 otherwise.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING

from m3agent.domain import MemoryKind, ScoredMemory, SearchFilter
from m3agent.store.index.keyword import KeywordIndex, pending
from m3agent.store.index.memory_vectors import MemoryVectors
from m3agent.store.index.postings import Stats, fts_totals
from m3agent.store.index.vectors import KIND_CODES, MirrorFilter, ascending
from m3agent.store.sqlite.rows import (
    MEMORY_COLUMNS,
    filter_sql,
    fts_terms,
    memory_from_row,
    phrases_query,
    placeholders,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float32]

log = logging.getLogger(__name__)

FETCH_BATCH = 500


def vector_search(
    db: sqlite3.Connection, index: MemoryVectors, queries: FloatArray, k: int, flt: SearchFilter | None,
    mirror: MirrorFilter | None = None,
) -> list[ScoredMemory]:
    """Top-``k`` memories by their best exact cosine over ``queries`` (unit vectors, one per row) among the index
    candidates and the unsynced tail (``mirror``: ``mirror_filter(db, flt)`` when the caller has it)."""
    import numpy as np

    if k <= 0:
        return []
    want = max(2 * k, k + 16)
    ids, watermark = index.candidates(queries, want, mirror if mirror is not None else mirror_filter(db, flt))
    tail = _tail_ids(db, watermark, queries, want, flt)
    found = np.unique(np.concatenate([ids, tail]))
    return _exact_rows(db, [int(i) for i in found], queries, flt, k)


def mirror_filter(
    db: sqlite3.Connection, flt: SearchFilter | None, linked: IntArray | None = None
) -> MirrorFilter | None:
    """``flt`` in mirror terms: video row ids, kind codes, memory ids linked to the entities (``linked``:
    ``linked_memory_ids(db, flt.entity_ids)`` when the caller has them)."""
    if flt is None or flt == SearchFilter():
        return None  # nothing restricts: the unfiltered path, the same results without a full mask
    codes = _video_codes(db, set(flt.video_ids or ()) | {v for v, _ in flt.exclude_clips})
    memory_ids = None
    if flt.entity_ids is not None:
        memory_ids = linked if linked is not None else linked_memory_ids(db, flt.entity_ids)
    return MirrorFilter(
        videos=None if flt.video_ids is None else tuple(codes[v] for v in flt.video_ids if v in codes),
        before_clip=flt.before_clip,
        start_s=flt.start_s,
        end_s=flt.end_s,
        kinds=None if flt.kinds is None else tuple(KIND_CODES[MemoryKind(k).value] for k in flt.kinds),
        memory_ids=memory_ids,
        exclude=tuple((codes[v], c) for v, c in sorted(flt.exclude_clips) if v in codes),
    )


def linked_memory_ids(db: sqlite3.Connection, entity_ids: tuple[int, ...]) -> IntArray:
    """Ids of the memories linked to any of ``entity_ids``, ascending and distinct (read-only). SQLite hands
    them over as one string (no Python object per row, no sort in SQL): a third of the time of a ``SELECT
    DISTINCT ... ORDER BY`` read row by row."""
    import numpy as np

    found = None
    if entity_ids:
        found = db.execute(
            f"SELECT group_concat(memory_id) FROM edges WHERE entity_id IN ({placeholders(len(entity_ids))})",
            list(entity_ids),
        ).fetchone()[0]
    ids = np.fromstring(str(found), np.int64, sep=",") if found else np.empty(0, np.int64)
    ids = ascending(ids)
    ids.flags.writeable = False
    return ids


def _video_codes(db: sqlite3.Connection, video_ids: set[str]) -> dict[str, int]:
    if not video_ids:
        return {}
    rows = db.execute(
        f"SELECT video_id, id FROM videos WHERE video_id IN ({placeholders(len(video_ids))})", sorted(video_ids)
    )
    return {str(v): int(i) for v, i in rows}


def _tail_ids(
    db: sqlite3.Connection, watermark: int, queries: FloatArray, want: int, flt: SearchFilter | None
) -> IntArray:
    """Best ids among memories newer than the index watermark (normally none: then one O(1) look)."""
    import numpy as np

    top = db.execute("SELECT max(id) FROM memories").fetchone()[0]
    if top is None or top <= watermark:
        return np.empty(0, np.int64)
    where, params = filter_sql(flt, probe=True)
    rows = db.execute(
        f"SELECT m.id, m.embedding FROM memories m WHERE m.id > ? AND {where}", [watermark, *params]
    ).fetchall()
    if not rows:
        return np.empty(0, np.int64)
    scores = best_scores(b"".join(r[1] for r in rows), queries)
    best = np.argsort(-scores, kind="stable")[:want]
    return np.asarray([rows[i][0] for i in best], np.int64)


def best_scores(blobs: bytes, queries: FloatArray) -> FloatArray:
    """Each stored float32 vector's (the rows of ``blobs``, joined) best dot product over ``queries``."""
    import numpy as np

    vectors = np.frombuffer(blobs, "<f4").reshape(-1, queries.shape[1])
    return (vectors @ queries.T).max(axis=1)  # type: ignore[no-any-return]


def _exact_rows(
    db: sqlite3.Connection, ids: list[int], queries: FloatArray, flt: SearchFilter | None, k: int
) -> list[ScoredMemory]:
    """The best ``k`` rows of ``ids`` that (still) pass ``flt`` by their best exact cosine over ``queries``,
    best first (ties by id).

    Scores from (id, vector) first, whole rows for the ``k`` winners only: building a memory costs more than
    scoring it, and most candidates lose."""
    where, params = filter_sql(flt, probe=True)
    scores: list[tuple[float, int]] = []
    for start in range(0, len(ids), FETCH_BATCH):
        batch = ids[start : start + FETCH_BATCH]
        rows = db.execute(
            f"SELECT m.id, m.embedding FROM memories m WHERE m.id IN ({placeholders(len(batch))}) AND {where}",
            [*batch, *params],
        ).fetchall()
        if rows:
            batch_scores = best_scores(b"".join(blob for _, blob in rows), queries)
            scores += [(-float(score), int(i)) for (i, _), score in zip(rows, batch_scores, strict=True)]
    best = sorted(scores)[:k]
    if not best:
        return []
    found = db.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ({placeholders(len(best))})", [i for _, i in best]
    )
    by_id = {m.id: m for m in map(memory_from_row, found)}
    return [ScoredMemory(by_id[i], -negative) for negative, i in best if i in by_id]


def keyword_search(
    db: sqlite3.Connection, text: str, k: int, flt: SearchFilter | None, index: KeywordIndex | None = None,
    mirror: MirrorFilter | None = None,
) -> list[ScoredMemory]:
    """Top-``k`` by BM25 (score = -bm25, larger is better); free text is escaped, never parsed.

    With a ready ``index`` (:mod:`m3agent.store.index.keyword`) the ranking is FTS5's computed over its
    posting arrays, the rows newer than its watermark merged from FTS5; otherwise (or when it cannot answer
    exactly: see :func:`_indexed_ranking`) FTS5 ranks. ``mirror``: ``mirror_filter(db, flt)`` when the caller
    has it. Ranks on ids alone first, then fetches the ``k`` winners: carrying whole rows through the sort
    costs 10x at 10^6.
    """
    words = fts_terms(text)
    if not words or k <= 0:
        return []
    if index is not None:
        ranked = _indexed_ranking(db, index, words, k, flt, mirror)
        if ranked is not None:
            found = _ranked_rows(db, ranked, flt)
            if len(found) == len(ranked):
                return found
            log.debug("keyword index candidates failed the filter in SQL: ranking on FTS5")
    return _ranked_rows(db, _fts_ranking(db, words, k, flt), None)


def _indexed_ranking(
    db: sqlite3.Connection, index: KeywordIndex, words: list[str], k: int, flt: SearchFilter | None,
    mirror: MirrorFilter | None,
) -> list[tuple[int, float]] | None:
    """The index's ranking, or ``None`` where FTS5 must answer: no index yet, a query word FTS5 reads as
    several tokens (or none), or a deletion or text change (this transaction's) the index has not seen."""
    with index.lock:
        if not index.ready:
            return None
        terms = index.phrase_terms(words)
        if terms is None:
            return None
        top, tomb, changed = pending(db)
        if tomb > index.tomb_seq or changed > index.text_seq:
            return None
        resolved = mirror if mirror is not None else mirror_filter(db, flt)
        watermark = index.watermark
        if top <= watermark:
            ids, scores = index.top(terms, k, resolved)
            return list(zip(ids.tolist(), scores.tolist(), strict=True))
        rows, tokens = fts_totals(db)  # the table's totals, the tail's rows included, as FTS5 scores with
        extra = [int(db.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ? AND rowid > ?",
                                (phrases_query([w]), watermark)).fetchone()[0]) for w in words]
        ids, scores = index.top(terms, k, resolved, Stats(rows, tokens, extra))
    tail = _fts_ranking(db, words, k, flt, after=watermark)
    both = [*zip(ids.tolist(), scores.tolist(), strict=True), *tail]
    return sorted(both, key=lambda pair: (-pair[1], pair[0]))[:k]


def _fts_ranking(
    db: sqlite3.Connection, words: list[str], k: int, flt: SearchFilter | None, after: int | None = None
) -> list[tuple[int, float]]:
    """FTS5's top-``k`` (id, -rank) for the quoted ``words`` among memories passing ``flt`` (and newer than
    ``after``). Ties come by ascending rowid."""
    match = phrases_query(words)
    newer, extra = ("", []) if after is None else (" AND f.rowid > ?", [after])
    where, params = filter_sql(flt)
    if where == "TRUE":  # no condition (a filter of Nones): no join, the same ranking
        ranked = db.execute(
            f"SELECT f.rowid, f.rank FROM memories_fts f WHERE memories_fts MATCH ?{newer} ORDER BY f.rank LIMIT ?",
            [match, *extra, k],
        ).fetchall()
    else:
        ranked = db.execute(
            f"SELECT f.rowid, f.rank FROM memories_fts f JOIN memories m ON m.id = f.rowid"
            f" WHERE memories_fts MATCH ?{newer} AND {where} ORDER BY f.rank LIMIT ?",
            [match, *extra, *params, k],
        ).fetchall()
    return [(int(i), -float(rank)) for i, rank in ranked]


def _ranked_rows(
    db: sqlite3.Connection, ranked: list[tuple[int, float]], flt: SearchFilter | None
) -> list[ScoredMemory]:
    """The memories of ``ranked`` in its order (those still present and, with ``flt``, passing it in SQL)."""
    if not ranked:
        return []
    ids = [i for i, _ in ranked]
    where, params = filter_sql(flt, probe=True)
    rows = db.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ({placeholders(len(ids))}) AND {where}",
        [*ids, *params],
    )
    by_id = {m.id: m for m in map(memory_from_row, rows)}
    return [ScoredMemory(by_id[i], score) for i, score in ranked if i in by_id]
