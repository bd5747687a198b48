"""The SQLite store's rows: :mod:`m3agent.store.sql.rows` bound to SQLite's dialect, and its keyword queries.

The converters and column lists shared with PostgreSQL are re-exported from :mod:`~m3agent.store.sql.rows`;
only the FTS5 query (:func:`fts_query`) is SQLite's own.
"""

from __future__ import annotations

import re

from m3agent.store.sql.rows import (
    ENTITY_COLUMNS,
    FACE_COLUMNS,
    SQLITE_ROWS,
    VOICE_COLUMNS,
    entity_from_row,
    face_from_row,
    placeholders,
    video_from_row,
    voice_from_row,
    words_json,
)

__all__ = [
    "ENTITY_COLUMNS", "FACE_COLUMNS", "MEMORY_COLUMNS", "VOICE_COLUMNS", "entity_from_row", "face_from_row",
    "filter_sql", "fts_query", "fts_terms", "memory_from_row", "phrases_query", "placeholders", "require_entity",
    "video_from_row", "voice_from_row", "words_json", "write_bank",
]

MEMORY_COLUMNS = SQLITE_ROWS.memory_columns
filter_sql = SQLITE_ROWS.filter_sql
memory_from_row = SQLITE_ROWS.memory_from_row
require_entity = SQLITE_ROWS.require_entity
write_bank = SQLITE_ROWS.write_bank

_FTS_TOKEN = re.compile(r"\w+", re.UNICODE)


def fts_terms(text: str) -> list[str]:
    """The words of free user text as :func:`fts_query` quotes them (lower case, each once, in order)."""
    return list(dict.fromkeys(t.lower() for t in _FTS_TOKEN.findall(text)))


def fts_query(text: str) -> str:
    """A safe FTS5 MATCH expression for free user text: its words as quoted terms joined by OR.

    Operators (AND, OR, NOT, NEAR), quotes, ``*``, ``-`` and ``:`` lose their
    meaning; an empty string means "no searchable words".
    """
    return phrases_query(fts_terms(text))


def phrases_query(terms: list[str]) -> str:
    """``terms`` (from :func:`fts_terms`) as quoted FTS5 phrases joined by OR."""
    return " OR ".join(f'"{t}"' for t in terms)
