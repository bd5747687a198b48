"""Vector and keyword search over the SQLite memories.

Vector search asks :class:`MemoryVectors` for candidates, adds the rows newer
than its watermark (written since the last sync, e.g. inside the current
clip transaction), then fetches the candidates from SQLite *with the filter
applied again* and ranks them by the exact float32 cosine. Keyword search is
FTS5 BM25 on an escaped query.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from m3agent.domain import MemoryKind, ScoredMemory, SearchFilter
from m3agent.store.memory_vectors import MemoryVectors
from m3agent.store.sqlite_rows import MEMORY_COLUMNS, filter_sql, fts_query, memory_from_row, placeholders
from m3agent.store.vectors import KIND_CODES, MirrorFilter, from_blob

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float32]

FETCH_BATCH = 500


def vector_search(
    db: sqlite3.Connection, index: MemoryVectors, query: FloatArray, k: int, flt: SearchFilter | None,
    mirror: MirrorFilter | None = None,
) -> list[ScoredMemory]:
    """Top-``k`` memories by exact cosine among the index candidates and the unsynced tail (``mirror``:
    ``mirror_filter(db, flt)`` when the caller has it)."""
    import numpy as np

    if k <= 0:
        return []
    want = max(2 * k, k + 16)
    ids, watermark = index.candidates(query, want, mirror if mirror is not None else mirror_filter(db, flt))
    tail = _tail_ids(db, watermark, query, want, flt)
    found = np.unique(np.concatenate([ids, tail]))
    return _exact_rows(db, [int(i) for i in found], query, flt, k)


def mirror_filter(db: sqlite3.Connection, flt: SearchFilter | None) -> MirrorFilter | None:
    """``flt`` in mirror terms: video row ids, kind codes, memory ids linked to the entities."""
    import numpy as np

    if flt is None or flt == SearchFilter():
        return None  # nothing restricts: the unfiltered path, the same results without a full mask
    codes = _video_codes(db, set(flt.video_ids or ()) | {v for v, _ in flt.exclude_clips})
    memory_ids = None
    if flt.entity_ids is not None:
        linked = db.execute(
            f"SELECT DISTINCT memory_id FROM edges WHERE entity_id IN ({placeholders(len(flt.entity_ids))})"
            " ORDER BY memory_id",
            list(flt.entity_ids),
        )
        memory_ids = np.fromiter((r[0] for r in linked), np.int64)
    return MirrorFilter(
        videos=None if flt.video_ids is None else tuple(codes[v] for v in flt.video_ids if v in codes),
        before_clip=flt.before_clip,
        start_s=flt.start_s,
        end_s=flt.end_s,
        kinds=None if flt.kinds is None else tuple(KIND_CODES[MemoryKind(k).value] for k in flt.kinds),
        memory_ids=memory_ids,
        exclude=tuple((codes[v], c) for v, c in sorted(flt.exclude_clips) if v in codes),
    )


def _video_codes(db: sqlite3.Connection, video_ids: set[str]) -> dict[str, int]:
    if not video_ids:
        return {}
    rows = db.execute(
        f"SELECT video_id, id FROM videos WHERE video_id IN ({placeholders(len(video_ids))})", sorted(video_ids)
    )
    return {str(v): int(i) for v, i in rows}


def _tail_ids(
    db: sqlite3.Connection, watermark: int, query: FloatArray, want: int, flt: SearchFilter | None
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
    vectors = np.frombuffer(b"".join(r[1] for r in rows), "<f4").reshape(len(rows), -1)
    scores = vectors @ query
    best = np.argsort(-scores, kind="stable")[:want]
    return np.asarray([rows[i][0] for i in best], np.int64)


def _exact_rows(
    db: sqlite3.Connection, ids: list[int], query: FloatArray, flt: SearchFilter | None, k: int
) -> list[ScoredMemory]:
    """The best ``k`` rows of ``ids`` that (still) pass ``flt`` by exact cosine, best first (ties by id).

    Scores from (id, vector) first, whole rows for the ``k`` winners only: building a memory costs more than
    scoring it, and most candidates lose."""
    import numpy as np

    where, params = filter_sql(flt, probe=True)
    scores: list[tuple[float, int]] = []
    for start in range(0, len(ids), FETCH_BATCH):
        batch = ids[start : start + FETCH_BATCH]
        rows = db.execute(
            f"SELECT m.id, m.embedding FROM memories m WHERE m.id IN ({placeholders(len(batch))}) AND {where}",
            [*batch, *params],
        )
        scores += [(-float(np.dot(from_blob(blob), query)), int(i)) for i, blob in rows]
    best = sorted(scores)[:k]
    if not best:
        return []
    rows = db.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ({placeholders(len(best))})", [i for _, i in best]
    )
    by_id = {m.id: m for m in map(memory_from_row, rows)}
    return [ScoredMemory(by_id[i], -negative) for negative, i in best if i in by_id]


def keyword_search(db: sqlite3.Connection, text: str, k: int, flt: SearchFilter | None) -> list[ScoredMemory]:
    """Top-``k`` by BM25 (score = -bm25, larger is better); free text is escaped, never parsed.

    Ranks on ids alone first (FTS5 sorts by ``rank`` without touching the rows), then
    fetches the ``k`` winners: carrying whole rows through the sort costs 10x at 10^6.
    """
    match = fts_query(text)
    if not match or k <= 0:
        return []
    where, params = filter_sql(flt)
    if where == "TRUE":  # no condition (a filter of Nones): no join, the same ranking
        ranked = db.execute(
            "SELECT rowid, rank FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?", (match, k)
        ).fetchall()
    else:
        ranked = db.execute(
            f"SELECT f.rowid, f.rank FROM memories_fts f JOIN memories m ON m.id = f.rowid"
            f" WHERE memories_fts MATCH ? AND {where} ORDER BY f.rank LIMIT ?",
            [match, *params, k],
        ).fetchall()
    if not ranked:
        return []
    ids = [r[0] for r in ranked]
    rows = db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ({placeholders(len(ids))})", ids)
    by_id = {m.id: m for m in map(memory_from_row, rows)}
    return [ScoredMemory(by_id[i], -float(rank)) for i, rank in ranked if i in by_id]
