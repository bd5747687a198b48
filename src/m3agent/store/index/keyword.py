"""The derived keyword index of a SQLite memory: FTS5's BM25 over in-memory posting arrays.

FTS5 (``memories_fts``) stays the keyword index of the file; this one answers the same question faster.
FTS5 scores every row that holds any query word before ``ORDER BY rank LIMIT k`` (about 7 µs a row: 17,000
rows for "old photo" at 10^5 memories); here the postings of the query words are gathered from numpy arrays,
scored by the same formula in one vectorised pass, summed per memory (``np.bincount``) and the best ``k``
picked (``np.partition``): the same top-``k`` and the same scores, bit for bit, ties by ascending id as FTS5
returns them.

Design (the consistency model of :mod:`m3agent.store.index.memory_vectors`):

- SQLite rows are the truth. The index covers memories with ``id <= watermark`` as their text was at its
  last sync, minus the tombstones with ``seq <= tomb_seq``, with the text changes logged in
  ``memory_text_changes`` up to ``text_seq`` read again (a text change retires the memory's old document and
  appends the new text as a new one). Memory ids are never reused, so rows above the watermark are new.
- Tokens are FTS5's: ``unicode61 remove_diacritics 2 tokenchars '_'`` (:mod:`.keyword_postings`). An ASCII text is
  split in Python (ASCII letters, digits and ``_`` are its token characters, folded to lower case); any other
  text is tokenized by SQLite's own tokenizer (an in-memory FTS5 table and its ``fts5vocab`` instances), so no
  Unicode rule is re-implemented. After a build the index's row and token totals are compared with FTS5's
  (``memories_fts_data`` record 1): a mismatch disables it for the file (searches stay on FTS5).
- BM25 is FTS5's ``bm25()``: k1 = 1.2, b = 0.75, IDF ``log((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, each
  quoted query word a phrase, a memory's score the sum over phrases in query order (``np.bincount`` adds in
  that order, as FTS5's loop does).
- Postings live in segments (terms sorted, per term the document positions and term frequencies); a sync adds
  a segment for the new rows and merges neighbours of similar size (few segments, each posting moved
  O(log N) times). Retired documents stay in the segments, masked by ``alive``, and leave them when their
  segments merge or the index compacts.
- One index per file and process (:func:`shared_keywords`), shared by every store of the process on that
  file; a lock serialises its syncs and searches. It is never built inside a search: while it is missing
  (the first search of a process, a file below :data:`KEYWORD_MIN_ROWS`), searches run on FTS5 and a
  background thread builds it from one read snapshot through its own connection, then swaps it in; the next
  sync catches it up.

Callers (:func:`m3agent.store.sqlite.search.keyword_search`) use it only when it covers what the connection
sees: rows newer than the watermark (the current transaction's) are merged from an FTS5 query restricted to
them, scored with FTS5's current totals; a deletion or text change not yet synced sends the search to FTS5.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.store.index.per_file import PerFile
from m3agent.store.index.postings import (
    Segment,
    Stats,
    Tokenizer,
    fts_totals,
    merged,
    segment_of,
    tokenized,
)
from m3agent.store.index.vectors import MirrorFilter, member_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6
KEYWORD_MIN_ROWS = 2_000  # below, FTS5 ranks in about a millisecond (10^3 rows: 1.0 ms p50, the index 0.45): no build
READ_BATCH = 20_000
MERGE_RATIO = 2  # a segment is merged into its older neighbour once that one holds at most this many times more

_ROWS_SQL = (
    "SELECT m.id, v.id, m.clip_index, m.kind = 'semantic', m.start_s, m.end_s, m.text "
    "FROM memories m JOIN videos v ON v.video_id = m.video_id"
)
_PENDING_SQL = (
    "SELECT (SELECT max(id) FROM memories), (SELECT max(seq) FROM memory_tombstones),"
    " (SELECT max(seq) FROM memory_text_changes)"
)


_DOC_COLUMNS = {
    "ids": "int64", "length": "int32", "alive": "bool", "video": "int64", "clip": "int32", "kind": "int8",
    "start": "float64", "end": "float64",
}


class KeywordIndex:
    """Posting arrays and document columns over the memories of one store file (see :func:`shared_keywords`)."""

    def __init__(self, path: Path | None = None) -> None:
        import numpy as np

        self.path = path
        self.lock = threading.RLock()
        self.tokenizer = Tokenizer()
        self.ready = False  # built (or caught up) and checked against FTS5
        self.disabled = False  # the file cannot be indexed here (no change log, or FTS5 disagrees)
        self.watermark = 0
        self.tomb_seq = 0
        self.text_seq = 0
        self.terms: dict[str, int] = {}
        self.segments: list[Segment] = []
        self.size = 0
        self.n_dead = 0
        self.total_tokens = 0
        self._cols: dict[str, Any] = {name: np.empty(0, dtype) for name, dtype in _DOC_COLUMNS.items()}
        self._builder: threading.Thread | None = None
        self._epoch = 0
        self._logged = False  # the file has memory_text_changes (migration 10)

    # document columns --------------------------------------------------------
    def col(self, name: str) -> Any:
        return self._cols[name][: self.size]

    @property
    def n_alive(self) -> int:
        return self.size - self.n_dead

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (postings and document columns; the term dictionary not counted)."""
        cols = sum(int(c.nbytes) for c in self._cols.values())
        return cols + sum(int(s.offsets.nbytes + s.docs.nbytes + s.tfs.nbytes) for s in self.segments)

    def _reserve(self, needed: int) -> None:
        import numpy as np

        capacity = len(self._cols["ids"])
        if needed <= capacity:
            return
        new_capacity = max(needed, capacity + capacity // 2, 1024)
        for name, old in self._cols.items():
            grown = np.empty(new_capacity, dtype=old.dtype)
            grown[: self.size] = old[: self.size]
            self._cols[name] = grown

    # syncing -----------------------------------------------------------------
    def sync(self, conn: sqlite3.Connection, *, background: bool = True) -> None:
        """Catch up with committed rows (call outside any transaction of ``conn``); start the build in the
        background when the index is missing and the memory big enough."""
        with self.lock:
            if self.disabled:
                return
            conn.execute("BEGIN")
            try:
                if not self._logged:
                    self._logged = _has_change_log(conn)
                    self.disabled = not self._logged
                    if self.disabled:
                        return
                if self.ready and self._replaced(conn):
                    self._reset()
                if self.ready:
                    self._catch_up(conn)
                    start = False
                else:
                    top = conn.execute("SELECT max(id) FROM memories").fetchone()[0]
                    start = int(top or 0) >= KEYWORD_MIN_ROWS
            finally:
                conn.execute("COMMIT")
            if start and background:
                self._start_build()

    def _replaced(self, conn: sqlite3.Connection) -> bool:
        """The file holds fewer rows than indexed (restored from a copy, or rebuilt): start over."""
        top = conn.execute("SELECT max(id) FROM memories").fetchone()[0]
        return self.watermark > int(top or 0)

    def _reset(self) -> None:
        import numpy as np

        self._epoch += 1  # a build from the old rows is not swapped in
        self.ready = False
        self.watermark = self.tomb_seq = self.text_seq = 0
        self.terms, self.segments = {}, []
        self.size = self.n_dead = self.total_tokens = 0
        self._cols = {name: np.empty(0, dtype) for name, dtype in _DOC_COLUMNS.items()}

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        """Rows above the watermark, then logged text changes, then tombstones (one read transaction)."""
        import numpy as np

        cursor = conn.execute(f"{_ROWS_SQL} WHERE m.id > ? ORDER BY m.id", (self.watermark,))
        while batch := cursor.fetchmany(READ_BATCH):
            self._append(batch)
            self.watermark = int(batch[-1][0])
        changed = conn.execute(
            "SELECT seq, memory_id FROM memory_text_changes WHERE seq > ? ORDER BY seq", (self.text_seq,)
        ).fetchall()
        if changed:
            self.text_seq = int(changed[-1][0])
            ids = sorted({int(r[1]) for r in changed if int(r[1]) <= self.watermark})
            self._retire(np.asarray(ids, np.int64))
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                rows = conn.execute(
                    f"{_ROWS_SQL} WHERE m.id IN ({', '.join('?' * len(part))}) ORDER BY m.id", part
                ).fetchall()
                if rows:
                    self._append(rows)
        dead = conn.execute(
            "SELECT seq, memory_id FROM memory_tombstones WHERE seq > ? ORDER BY seq", (self.tomb_seq,)
        ).fetchall()
        if dead:
            self.tomb_seq = int(dead[-1][0])
            self._retire(np.asarray([r[1] for r in dead], np.int64))
        if self.n_dead > max(1024, self.size // 4):
            self.compact()

    def _append(self, rows: list[tuple[Any, ...]]) -> None:
        """Add documents (rows of :data:`_ROWS_SQL`) as one new segment, then merge similar neighbours."""
        docs = tokenized(rows, self.tokenizer, self.terms, self.size)
        n = len(rows)
        self._reserve(self.size + n)
        for name, values in docs.columns.items():
            self._cols[name][self.size : self.size + n] = values
        self.size += n
        self.total_tokens += int(docs.columns["length"].sum())
        self.segments.append(segment_of(docs.terms, docs.docs, docs.tfs, len(self.terms)))
        while len(self.segments) > 1 and self.segments[-2].size <= MERGE_RATIO * self.segments[-1].size:
            newer = self.segments.pop()
            self.segments[-1] = merged(self.segments[-1], newer, self.col("alive"))

    def _retire(self, ids: IntArray) -> None:
        """Documents of memories ``ids`` no longer count (deleted, or their text is read again)."""
        import numpy as np

        if not len(ids) or not self.size:
            return
        rows = np.flatnonzero(np.isin(self.col("ids"), ids) & self.col("alive"))
        self._cols["alive"][rows] = False
        self.n_dead += len(rows)
        self.total_tokens -= int(self.col("length")[rows].sum())

    def compact(self) -> None:
        """Drop retired documents: renumber the alive ones and merge every segment into one."""
        import numpy as np

        alive = self.col("alive")
        new_pos = np.cumsum(alive) - 1
        terms, docs, tfs = [], [], []
        for segment in self.segments:
            t, d, f = segment.triples()
            keep = alive[d]
            terms.append(t[keep])
            docs.append(new_pos[d[keep]])
            tfs.append(f[keep])
        all_terms = np.concatenate(terms) if terms else np.empty(0, np.int32)
        order = np.argsort(all_terms, kind="stable")  # segments in document order: docs stay ascending per term
        all_docs = np.concatenate(docs) if docs else np.empty(0, np.int64)
        all_tfs = np.concatenate(tfs) if tfs else np.empty(0, np.uint16)
        self.segments = [segment_of(all_terms[order], all_docs[order], all_tfs[order], len(self.terms))]
        for name in _DOC_COLUMNS:
            self._cols[name] = self._cols[name][: self.size][alive].copy()
        self.size = len(self._cols["ids"])
        self.n_dead = 0

    # building ----------------------------------------------------------------
    def _start_build(self) -> None:
        if self.building or self.path is None:
            return
        self._builder = threading.Thread(target=self._build, args=(self._epoch,), name="m3agent-keyword-index",
                                         daemon=True)
        self._builder.start()

    @property
    def building(self) -> bool:
        return self._builder is not None and self._builder.is_alive()

    def wait(self) -> None:
        """Until a running background build has swapped its index in."""
        builder = self._builder
        if builder is not None:
            builder.join()

    def build(self, conn: sqlite3.Connection) -> None:
        """Build here from ``conn`` (outside any transaction of it) and swap in; for tests and maintenance."""
        with self.lock:
            epoch = self._epoch
        built = _Build.read(conn, self.tokenizer)
        self._swap_in(built, epoch)

    def _build(self, epoch: int) -> None:
        """The background build: one read snapshot through this thread's own connection."""
        from m3agent.store.sqlite.schema import connect

        assert self.path is not None
        try:
            conn, _ = connect(self.path, readonly=True, create=False)
        except Exception as exc:
            log.warning("could not open %s to build the keyword index: %s", self.path, exc)
            return
        try:
            built = _Build.read(conn, Tokenizer())
            self._swap_in(built, epoch)
        except Exception:  # only an optimisation: searches stay on FTS5 without it (not tried again)
            log.exception("could not build the keyword index")
            with self.lock:
                self.disabled = True
        finally:
            conn.close()

    def _swap_in(self, built: _Build, epoch: int) -> None:
        with self.lock:
            if epoch != self._epoch or self.ready:
                return
            if built.fts_totals != (built.index.n_alive, built.index.total_tokens):
                log.warning("keyword index disabled: FTS5 counts %s rows/tokens, the index %s", built.fts_totals,
                            (built.index.n_alive, built.index.total_tokens))
                self.disabled = True
                return
            index = built.index
            self.terms, self.segments, self._cols = index.terms, index.segments, index._cols
            self.size, self.n_dead, self.total_tokens = index.size, index.n_dead, index.total_tokens
            self.watermark, self.tomb_seq, self.text_seq = built.watermark, built.tomb_seq, built.text_seq
            self.ready = True
        log.info("keyword index built over %d rows (%.1f MB)", self.n_alive, self.nbytes / 1e6)

    # searching ---------------------------------------------------------------
    def phrase_terms(self, words: Sequence[str]) -> list[str] | None:
        """The one FTS5 token of each quoted query word, or ``None`` when one is not exactly one token (a phrase
        of several tokens, or none: FTS5 answers those)."""
        found = self.tokenizer.tokens(list(words))
        if any(len(tokens) != 1 for tokens in found):
            return None
        return [tokens[0] for tokens in found]

    def top(self, terms: Sequence[str], k: int, flt: MirrorFilter | None,
            stats: Stats | None = None) -> tuple[IntArray, FloatArray]:
        """The best ``k`` memories for the phrases ``terms`` (one token each) that pass ``flt``, by FTS5's
        bm25 (larger is better), best first, ties by ascending id: memory ids and scores. ``stats``: the
        table's totals when they are not the index's (rows outside it)."""
        import numpy as np

        rows, tokens = (stats.rows, stats.tokens) if stats is not None else (self.n_alive, self.total_tokens)
        if k <= 0 or rows <= 0 or not self.size:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        avgdl = float(tokens) / float(rows)
        length = self.col("length")
        docs_parts, score_parts = [], []
        for i, term in enumerate(terms):
            docs, tfs = self._postings(self.terms.get(term))
            if not len(docs):
                continue
            hits = len(docs) + (stats.extra_hits[i] if stats is not None and stats.extra_hits else 0)
            idf = math.log((rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = IDF_FLOOR
            f = tfs.astype(np.float64)
            d = length[docs].astype(np.float64)
            docs_parts.append(docs)
            score_parts.append(idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl))))
        if not docs_parts:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        scores = np.bincount(np.concatenate(docs_parts), weights=np.concatenate(score_parts))
        found = np.flatnonzero(scores)
        if flt is not None:
            found = found[self._passes(found, flt)]
        return self._best(found, scores[found], k)

    def _postings(self, term: int | None) -> tuple[Any, Any]:
        """Alive postings of ``term`` (document positions, frequencies) across the segments."""
        import numpy as np

        if term is None:
            return np.empty(0, np.int32), np.empty(0, np.uint16)
        parts = [s.postings(term) for s in self.segments]
        parts = [p for p in parts if len(p[0])]
        if not parts:
            return np.empty(0, np.int32), np.empty(0, np.uint16)
        docs = parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
        tfs = parts[0][1] if len(parts) == 1 else np.concatenate([p[1] for p in parts])
        if self.n_dead:
            keep = self.col("alive")[docs]
            docs, tfs = docs[keep], tfs[keep]
        return docs, tfs

    def _passes(self, rows: Any, flt: MirrorFilter) -> BoolArray:
        """Which document positions ``rows`` pass ``flt`` (:meth:`VectorMirror.mask` on exact columns)."""
        import numpy as np

        keep = np.ones(len(rows), np.bool_)
        video = self.col("video")[rows]
        if flt.videos is not None:
            keep &= np.isin(video, np.asarray(flt.videos, np.int64))
        if flt.before_clip is not None:
            keep &= self.col("clip")[rows] <= flt.before_clip
        if flt.start_s is not None:
            keep &= self.col("end")[rows] >= flt.start_s
        if flt.end_s is not None:
            keep &= self.col("start")[rows] <= flt.end_s
        if flt.kinds is not None:
            keep &= np.isin(self.col("kind")[rows], np.asarray(flt.kinds, np.int8))
        if flt.memory_ids is not None:
            keep &= member_of(self.col("ids")[rows], np.asarray(flt.memory_ids, np.int64))
        if flt.exclude:
            clip = self.col("clip")[rows]
            for code, index in flt.exclude:
                keep &= ~((video == code) & (clip == index))
        return keep

    def _best(self, rows: Any, scores: Any, k: int) -> tuple[IntArray, FloatArray]:
        import numpy as np

        if len(rows) > k:
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth  # every tie of the k-th score: the smallest ids win below
            rows, scores = rows[keep], scores[keep]
        ids = self.col("ids")[rows]
        order = np.lexsort((ids, -scores))[:k]
        return ids[order], scores[order]


@dataclass
class _Build:
    """An index read from one snapshot, with what it covers and FTS5's totals in that snapshot."""

    index: KeywordIndex
    watermark: int
    tomb_seq: int
    text_seq: int
    fts_totals: tuple[int, int]

    @classmethod
    def read(cls, conn: sqlite3.Connection, tokenizer: Tokenizer) -> _Build:
        index = KeywordIndex()
        index.tokenizer = tokenizer
        conn.execute("BEGIN")
        try:
            top, tomb, text = conn.execute(_PENDING_SQL).fetchone()
            watermark = int(top or 0)
            cursor = conn.execute(f"{_ROWS_SQL} WHERE m.id <= ? ORDER BY m.id", (watermark,))
            while batch := cursor.fetchmany(READ_BATCH):
                index._append(batch)
            totals = fts_totals(conn)
        finally:
            conn.execute("COMMIT")
        if len(index.segments) > 1:
            index.compact()
        return cls(index, watermark, int(tomb or 0), int(text or 0), totals)


def _has_change_log(conn: sqlite3.Connection) -> bool:
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_text_changes'"
    ).fetchone() is not None


def pending(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """The newest memory id, tombstone and text change the connection sees (0 for none)."""
    top, tomb, text = conn.execute(_PENDING_SQL).fetchone()
    return int(top or 0), int(tomb or 0), int(text or 0)


_SHARED: PerFile[KeywordIndex] = PerFile()


def shared_keywords(path: Path) -> KeywordIndex:
    """The process's keyword index of the memories in ``path`` (created on first use, freed when no store holds
    it). Keyed by the file's inode too: a new file at the same path gets a new index."""
    return _SHARED.get(path, None, lambda: KeywordIndex(path))

