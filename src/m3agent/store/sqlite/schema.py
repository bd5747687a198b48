"""Open an m3agent SQLite file: checks, pragmas and numbered migrations.

Migrations are the files ``sqlite_migrations/NNNN_name.sql``, numbered in
increasing order (gaps allowed: parallel branches reserve numbers), applied in
order, each in its own transaction, and recorded in ``schema_migrations``.
Opening a file applies every known migration it has not recorded, so a file
created by an older release (or a branch that skipped a number) is upgraded.
A file whose recorded version is newer than the newest migration known here
is refused (:class:`StoreVersionError`).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path

from m3agent.errors import (
    NotFoundError,
    StoreCorruptError,
    StoreError,
    StoreNeedsUpgradeError,
    StoreReadOnlyError,
    StoreVersionError,
)
from m3agent.store.sqlite.errors import translated

APPLICATION_ID = 0x4D334147  # "M3AG", stamped into the SQLite header of every memory file
_HEADER = b"SQLite format 3\x00"
WAL_SWITCH_TIMEOUT_S = 30.0  # as long as a writer may hold the file while another opens it
_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> tuple[Migration, ...]:
    """The packaged SQLite migrations in version order."""
    return packaged_migrations("sqlite_migrations")


@cache
def packaged_migrations(folder_name: str) -> tuple[Migration, ...]:
    """The numbered ``NNNN_name.sql`` files of a folder of :mod:`m3agent.store`, in version order (checked)."""
    folder = resources.files("m3agent.store").joinpath(folder_name)
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    check_numbering([m.version for m in found])
    return tuple(found)


def check_numbering(versions: list[int]) -> None:
    """Migration numbers start at 1 and are unique; gaps are allowed (parallel branches reserve numbers)."""
    if not versions or min(versions) != 1 or len(set(versions)) != len(versions):
        raise RuntimeError(f"sqlite migrations must start at 0001 and use each number once, found {sorted(versions)}")


def latest_version() -> int:
    return migrations()[-1].version


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def check_file(path: Path) -> None:
    """Refuse a file that is not SQLite or is shorter than its header says (truncated).

    With a non-empty write-ahead log beside it the size is not checked: a checkpoint cut short
    (disk full, a kill) leaves the file short while the log still holds every page, and SQLite
    recovers from it on open.
    """
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb") as fh:
        head = fh.read(100)
    if len(head) < 100 or not head.startswith(_HEADER):
        raise StoreCorruptError(f"{path} is not an SQLite file")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    header_count_valid = head[24:28] == head[92:96]
    if header_count_valid and size < pages * page_size and not _has_wal(path):
        raise StoreCorruptError(f"{path} is truncated: {size} bytes, header says {pages * page_size}")


def _has_wal(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return wal.exists() and wal.stat().st_size > 0


def is_writable(path: Path) -> bool:
    """Whether ``path`` (an existing file) may be written, asked of the kernel without opening it.

    Never open the file itself to find out: closing any descriptor of a file drops every POSIX lock
    this process holds on it, SQLite's included (see :func:`connect`).
    """
    return os.access(path, os.W_OK)


_OPENED: set[tuple[int, int]] = set()
"""(device, inode) of every database file this process has connected to."""
_OPENED_LOCK = threading.Lock()


def connect(path: Path, *, readonly: bool, create: bool) -> tuple[sqlite3.Connection, bool]:
    """Open ``path``; returns the connection and whether it is read-only.

    The header is read with plain file calls only the first time this process opens the file: POSIX drops
    all of a process's fcntl locks on a file when any descriptor of it is closed, so reading it again while
    another connection of this process holds SQLite's locks would leave that connection unprotected, and a
    second process (the CLI beside ``serve``) would checkpoint and unlink the WAL under it.
    """
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a memory file",
                         hint="point --memory at a .db file (new or existing)")
    exists = path.exists()
    if not exists and (readonly or not create):
        raise NotFoundError(f"no memory store at {path}", hint="check the path, or open it with create=True")
    if not exists:
        _make_parent(path)
    with _OPENED_LOCK:
        key = _file_key(path) if exists else None
        if key is not None and key not in _OPENED:
            check_file(path)
        if exists:
            readonly = readonly or not is_writable(path)
        conn = _connect_sqlite(path, readonly)
        key = key or _file_key(path)
        if key is not None:
            _OPENED.add(key)
    try:
        _configure(conn, path, readonly)
    except BaseException:
        conn.close()
        raise
    return conn, readonly


def _file_key(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreReadOnlyError(f"cannot create the folder of {path}: {exc}") from exc


def _connect_sqlite(path: Path, readonly: bool) -> sqlite3.Connection:
    uri = path.resolve().as_uri()
    with translated(str(path)):
        if not readonly:
            return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        # A WAL file in a read-only folder cannot get its -shm file; nobody can write there either.
        conn.close()
        with translated(str(path)):
            return sqlite3.connect(
                f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False
            )


def _configure(conn: sqlite3.Connection, path: Path, readonly: bool) -> None:
    with translated(str(path)):
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA cache_size = -65536")
        app_id, n_objects = _stamp_and_size(conn)
        if n_objects and app_id != APPLICATION_ID:
            raise StoreCorruptError(f"{path} is an SQLite file but not an m3agent memory")
        if readonly:
            _check_version(conn, path, readonly=True)
            return
        _ensure_wal(conn, path)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA secure_delete = ON")
        migrate(conn, path)


def _stamp_and_size(conn: sqlite3.Connection) -> tuple[int, int]:
    """The file's application id and number of schema objects, read by one statement (one snapshot).

    Read apart, another process's first migration could commit in between
    (tables seen, stamp not yet), and a new memory would look foreign.
    """
    row = conn.execute(
        "SELECT (SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_master)"
    ).fetchone()
    return int(row[0]), int(row[1])


def _ensure_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Put the file in WAL mode, retrying while another process holds it.

    SQLite does not run the busy handler for a journal-mode change, so two
    processes opening one fresh file at once would see "database is locked"
    at once. WAL is a property of the file: once any opener has switched it,
    there is nothing left to do, so the mode is read before it is set.
    """
    deadline = time.monotonic() + WAL_SWITCH_TIMEOUT_S
    delay = 0.005
    while True:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode == "wal":
            return
        try:
            mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            mode = "busy"
        if mode == "wal":
            return
        if time.monotonic() > deadline:
            raise StoreError(
                f"{path} stays in journal mode {mode!r}: could not switch it to WAL",
                hint="another program holds the file open; close it and retry",
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def schema_version(conn: sqlite3.Connection) -> int:
    """Highest applied migration (0 for an empty file)."""
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not has_table:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    """Versions recorded in ``schema_migrations`` (empty for an empty file)."""
    if schema_version(conn) == 0:
        return set()
    return {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}


def _check_version(conn: sqlite3.Connection, path: Path, *, readonly: bool) -> int:
    version = schema_version(conn)
    if version > latest_version():
        raise StoreVersionError(f"{path} has schema version {version}; this m3agent knows up to {latest_version()}")
    applied = applied_versions(conn)
    missing = [m.version for m in migrations() if m.version not in applied]
    if readonly and missing:
        raise StoreNeedsUpgradeError(
            f"{path} has schema version {version} and needs migrations {missing}",
            hint="open it once without --readonly (and with write permission) to upgrade it",
        )
    return version


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply every known migration the file has not recorded, in number order, each atomically."""
    with translated(str(path)):
        _check_version(conn, path, readonly=False)
        applied = applied_versions(conn)
        if all(m.version in applied for m in migrations()):
            return
        for migration in migrations():
            _apply(conn, path, migration)


def _apply(conn: sqlite3.Connection, path: Path, migration: Migration) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        if migration.version not in applied_versions(conn):
            for statement in split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, utc_now()),
            )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def split_statements(script: str) -> list[str]:
    """Split an SQL script into complete statements (trigger bodies kept whole)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip() and not all(part.strip().startswith("--") or not part.strip() for part in buffer.splitlines()):
        raise RuntimeError(f"incomplete SQL statement in migration: {buffer[:80]!r}")
    return statements
