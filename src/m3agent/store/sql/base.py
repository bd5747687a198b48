"""The base of the SQL memory store: what each backend provides, and the helpers every SQL method uses.

:class:`SQLBase` declares what :class:`~m3agent.store.sqlite.store.SQLiteStore` and
:class:`~m3agent.store.postgres.store.PostgresStore` really do differently (connections, locks, the vector
column and the indexes: see :mod:`m3agent.store.sql.store`), and holds the lifecycle and the statement
helpers (``_run``, ``_filter``, ``_update_one``) that the shared methods of
:mod:`m3agent.store.sql.people` and :mod:`m3agent.store.sql.store` are written with. :func:`guarded` wraps
each public method in its store's guard.
"""
from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Generic, ParamSpec, Self, TypeVar

from m3agent.domain import ScoredMemory, SearchFilter
from m3agent.errors import ConfigError, NotFoundError, StoreReadOnlyError
from m3agent.store.characters import default_link_confidence
from m3agent.store.sql.dialect import Connection, Dialect, Rows, render
from m3agent.store.sql.rows import ROWS

if TYPE_CHECKING:
    from m3agent.domain import Vector
    from m3agent.store.sql.writer import SQLClipWriter, SQLConsolidationWriter


C = TypeVar("C", bound=Connection)
S = TypeVar("S", bound="SQLBase[Any]")
P = ParamSpec("P")
R = TypeVar("R")


def link_confidence_of(value: float | None) -> float:
    """The ``link_confidence`` a store is opened with (the setting's default for ``None``), checked."""
    accept = default_link_confidence() if value is None else value
    if not 0.0 < accept <= 1.0:
        raise ConfigError(f"link_confidence must be in (0, 1], got {accept}",
                          hint="set perception.link_accept_confidence between 0 and 1")
    return accept


def guarded(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run ``method`` inside the store's guard: its lock, the open check, its driver's errors translated."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._guard():
            return method(self, *args, **kwargs)

    return wrapper


class SQLBase(ABC, Generic[C]):
    """The backend's primitives and the statement helpers of a SQL store; ``C`` is the driver's connection type."""

    dialect: ClassVar[Dialect]
    _writers: ClassVar[tuple[type[SQLClipWriter], type[SQLConsolidationWriter]]]  # of a clip, of a consolidation
    _row_lock: ClassVar[str] = ""  # appended to a read of a clip's row that decides a write (FOR UPDATE)

    def __init__(self, url: str, where: str, *, readonly: bool, link_confidence: float) -> None:
        self.url = url
        self.readonly = readonly
        self.link_confidence = link_confidence
        self._where = where  # how messages name this memory (its file or its redacted URL)
        self._rows = ROWS[self.dialect]

    # what each backend provides --------------------------------------------
    @abstractmethod
    def close(self) -> None:
        """Release the connection(s); later calls raise :class:`StoreError`."""

    @abstractmethod
    def _require_open(self) -> None: ...

    @abstractmethod
    def _guard(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def _read(self) -> AbstractContextManager[C]: ...

    @abstractmethod
    def _tx(self) -> AbstractContextManager[C]: ...

    @abstractmethod
    def _unit(self) -> AbstractContextManager[C]:
        """The one transaction of a clip or a consolidation (its checks and locks taken)."""

    @abstractmethod
    def _schema_version(self, db: C) -> int: ...

    @abstractmethod
    def _model_recorded(self, db: C, dim: int) -> None:
        """Inside the transaction that records a new embedding model: fit the vector column or index to it."""

    @abstractmethod
    def _nearest(self, queries: Vector, k: int, flt: SearchFilter | None) -> list[ScoredMemory]:
        """Top-``k`` by the best cosine over the rows of ``queries`` (unit vectors, one per row)."""

    @abstractmethod
    def _keyword_rows(self, db: C, counts: dict[str, int]) -> int:
        """Rows of the keyword index (``counts`` holds the table counts)."""

    @abstractmethod
    def keyword_search(self, query: str, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` memories by the backend's keyword ranking that pass ``flt``; free text is never syntax."""

    @abstractmethod
    def video_lock(self, video_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> AbstractContextManager[None]:
        """The writer lock of ``video_id`` across processes (see the protocol)."""

    @abstractmethod
    def compact(self) -> None:
        """Rewrite the memory so deleted rows leave no bytes behind."""

    @abstractmethod
    def check(self) -> list[str]:
        """The problems the backend's checks find; an empty list means healthy."""

    def identity_barrier(self) -> None:
        """Serialise identity decisions across processes before an entity read; none needed here."""

    def _identity_lock(self, db: C) -> None:
        """Inside a transaction that corrects identities: wait for other processes' identity decisions."""

    def _lock_model(self, db: C) -> None:
        """Inside a transaction that changes the embedding model: exclude other processes doing so."""

    def _begin_reembed(self, db: C) -> None:
        """Inside the re-embedding transaction, before the first vector is replaced."""

    def _after_delete(self) -> None:
        """After a deletion committed: clean up what the indexes keep of deleted text."""

    # lifecycle -------------------------------------------------------------
    def __enter__(self) -> Self:
        """The store itself, closed when the ``with`` block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store, however the block ended."""
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}{', readonly' if self.readonly else ''})"

    def _require_writable(self) -> None:
        if self.readonly:
            raise StoreReadOnlyError(f"the memory store {self._where} is open read-only")

    def _run(self, db: C, sql: str, params: Sequence[Any] = ()) -> Rows:
        """Execute ``sql`` (``?`` placeholders) on ``db`` in this backend's parameter style."""
        return db.execute(render(sql, self.dialect), params)

    def _filter(self, flt: SearchFilter | None) -> tuple[str, list[Any]]:
        """The WHERE condition of ``flt`` on memories ``m`` with ``?`` placeholders, to join other ``?`` SQL.

        ``filter_sql`` writes it in the backend's style; it holds no literal ``%`` or ``?``, so its ``%s``
        read back as ``?`` exactly.
        """
        where, params = self._rows.filter_sql(flt)
        return where.replace("%s", "?"), params


    def _update_one(self, sql: str, params: Sequence[Any], missing: str) -> None:
        """Run an UPDATE of one row by id; :class:`NotFoundError` (``missing``) when there is no such row."""
        with self._tx() as db:
            if self._run(db, sql, params).rowcount == 0:
                raise NotFoundError(missing)
