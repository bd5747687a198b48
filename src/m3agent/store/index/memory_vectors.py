"""The derived vector index of a SQLite memory: mirror + HNSW graph, synced and persisted.

Design (figures in docs/benchmarks.md, "Store"):

- SQLite rows are the truth. This index covers memories with
  ``id <= watermark`` minus the tombstones with ``seq <= tomb_seq``; memory ids
  are never reused, so "rows above the watermark" are exactly the new ones.
- :class:`VectorMirror` (filter columns + int8 vectors) answers filtered
  searches exactly when the filter keeps at most :data:`EXACT_LIMIT` rows,
  and any search while the store is smaller than :data:`ANN_MIN_ROWS`.
- Above that an HNSW graph (usearch) is searched with oversampling; its hits
  are re-filtered in the mirror, and when too few survive the search falls
  back to exact scoring over the filtered rows.
- Mirror and graph are persisted as chunked blobs inside the same SQLite file
  (``vector_snapshots``), loaded on first search and brought up to date from
  the rows and tombstones written since.
- One index per file, model and process (:func:`shared_vectors`): every store
  of a process on that file (a server's read pool, the API's store) shares it,
  so the mirror and the graph are loaded once and kept up to date once. A lock
  serialises its syncs and searches.
- The graph is never built inside a search: while it is missing, searches
  are exact over the mirror, and a background thread builds it (without the
  lock), then catches it up with the rows written meanwhile, swaps it in and,
  for a writable store, saves the snapshot through its own connection. So a
  new large memory answers within seconds of its first search, not minutes.

Callers re-check every candidate against SQLite and re-score it with the
exact float32 vector, so a stale key can cost recall but never leak.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from m3agent.store.index.ann import HnswIndex, HnswParams
from m3agent.store.index.per_file import PerFile
from m3agent.store.index.vectors import MirrorFilter, MirrorRows, VectorMirror
from m3agent.store.sqlite.schema import utc_now

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float32]
    BoolArray = npt.NDArray[np.bool_]

log = logging.getLogger(__name__)

EXACT_LIMIT = 20_000
ANN_MIN_ROWS = 20_000
MAX_ANN_COUNT = 4096
ANN_POOL = 100
GRAPH_HIT_ROWS = 20
"""A graph hit costs about as much as scoring this many rows exactly: measured at 10^6 memories on 2 AMD EPYC
cores, a search for 4,096 hits 22 ms (5.5 us a hit), the exact scores of 100,000 rows 27 ms (0.27 us a row; a
second query adds half of that). A selective filter asks the graph for many hits, of which it keeps few."""
SNAPSHOT_NAME = "memories"
CHUNK_BYTES = 32 << 20
READ_BATCH = 20_000
BUILD_THREADS = 1  # the background graph build leaves the other core to the searches
WAITED_BUILD_THREADS = 0  # a build the caller waits for uses every core (0); 1 gives a reproducible graph

_ROWS_SQL = (
    "SELECT m.id, v.id, m.clip_index, m.kind = 'semantic', m.start_s, m.end_s, m.embedding "
    "FROM memories m JOIN videos v ON v.video_id = m.video_id WHERE m.id > ? ORDER BY m.id"
)


class MemoryVectors:
    """Mirror + optional HNSW graph over the memories of one store file (see :func:`shared_vectors`)."""

    def __init__(self, dim: int, params: HnswParams | None = None, path: Path | None = None) -> None:
        self.dim = dim
        self.params = params or HnswParams()
        self.path = path
        self.lock = threading.RLock()
        self.mirror = VectorMirror(dim)
        self.ann: HnswIndex | None = None
        self.watermark = 0
        self.tomb_seq = 0
        self.loaded = False
        self.persisted_rows = 0
        self.changes = 0  # rows added or removed since the snapshot this state came from
        self._builder: threading.Thread | None = None
        self._persist_to: Path | None = None
        self._epoch = 0

    # syncing ---------------------------------------------------------------
    def sync(self, conn: sqlite3.Connection, *, writable: bool, background: bool = True) -> None:
        """Catch up with committed rows (call outside any transaction of ``conn``); start the graph build in
        the background when the store has grown big enough, and save a snapshot when one is due."""
        with self.lock:
            if not self.loaded:
                self.loaded = self._load_snapshot(conn)
            conn.execute("BEGIN")
            try:
                if self._replaced(conn):
                    self._reset()
                    self.loaded = self._load_snapshot(conn)
                self._read_new_rows(conn)
                self._apply_tombstones(conn)
            finally:
                conn.execute("COMMIT")
            if writable and self.path is not None:
                self._persist_to = self.path
            if background and self.ann is None and self.mirror.n_alive >= ANN_MIN_ROWS:
                self._start_build()
            due = self.ann is not None and self.changes > max(ANN_MIN_ROWS, self.persisted_rows // 4)
        if writable and due:
            self._save(conn)

    def _replaced(self, conn: sqlite3.Connection) -> bool:
        """The file holds fewer rows than indexed (restored from a copy, or rebuilt): start over."""
        top = conn.execute("SELECT max(id) FROM memories").fetchone()[0]
        return self.watermark > int(top or 0)

    def _reset(self) -> None:
        self._epoch += 1  # a graph being built from the old rows is not swapped in
        self.mirror, self.ann = VectorMirror(self.dim), None
        self.watermark = self.tomb_seq = self.persisted_rows = self.changes = 0

    def build(self, conn: sqlite3.Connection, *, writable: bool, wait: bool = True) -> int:
        """Sync, make sure the graph is built (or being built, ``wait=False``) and saved; rows covered."""
        self.sync(conn, writable=writable, background=not wait)
        if wait:
            self.wait()  # a build already running in the background, else one here on every core
            if self.ann is None and self.mirror.n_alive >= ANN_MIN_ROWS:
                self._build_graph(threads=WAITED_BUILD_THREADS, save=False)
            with self.lock:
                pending = self.changes > 0 and writable
            if pending:
                self._save(conn)
        return self.mirror.n_alive

    def wait(self) -> None:
        """Until a running background build has swapped its graph in."""
        builder = self._builder
        if builder is not None:
            builder.join()

    @property
    def building(self) -> bool:
        return self._builder is not None and self._builder.is_alive()

    def _read_new_rows(self, conn: sqlite3.Connection) -> None:
        cursor = conn.execute(_ROWS_SQL, (self.watermark,))
        while batch := cursor.fetchmany(READ_BATCH):
            rows = _to_mirror_rows(batch, self.dim)
            self.mirror.append(rows)
            if self.ann is not None:
                self.ann.add(rows.ids, rows.vectors)
            self.watermark = int(rows.ids[-1])
            self.changes += len(rows.ids)

    def _apply_tombstones(self, conn: sqlite3.Connection) -> None:
        import numpy as np

        found = conn.execute(
            "SELECT seq, memory_id FROM memory_tombstones WHERE seq > ? ORDER BY seq", (self.tomb_seq,)
        ).fetchall()
        if not found:
            return
        self.tomb_seq = int(found[-1][0])
        ids = np.asarray([r[1] for r in found], np.int64)
        removed = self.mirror.remove(ids)
        if self.ann is not None and removed:
            self.ann.remove(ids)
        self.changes += removed
        if self.mirror.n_dead > max(1024, self.mirror.size // 4):
            self.mirror.compact()

    def _start_build(self) -> None:
        if self.building:
            return
        self._builder = threading.Thread(target=self._build_graph, name="m3agent-vector-graph", daemon=True)
        self._builder.start()

    def _build_graph(self, threads: int = BUILD_THREADS, *, save: bool = True) -> None:
        """Build the graph from the mirror as it is now (outside the lock: searches go on, exact), then catch
        it up with rows added or removed meanwhile, swap it in and save the snapshot when writable."""
        import numpy as np

        try:
            with self.lock:
                self.mirror.compact()
                ids, codes, scales = (self.mirror.col(n) for n in ("ids", "codes", "scales"))
                epoch = self._epoch
            ann = HnswIndex(self.dim, self.params)
            for start in range(0, len(ids), 65536):
                stop = min(start + 65536, len(ids))
                vectors = codes[start:stop].astype(np.float32) * scales[start:stop, None]
                ann.add(ids[start:stop], vectors, threads=threads)
            with self.lock:
                if epoch != self._epoch:  # the file was replaced meanwhile: the next sync starts a new build
                    return
                self._catch_up(ann, ids)
                self.ann = ann
                target = self._persist_to
            log.info("vector graph built over %d rows", len(ann))
            if save and target is not None:
                self._save_to(target)
        except Exception:  # only an optimisation: searches stay exact without it
            log.exception("could not build the vector graph")

    def _catch_up(self, ann: HnswIndex, built: IntArray) -> None:
        """Add the mirror's rows newer than ``built`` to ``ann`` and remove the built ids no longer alive."""
        import numpy as np

        last = int(built[-1]) if len(built) else 0
        ids = self.mirror.col("ids")
        newer = np.flatnonzero((ids > last) & self.mirror.col("alive"))
        if len(newer):
            ann.add(ids[newer], self.mirror.dequantized(newer))
        dead = built[self.mirror.rows_of(built) < 0]
        ann.remove(dead)

    # searching -------------------------------------------------------------
    def candidates(self, queries: FloatArray, want: int, flt: MirrorFilter | None) -> tuple[IntArray, int]:
        """About ``want`` memory ids that pass ``flt``, roughly best first by their best score over ``queries``
        (one per row), and the watermark they cover."""
        with self.lock:
            return self._candidates(queries, want, flt), self.watermark

    def _candidates(self, queries: FloatArray, want: int, flt: MirrorFilter | None) -> IntArray:
        import numpy as np

        if flt is None and self.ann is not None:
            return self._ann_search(queries, want, None)
        rows = self.mirror.rows(flt)
        if self.ann is None or len(rows) <= EXACT_LIMIT or self._exact_is_cheaper(len(rows), want, len(queries)):
            return self.mirror.top_exact(queries, rows, want)[0]
        mask = np.zeros(self.mirror.size, np.bool_)
        mask[rows] = True
        return self._ann_search(queries, want, (mask, rows))

    def _graph_count(self, want: int, allowed: int | None) -> int:
        """Hits to ask the graph for, so that about ``want`` of them pass a filter keeping ``allowed`` rows."""
        share = allowed / max(self.mirror.n_alive, 1) if allowed is not None else 1.0
        return min(max(int(2 * want / max(share, 1e-9)), want, ANN_POOL), MAX_ANN_COUNT)

    def _exact_is_cheaper(self, rows: int, want: int, queries: int) -> bool:
        """Whether scoring the filter's ``rows`` exactly costs less than the graph searches (:data:`GRAPH_HIT_ROWS`):
        at 10^6 memories a person's 20,000-45,000 rows took 13-22 ms exactly for two queries, 60-97 ms through the
        graph, which a filter keeping 2-4% of the rows asks for 4,096 hits per query."""
        return rows * (1 + queries) / 2 <= GRAPH_HIT_ROWS * self._graph_count(want, rows) * queries

    def _ann_search(self, queries: FloatArray, want: int, allowed: tuple[BoolArray, IntArray] | None) -> IntArray:
        """Graph hits of each query (at least :data:`ANN_POOL`, more when the filter is selective) among the
        ``allowed`` rows (mask and positions), re-ranked by the mirror's finer int8 scores; exact over them if too
        few pass."""
        import numpy as np

        assert self.ann is not None
        count = self._graph_count(want, len(allowed[1]) if allowed is not None else None)
        while True:
            keys = np.unique(np.concatenate([self.ann.search(query, count) for query in queries]))
            rows = self.mirror.rows_of(keys)
            ok = rows >= 0
            if allowed is not None:
                ok &= allowed[0][np.maximum(rows, 0)]
            kept = rows[ok]
            if len(kept) >= want or count >= min(MAX_ANN_COUNT, len(self.ann)):
                break
            count = min(count * 4, MAX_ANN_COUNT)
        if len(kept) < want and allowed is not None:
            kept = allowed[1]
        return self.mirror.top_exact(queries, kept, want)[0]

    # persistence -----------------------------------------------------------
    def persist(self, conn: sqlite3.Connection) -> None:
        """Write mirror and graph into ``vector_snapshots`` (one transaction of ``conn``)."""
        with self.lock:  # a consistent state; the slow write to the file runs without the lock
            snapshot = self._snapshot()
        snapshot.write(conn)
        with self.lock:
            self.persisted_rows, self.changes = snapshot.rows, max(self.changes - snapshot.changes, 0)
        log.info("vector snapshot saved: %d rows, %d bytes", snapshot.rows, snapshot.size)

    def _snapshot(self) -> Snapshot:
        mirror_blob = self.mirror.to_bytes()
        ann_blob = self.ann.to_bytes() if self.ann is not None else b""
        return Snapshot(self.dim, self.watermark, self.tomb_seq, self.mirror.size, vars_of(self.params),
                        self.changes, (("mirror", mirror_blob), ("hnsw", ann_blob)))

    def _save(self, conn: sqlite3.Connection) -> None:
        try:
            self.persist(conn)
        except sqlite3.Error as exc:  # only an optimisation: searching goes on without it
            log.warning("could not save the vector snapshot: %s", exc)

    def _save_to(self, path: Path) -> None:
        """Save through a connection of this thread (the background build's)."""
        from m3agent.store.sqlite.schema import connect

        try:
            conn, readonly = connect(path, readonly=False, create=False)
        except Exception as exc:
            log.warning("could not open %s to save the vector snapshot: %s", path, exc)
            return
        try:
            if not readonly:
                self._save(conn)
        finally:
            conn.close()

    def _load_snapshot(self, conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT dim, watermark, tomb_seq, n_rows FROM vector_snapshots WHERE name = ?", (SNAPSHOT_NAME,)
        ).fetchone()
        if row is None or row[0] != self.dim:
            return True
        try:
            mirror = VectorMirror.from_bytes(_read_part(conn, "mirror"))
            ann_blob = _read_part(conn, "hnsw")
            ann = HnswIndex.from_bytes(ann_blob, self.dim, self.params) if ann_blob else None
        except (ValueError, OSError, KeyError) as exc:  # a damaged snapshot is rebuilt from the rows
            log.warning("ignoring the stored vector snapshot: %s", exc)
            return True
        self.mirror, self.ann = mirror, ann
        self.watermark, self.tomb_seq, self.persisted_rows = row[1], row[2], row[3]
        return True


_SHARED: PerFile[MemoryVectors] = PerFile()


def shared_vectors(path: Path, model: str, dim: int) -> MemoryVectors:
    """The process's index of the memories in ``path`` for embedding ``model`` (created on first use, freed
    when no store holds it). Keyed by the file's inode too: a new file at the same path gets a new index."""
    return _SHARED.get(path, (model, dim), lambda: MemoryVectors(dim, path=path))


@dataclass(frozen=True)
class Snapshot:
    """The index state to save: what it covers and its parts' bytes."""

    dim: int
    watermark: int
    tomb_seq: int
    rows: int
    params: dict[str, object]
    changes: int  # the changes this snapshot covers
    parts: tuple[tuple[str, bytes], ...]

    @property
    def size(self) -> int:
        return sum(len(blob) for _, blob in self.parts)

    def write(self, conn: sqlite3.Connection) -> None:
        """Replace the stored snapshot (one transaction)."""
        params = json.dumps({"hnsw": self.params, "bytes": self.size})
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM vector_snapshots WHERE name = ?", (SNAPSHOT_NAME,))
            conn.execute(
                "INSERT INTO vector_snapshots (name, dim, watermark, tomb_seq, n_rows, params, built_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (SNAPSHOT_NAME, self.dim, self.watermark, self.tomb_seq, self.rows, params, utc_now()),
            )
            for part, blob in self.parts:
                for seq, chunk in enumerate(_chunks(blob)):
                    conn.execute(
                        "INSERT INTO vector_snapshot_chunks (name, part, seq, data) VALUES (?, ?, ?, ?)",
                        (SNAPSHOT_NAME, part, seq, chunk),
                    )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def vars_of(params: HnswParams) -> dict[str, object]:
    return {name: getattr(params, name) for name in params.__dataclass_fields__}


def _chunks(blob: bytes) -> Iterator[bytes]:
    view = memoryview(blob)
    for start in range(0, len(blob), CHUNK_BYTES):
        yield bytes(view[start : start + CHUNK_BYTES])


def _read_part(conn: sqlite3.Connection, part: str) -> bytes:
    rows = conn.execute(
        "SELECT data FROM vector_snapshot_chunks WHERE name = ? AND part = ? ORDER BY seq",
        (SNAPSHOT_NAME, part),
    )
    return b"".join(r[0] for r in rows)


def _to_mirror_rows(batch: list[tuple[object, ...]], dim: int) -> MirrorRows:
    import numpy as np

    cols = list(zip(*batch, strict=True))
    blob = b"".join(cols[6])  # type: ignore[arg-type]
    return MirrorRows(
        ids=np.asarray(cols[0], np.int64),
        video=np.asarray(cols[1], np.int64),
        clip=np.asarray(cols[2], np.int32),
        kind=np.asarray(cols[3], np.int8),
        start=np.asarray(cols[4], np.float32),
        end=np.asarray(cols[5], np.float32),
        vectors=np.frombuffer(blob, "<f4").astype(np.float32).reshape(-1, dim),
    )
