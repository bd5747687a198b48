"""The SQLite store's writers (see :meth:`SQLiteStore.clip`): :mod:`m3agent.store.sql.writer`'s writers
bound to SQLite's dialect. A SQLite file has one writer at a time, so no identity lock."""

from __future__ import annotations

from m3agent.store.sql.dialect import Dialect
from m3agent.store.sql.writer import SQLClipWriter, SQLConsolidationWriter, check_link, check_unit

__all__ = ["SQLiteClipWriter", "SQLiteConsolidationWriter", "check_link", "check_unit"]


class SQLiteClipWriter(SQLClipWriter):
    """Writes of one clip inside the transaction a SQLite store opened."""

    dialect = Dialect.SQLITE


class SQLiteConsolidationWriter(SQLConsolidationWriter, SQLiteClipWriter):
    """The writer of one consolidation unit on SQLite (see :class:`SQLConsolidationWriter`)."""
