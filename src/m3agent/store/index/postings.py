"""The parts of the keyword index that hold no state of a store: FTS5's tokens, posting segments, FTS5's totals.

:class:`Tokenizer` gives FTS5's tokens of texts (``unicode61 remove_diacritics 2 tokenchars '_'``: ASCII
texts split in Python, any other text by SQLite's own tokenizer); :class:`Segment` holds the postings of
consecutive documents, :func:`merged` joins two; :func:`tokenized` turns memory rows into document columns
and postings; :func:`fts_totals` reads the row and token totals FTS5's ``bm25()`` uses. The index that
keeps them in step with a store file is :mod:`m3agent.store.index.keyword`.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TOKENIZE = "unicode61 remove_diacritics 2 tokenchars '_'"  # memories_fts's tokenizer (0001_init.sql)
_ASCII_TOKEN = re.compile(r"[a-z0-9_]+")


class Tokenizer:
    """FTS5's tokens of texts (see the module docstring); one in-memory SQLite connection, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens of each text, in order for ASCII texts (only the multiset matters)."""
        out: list[list[str]] = []
        other: list[int] = []
        for i, text in enumerate(texts):
            if text.isascii():
                out.append(_ASCII_TOKEN.findall(text.lower()))
            else:
                out.append([])
                other.append(i)
        if other:
            found = self._sqlite_tokens([texts[i] for i in other])
            for i, tokens in zip(other, found, strict=True):
                out[i] = tokens
        return out

    def _sqlite_tokens(self, texts: list[str]) -> list[list[str]]:
        with self._lock:
            db = self._connection()
            db.execute("BEGIN")
            try:
                db.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(texts))
                found: list[list[str]] = [[] for _ in texts]
                for doc, term in db.execute("SELECT doc, term FROM v"):
                    found[doc].append(term)
                db.execute("DELETE FROM t")
            finally:
                db.execute("COMMIT")
        return found

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            db.execute(f'CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = "{TOKENIZE}")')
            db.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, instance)")
            self._db = db
        return self._db


@dataclass
class Segment:
    """Postings of consecutive document positions: for term ``t``, ``docs[offsets[t]:offsets[t + 1]]``
    (ascending) and their term frequencies; terms past ``len(offsets) - 1`` have none here."""

    offsets: Any  # int64, one more than the terms it knows
    docs: Any  # int32 document positions
    tfs: Any  # uint16 (int32 when a frequency does not fit)

    @property
    def size(self) -> int:
        return len(self.docs)

    def postings(self, term: int) -> tuple[Any, Any]:
        if term + 1 >= len(self.offsets):
            return self.docs[:0], self.tfs[:0]
        start, stop = self.offsets[term], self.offsets[term + 1]
        return self.docs[start:stop], self.tfs[start:stop]

    def triples(self) -> tuple[Any, Any, Any]:
        """(term, doc, tf) of every posting, sorted by term then doc."""
        import numpy as np

        terms = np.repeat(np.arange(len(self.offsets) - 1, dtype=np.int32), np.diff(self.offsets))
        return terms, self.docs, self.tfs


def segment_of(terms: Any, docs: Any, tfs: Any, n_terms: int) -> Segment:
    """A segment from (term, doc, tf) triples sorted by term then doc."""
    import numpy as np

    counts = np.bincount(terms, minlength=n_terms) if len(terms) else np.zeros(n_terms, np.int64)
    offsets = np.zeros(n_terms + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    small = not len(tfs) or int(tfs.max()) <= np.iinfo(np.uint16).max
    return Segment(offsets, docs.astype(np.int32), tfs.astype(np.uint16 if small else np.int32))


def merged(older: Segment, newer: Segment, alive: Any) -> Segment:
    """One segment holding the alive postings of two (``older``'s documents all before ``newer``'s)."""
    import numpy as np

    parts = [older.triples(), newer.triples()]
    terms, docs, tfs = (np.concatenate([p[i] for p in parts]) for i in range(3))
    keep = alive[docs]
    terms, docs, tfs = terms[keep], docs[keep], tfs[keep]
    order = np.argsort(terms, kind="stable")  # within a term: the older segment's docs first, both ascending
    n_terms = max(len(older.offsets), len(newer.offsets)) - 1
    return segment_of(terms[order], docs[order], tfs[order], n_terms)


@dataclass
class Stats:
    """The totals BM25 is computed with: rows and tokens of the table, and per query phrase the rows outside
    the index that hold it (the unsynced tail's)."""

    rows: int
    tokens: int
    extra_hits: Sequence[int] | None = None


@dataclass
class Documents:
    """The document columns of new rows and their postings as (term, doc, tf) triples."""

    columns: dict[str, Any]
    terms: Any
    docs: Any
    tfs: Any


def tokenized(rows: list[tuple[Any, ...]], tokenizer: Tokenizer, vocabulary: dict[str, int],
               first: int) -> Documents:
    """Document columns and (term, doc, tf) triples, sorted by term then doc, of memory rows (id, video, clip,
    semantic, start, end, text) numbered from position ``first``; new terms get the next ids of ``vocabulary``."""
    import numpy as np

    cols = list(zip(*rows, strict=True))
    token_lists = tokenizer.tokens(cols[6])
    lengths = np.fromiter((len(t) for t in token_lists), np.int32, len(token_lists))
    flat = [t for tokens in token_lists for t in tokens]
    term_ids = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in flat), np.int64, len(flat))
    doc_of = np.repeat(np.arange(first, first + len(rows), dtype=np.int64), lengths)
    keys, tfs = np.unique((term_ids << 32) | doc_of, return_counts=True)
    return Documents(
        columns={
            "ids": np.asarray(cols[0], np.int64), "length": lengths, "alive": True,
            "video": np.asarray(cols[1], np.int64), "clip": np.asarray(cols[2], np.int32),
            "kind": np.asarray(cols[3], np.int8), "start": np.asarray(cols[4], np.float64),
            "end": np.asarray(cols[5], np.float64),
        },
        terms=(keys >> 32).astype(np.int32), docs=(keys & 0xFFFFFFFF).astype(np.int64), tfs=tfs,
    )


def fts_totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """FTS5's row count and token total of ``memories_fts`` (its averages record, ``memories_fts_data`` id 1:
    two varints), the N and the length total its bm25 uses."""
    row = conn.execute("SELECT block FROM memories_fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    rows, at = _varint(row[0], 0)
    tokens, _ = _varint(row[0], at)
    return rows, tokens


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at ``at`` (big-endian groups of 7 bits, the 9th byte whole) and the offset after it."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9
