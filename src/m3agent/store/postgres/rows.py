"""The PostgreSQL store's rows: :mod:`m3agent.store.sql.rows` bound to PostgreSQL's dialect (``%s``
parameters, pgvector columns read as numpy arrays by :func:`as_array`)."""

from __future__ import annotations

from m3agent.store.sql.rows import PG_ROWS, as_array

__all__ = ["MEMORY_COLUMNS", "as_array", "filter_sql", "memory_from_row", "require_entity", "write_bank"]

MEMORY_COLUMNS = PG_ROWS.memory_columns
filter_sql = PG_ROWS.filter_sql
memory_from_row = PG_ROWS.memory_from_row
require_entity = PG_ROWS.require_entity
write_bank = PG_ROWS.write_bank
