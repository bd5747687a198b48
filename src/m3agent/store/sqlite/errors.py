"""Translate ``sqlite3`` exceptions into the m3agent store errors.

SQLite reports the cause as a primary result code (``sqlite_errorcode & 0xff``);
the message text is only a fallback for codes Python does not attach.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from m3agent.errors import (
    IntegrityError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
)

SQLITE_READONLY = 8
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_CONSTRAINT = 19
SQLITE_NOTADB = 26

_BY_MESSAGE = (
    ("database or disk is full", SQLITE_FULL),
    ("readonly database", SQLITE_READONLY),
    ("file is not a database", SQLITE_NOTADB),
    ("malformed", SQLITE_CORRUPT),
)


def primary_code(exc: sqlite3.Error) -> int | None:
    """The primary SQLite result code of ``exc`` (from the code, else from the message)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    text = str(exc).lower()
    return next((c for fragment, c in _BY_MESSAGE if fragment in text), None)


def translate(exc: sqlite3.Error, where: str) -> StoreError:
    """The :class:`StoreError` for ``exc`` raised while using the store at ``where``."""
    code = primary_code(exc)
    detail = f"{where}: {exc}"
    if code == SQLITE_FULL:
        return StoreFullError(f"memory store is full ({detail})")
    if code == SQLITE_READONLY:
        return StoreReadOnlyError(f"memory store is read-only ({detail})")
    if code in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return StoreCorruptError(f"memory store is damaged or not a memory ({detail})")
    if code == SQLITE_CANTOPEN:
        return StoreReadOnlyError(
            f"cannot open the memory store ({detail})",
            hint="check that the folder exists and is writable (SQLite needs to create -wal/-shm files)",
        )
    if code == SQLITE_CONSTRAINT or isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(f"store constraint violated ({detail})", hint="a referenced row does not exist")
    return StoreError(f"memory store error ({detail})", hint="retry; if it persists, run `m3agent doctor`")


@contextmanager
def translated(where: str) -> Iterator[None]:
    """Re-raise any ``sqlite3.Error`` in the block as the matching :class:`StoreError`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(exc, where) from exc
