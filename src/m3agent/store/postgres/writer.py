"""The PostgreSQL store's writers (see :meth:`PostgresStore.clip`): :mod:`m3agent.store.sql.writer`'s
writers bound to PostgreSQL's dialect. The store passes its identity lock
(:meth:`PostgresStore.identity_barrier`) as ``barrier``, taken before an entity is created or merged."""

from __future__ import annotations

from m3agent.store.sql.dialect import Dialect
from m3agent.store.sql.writer import SQLClipWriter, SQLConsolidationWriter

__all__ = ["PgClipWriter", "PgConsolidationWriter"]


class PgClipWriter(SQLClipWriter):
    """Writes of one clip inside the transaction a PostgreSQL store opened."""

    dialect = Dialect.POSTGRES


class PgConsolidationWriter(SQLConsolidationWriter, PgClipWriter):
    """The writer of one consolidation unit on PostgreSQL (see :class:`SQLConsolidationWriter`)."""
