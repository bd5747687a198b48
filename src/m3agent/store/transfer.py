"""Copy a whole memory between stores (``m3agent migrate --from URL --to URL``), ids and all.

Both schemas hold the same tables with the same columns, so the copy is row
for row: every id is kept (tags like ``<face_3>`` in memory text name ids),
then the target's id counters continue after the copied maximum. Derived data
(keyword index, vector index, tombstones) is rebuilt by the target. Rows travel
in a neutral form, SQLite's: vectors as float32 little-endian bytes.

The target must hold no memory yet; the whole copy is one transaction on it,
so a failed copy leaves it empty. Columns are those both schemas share (a
column one side lacks, from a newer migration, is reported, not guessed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, IntegrityError
from m3agent.store.index.vectors import from_blob, to_blob

if TYPE_CHECKING:
    from m3agent.store.protocol import MemoryStore

# Tables in foreign-key order, each with the columns that order its rows.
TABLES: tuple[tuple[str, str], ...] = (
    ("videos", "id"),
    ("clips", "video_id, clip_index"),
    ("clip_timings", "video_id, clip_index, stage"),
    ("entities", "id"),
    ("entity_embeddings", "entity_id, ord"),
    ("characters", "id"),
    ("blobs", "id"),
    ("faces", "id"),
    ("voices", "id"),
    ("memories", "id"),
    ("edges", "entity_id, memory_id"),
    ("links", "seq"),
    ("entity_merges", "id"),
    ("consolidated_clips", "video_id, clip_index"),
    ("memory_sources", "memory_id, source_id"),
    ("consolidation_changes", "memory_id, video_id, clip_index"),
    ("entity_attributes", "id"),
    ("shots", "video_id, clip_index, start_s"),
)
# Tables a store keeps for itself: rebuilt by the target (indexes, snapshots, counters) or written by set-up.
NOT_COPIED = frozenset({
    "memories_fts", "memories_fts_config", "memories_fts_data", "memories_fts_docsize", "memories_fts_idx",
    "memory_text_changes", "memory_tombstones", "meta", "schema_migrations", "sqlite_sequence",
    "vector_snapshot_chunks", "vector_snapshots",
})
BATCH = 2000


@dataclass
class TransferReport:
    source: str
    target: str
    rows: dict[str, int] = field(default_factory=dict)
    skipped_columns: dict[str, list[str]] = field(default_factory=dict)


class _Side:
    """Raw row access to one store, in its own SQL dialect."""

    def __init__(self, store: MemoryStore) -> None:
        from m3agent.store.postgres.store import PostgresStore
        from m3agent.store.sqlite.store import SQLiteStore

        if not isinstance(store, SQLiteStore | PostgresStore):
            raise ConfigError(f"cannot copy the memory of {type(store).__name__}")
        self.store = store
        self.pg = isinstance(store, PostgresStore)

    @contextmanager
    def connection(self, write: bool) -> Iterator[Any]:
        """A connection in a transaction (a write one on the target), holding the store's lock on SQLite."""
        store: Any = self.store
        if self.pg:
            with store._tx() if write else store._read() as conn:
                yield conn
            return
        with store._lock:
            if write:
                with store._tx() as conn:
                    yield conn
            else:
                yield store._db

    def columns(self, conn: Any, table: str) -> dict[str, bool]:
        """Writable columns of ``table``, each with whether it holds a pgvector ``vector``."""
        if not self.pg:
            return {r[1]: False for r in conn.execute(f"PRAGMA table_info({table})")}
        rows = conn.execute("SELECT column_name, udt_name FROM information_schema.columns WHERE table_name = %s"
                            " AND table_schema = current_schema() AND is_generated = 'NEVER'", (table,))
        return {name: udt == "vector" for name, udt in rows}

    def read(self, conn: Any, table: str, columns: list[str], vectors: set[str], order: str) -> Iterator[list[Any]]:
        cursor = conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")
        while rows := cursor.fetchmany(BATCH):
            for row in rows:
                yield [_to_neutral(v) if c in vectors else _plain(v) for c, v in zip(columns, row, strict=True)]

    def write(self, conn: Any, table: str, columns: list[str], vectors: set[str], rows: list[list[Any]]) -> None:
        marks = ", ".join(["%s" if self.pg else "?"] * len(columns))
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        convert = vectors if self.pg else set()
        values = [[from_blob(v) if c in convert and v is not None else v for c, v in zip(columns, row, strict=True)]
                  for row in rows]
        if self.pg:
            with conn.cursor() as cur:
                cur.executemany(sql, values)
        else:
            conn.executemany(sql, values)

    def finish(self, conn: Any) -> None:
        """Let id counters continue after the copied ids (SQLite's AUTOINCREMENT already does)."""
        if not self.pg:
            return
        for table, key in (("videos", "id"), ("entities", "id"), ("characters", "id"), ("blobs", "id"),
                           ("faces", "id"), ("voices", "id"), ("memories", "id"), ("links", "seq"),
                           ("entity_merges", "id"), ("entity_attributes", "id")):
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{key}'), max({key}))"
                         f" FROM {table} HAVING max({key}) IS NOT NULL")


def _to_neutral(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes | memoryview):
        return None if value is None else bytes(value)
    from m3agent.store.postgres.rows import as_array

    return to_blob(as_array(value))


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def copy_memory(source: MemoryStore, target: MemoryStore) -> TransferReport:
    """Copy every row of ``source`` into the empty ``target`` (one transaction on the target)."""
    src, dst = _Side(source), _Side(target)
    counts = target.counts()  # type: ignore[attr-defined]
    if any(counts[t] for t in ("videos", "entities", "memories")):
        raise IntegrityError(f"{target.url} already holds a memory",
                             hint="migrate into an empty file or database (or delete its videos first)")
    model = source.embedding_model()
    if model is not None:
        target.set_embedding_model(*model)
    report = TransferReport(source.url, target.url)
    with src.connection(write=False) as read, dst.connection(write=True) as write:
        for table, order in TABLES:
            theirs, ours = src.columns(read, table), dst.columns(write, table)
            columns = [c for c in theirs if c in ours]
            skipped = sorted(set(theirs) ^ set(ours))
            if skipped:
                report.skipped_columns[table] = skipped
            vectors = {c for c in columns if theirs[c] or ours[c]}
            report.rows[table] = _copy_table(src, dst, read, write, table, columns, vectors, order)
        dst.finish(write)
    return report


def _copy_table(src: _Side, dst: _Side, read: Any, write: Any, table: str, columns: list[str], vectors: set[str],
                order: str) -> int:
    copied, batch = 0, []
    for row in src.read(read, table, columns, vectors, order):
        batch.append(row)
        if len(batch) >= BATCH:
            dst.write(write, table, columns, vectors, batch)
            copied, batch = copied + len(batch), []
    if batch:
        dst.write(write, table, columns, vectors, batch)
    return copied + len(batch)


def dump(store: MemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every copied table's rows in the neutral form and key order (to compare two memories)."""
    side = _Side(store)
    out: dict[str, list[tuple[Any, ...]]] = {}
    with side.connection(write=False) as conn:
        for table, order in TABLES:
            columns = side.columns(conn, table)
            names = sorted(columns)
            vectors = {c for c, is_vector in columns.items() if is_vector}
            out[table] = [tuple(r) for r in side.read(conn, table, names, vectors, order)]
    return out
