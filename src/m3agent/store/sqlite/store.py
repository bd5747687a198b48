"""The embedded default memory store: one SQLite file holding many videos.

``open_sqlite(location)`` opens (and creates or migrates) the file of a
:class:`~m3agent.store.location.StoreLocation` (specs are parsed there:
``sqlite:///relative.db``, ``sqlite:////absolute/path.db``, plain paths).
See :mod:`m3agent.store.protocol` for the contract, ``sqlite_migrations/``
for the schema and :mod:`m3agent.store.sql.store` for the methods both stores share.

What is SQLite's own: every public method holds the store's lock (one
connection, shared by threads) and turns SQLite failures into
:class:`m3agent.errors.StoreError` subclasses; writes are transactions (a
savepoint inside one), a clip's writes are one transaction; video writer locks
are ``flock`` files (:mod:`m3agent.store.sqlite.locks`). Vector search runs on
an in-process index of the memory rows (:mod:`m3agent.store.index.memory_vectors`),
keyword search on FTS5 BM25, whose segments are merged after every deletion so
deleted text leaves the file, computed over an in-process posting index
(:mod:`m3agent.store.index.keyword`) once that is built.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from m3agent.domain import ScoredMemory, SearchFilter
from m3agent.errors import ConfigError, StoreError
from m3agent.store.index.keyword import KeywordIndex, shared_keywords
from m3agent.store.index.memory_vectors import MemoryVectors, shared_vectors
from m3agent.store.sql.base import guarded, link_confidence_of
from m3agent.store.sql.dialect import Dialect
from m3agent.store.sql.store import TABLES, SQLStore
from m3agent.store.sqlite import search as sqlite_search
from m3agent.store.sqlite.errors import translated
from m3agent.store.sqlite.locks import video_lock
from m3agent.store.sqlite.schema import connect, schema_version
from m3agent.store.sqlite.writer import SQLiteClipWriter, SQLiteConsolidationWriter

LINKED_MEMO = 64  # entity sets whose linked memory ids a store keeps while nothing commits

if TYPE_CHECKING:
    from collections.abc import Callable

    from m3agent.domain import Vector
    from m3agent.store.index.vectors import IntArray, MirrorFilter
    from m3agent.store.location import StoreLocation
    from m3agent.store.protocol import ClipWriter, MemoryStore

    def _conforms(store: SQLiteStore, writer: SQLiteClipWriter) -> tuple[MemoryStore, ClipWriter]:
        """Lets mypy check both classes against the protocols."""
        return store, writer


def open_sqlite(location: StoreLocation, *, readonly: bool = False, create: bool = True,
                link_confidence: float | None = None, pool_size: int | None = None) -> SQLiteStore:
    """Open the SQLite memory at ``location.path`` (created and migrated unless told otherwise).

    ``link_confidence`` is ``settings.perception.link_accept_confidence`` (its default when ``None``).
    ``pool_size`` is ignored: a SQLite store is one connection.
    """
    accept = link_confidence_of(link_confidence)
    path = location.path
    if path is None:
        raise ConfigError(f"memory store {location} is not a SQLite file", hint="open it with open_store")
    conn, readonly = connect(path, readonly=readonly, create=create)
    return SQLiteStore(conn, path, readonly=readonly, link_confidence=accept)


class SQLiteStore(SQLStore[sqlite3.Connection]):
    """A :class:`~m3agent.store.protocol.MemoryStore` in one SQLite file."""

    dialect = Dialect.SQLITE
    _writers = (SQLiteClipWriter, SQLiteConsolidationWriter)
    _counted = (*TABLES, "memory_tombstones")

    def __init__(self, conn: sqlite3.Connection, path: Path, *, readonly: bool = False,
                 link_confidence: float) -> None:
        self.path = path.resolve()
        super().__init__(f"sqlite:///{self.path}", str(self.path), readonly=readonly, link_confidence=link_confidence)
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.RLock()
        self._savepoints = itertools.count()
        self._vectors: MemoryVectors | None = None
        self._vectors_key: tuple[str, int] | None = None
        self._keywords: KeywordIndex | None = None
        self._mirror_memo: tuple[tuple[object, ...], MirrorFilter | None] | None = None
        self._linked_memo: tuple[tuple[object, ...], dict[tuple[int, ...], IntArray]] = ((), {})

    # connection ------------------------------------------------------------
    def close(self) -> None:
        """Close the file's connection (idempotent); later calls raise :class:`StoreError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._vectors = None
                self._keywords = None

    def _require_open(self) -> None:
        if self._conn is None:
            raise StoreError(f"the memory store {self.path} is closed")

    @property
    def _db(self) -> sqlite3.Connection:
        self._require_open()
        assert self._conn is not None
        return self._conn

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """The store lock held, a closed store refused, SQLite errors translated."""
        with self._lock:
            self._require_open()
            with translated(str(self.path)):
                yield

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        yield self._db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (a savepoint when one is already open on this connection)."""
        self._require_writable()
        db = self._db
        if db.in_transaction:
            name = f"sp{next(self._savepoints)}"
            db.execute(f"SAVEPOINT {name}")
            try:
                yield db
            except BaseException:
                db.execute(f"ROLLBACK TO {name}")
                db.execute(f"RELEASE {name}")
                raise
            db.execute(f"RELEASE {name}")
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @contextmanager
    def _unit(self) -> Iterator[sqlite3.Connection]:
        with self._guard(), self._tx() as db:
            yield db

    def _schema_version(self, db: sqlite3.Connection) -> int:
        return schema_version(db)

    # locks and deletions ---------------------------------------------------
    @contextmanager
    def video_lock(self, video_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        """The writer lock of ``video_id`` (see :mod:`m3agent.store.sqlite.locks`); the store lock is not held."""
        with self._lock:
            self._require_open()
            self._require_writable()
        with video_lock(self.path, video_id, wait=wait, on_wait=on_wait):
            yield

    def delete_video(self, video_id: str) -> None:
        """Delete ``video_id``; refused (:class:`StoreError`) while another process ingests it."""
        self.get_video(video_id)  # a missing video is reported before any lock file is made for it
        self._require_writable()
        with video_lock(self.path, video_id, wait=False):
            super().delete_video(video_id)

    def _after_delete(self) -> None:
        """Merge the FTS segments so deleted text leaves the file (not only the index), then checkpoint the WAL
        into the file (where ``secure_delete`` has zeroed it) and empty the WAL, as closing the last connection
        would: other connections (a server's read pool) keep the WAL alive otherwise."""
        if not self._db.in_transaction:
            self._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # search ----------------------------------------------------------------
    def _model_recorded(self, db: sqlite3.Connection, dim: int) -> None:
        """The vector index of another model is dropped, rebuilt from the rows on the next search (the
        process's shared index is keyed by the model, so the old one is not found again)."""
        db.execute("DELETE FROM vector_snapshots")
        self._vectors = None

    def _nearest(self, queries: Vector, k: int, flt: SearchFilter | None) -> list[ScoredMemory]:
        index = self._synced_vectors()
        assert index is not None  # the caller found a model recorded
        return sqlite_search.vector_search(self._db, index, queries, k, flt, self._mirror_filter(flt))

    def _mirror_filter(self, flt: SearchFilter | None) -> MirrorFilter | None:
        """``flt`` in the index's terms, kept while nothing commits: a question's alias variants search with
        one filter, and resolving a person's filter lists every memory linked to them (those lists are kept
        for the filters to come: a question's rounds, the next question about them). ``data_version`` moves
        with other connections' commits, ``total_changes`` with this one's writes."""
        db = self._db
        state = (db.execute("PRAGMA data_version").fetchone()[0], db.total_changes, db.in_transaction)
        key = (flt, *state)
        if self._mirror_memo is not None and self._mirror_memo[0] == key:
            return self._mirror_memo[1]
        linked = None
        if flt is not None and flt.entity_ids is not None:
            if self._linked_memo[0] != state:
                self._linked_memo = (state, {})
            known = self._linked_memo[1]
            linked = known.get(flt.entity_ids)
            if linked is None:
                if len(known) >= LINKED_MEMO:
                    known.clear()
                linked = known[flt.entity_ids] = sqlite_search.linked_memory_ids(db, flt.entity_ids)
        resolved = sqlite_search.mirror_filter(db, flt, linked)
        self._mirror_memo = (key, resolved)
        return resolved

    def _synced_vectors(self) -> MemoryVectors | None:
        """The vector index, caught up with the committed rows (not while a transaction is open)."""
        model = self.embedding_model()
        if model is None:
            return None
        if self._vectors is None or self._vectors_key != model:
            self._vectors, self._vectors_key = shared_vectors(self.path, *model), model
        if not self._db.in_transaction:
            self._vectors.sync(self._db, writable=not self.readonly)
        return self._vectors

    @guarded
    def keyword_search(self, query: str, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` by FTS5 BM25 over the words of ``query``; free text is escaped, never parsed. Computed by
        the process's keyword index of the file once it is built (the same ranking), by FTS5 until then."""
        index = self._synced_keywords()
        mirror = self._mirror_filter(flt) if index.ready else None
        return sqlite_search.keyword_search(self._db, query, k, flt, index, mirror)

    def _synced_keywords(self) -> KeywordIndex:
        """The keyword index, caught up with the committed rows (not while a transaction is open); its build
        starts in the background on the first call for a big enough memory."""
        if self._keywords is None:
            self._keywords = shared_keywords(self.path)
        if not self._db.in_transaction:
            self._keywords.sync(self._db)
        return self._keywords

    @guarded
    def start_keyword_index(self) -> None:
        """Start building the process's keyword index of the file in the background, as the first keyword search
        would (FTS5 answers until it is built; a server calls this at start so its first searches do not wait)."""
        self._synced_keywords()

    def indexes_building(self) -> tuple[str, ...]:
        """The process's search indexes of the file still being built in the background (``"vector graph"``,
        ``"keyword index"``): searches answer meanwhile, exactly over the vectors and through FTS5, only slower."""
        model = self.embedding_model()
        vectors = self._vectors if self._vectors is not None or model is None else shared_vectors(self.path, *model)
        keywords = self._keywords if self._keywords is not None else shared_keywords(self.path)
        building = [("vector graph", vectors), ("keyword index", keywords)]
        return tuple(name for name, index in building if index is not None and index.building)

    # maintenance -----------------------------------------------------------
    @guarded
    def build_vector_index(self, *, wait: bool = True) -> int:
        """Catch the vector index up with the rows, build its graph when the memory is big enough and save
        it; returns the rows it covers. ``wait=False`` returns once the rows are loaded, while the graph is
        built (and, for a writable store, saved) in the background; searches meanwhile are exact."""
        model = self.embedding_model()
        if model is None:
            return 0
        if self._vectors is None or self._vectors_key != model:
            self._vectors, self._vectors_key = shared_vectors(self.path, *model), model
        if self._db.in_transaction:
            return self._vectors.mirror.n_alive
        return self._vectors.build(self._db, writable=not self.readonly, wait=wait)

    @guarded
    def compact(self) -> None:
        """Rewrite derived data without deleted residue, then VACUUM the file.

        Re-saves the vector snapshot (or drops it for small stores), forgets
        tombstones and text changes the process's indexes cover, merges the FTS
        index and reclaims free pages.
        """
        self._require_writable()
        index = self._synced_vectors()
        if index is not None:
            index.wait()  # a graph being built is saved with the rest
        keywords = self._keywords if self._keywords is not None else shared_keywords(self.path)
        keywords.wait()  # a build from an older snapshot catches up from the logs: keep what it has not read
        if keywords.ready:
            keywords.sync(self._db, background=False)
        db = self._db
        with self._tx():
            if index is None or index.ann is None:
                db.execute("DELETE FROM vector_snapshots")
        if index is not None and index.ann is not None:
            index.persist(db)
        covered = index.tomb_seq if index is not None else 1 << 62
        texts = 1 << 62
        if keywords.ready:
            covered, texts = min(covered, keywords.tomb_seq), keywords.text_seq
        with self._tx():
            db.execute("DELETE FROM memory_tombstones WHERE seq <= ?", (covered,))
            db.execute("DELETE FROM memory_text_changes WHERE seq <= ?", (texts,))
        self._after_delete()
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @guarded
    def check(self) -> list[str]:
        """SQLite's integrity check and foreign-key check; an empty list means healthy."""
        db = self._db
        problems = [r[0] for r in db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        problems += [f"foreign key: {tuple(r)}" for r in db.execute("PRAGMA foreign_key_check")]
        return problems

    def _keyword_rows(self, db: sqlite3.Connection, counts: dict[str, int]) -> int:
        return int(db.execute("SELECT count(*) FROM memories_fts_docsize").fetchone()[0])
