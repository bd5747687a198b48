"""Where a memory lives: the one parser of memory specs (the ``memory`` setting, ``--memory``, ``migrate --from``).

A spec is a plain file path (relative or absolute, taken as written), a SQLite
URL in SQLAlchemy's form (``sqlite:///relative.db``, ``sqlite:////absolute.db``;
``sqlite:path`` takes the path as written), or a PostgreSQL URL
(``postgresql://...`` or ``postgres://...``). Everything that needs the file
or the URL of a memory reads it from the :class:`StoreLocation` built here, so
the store, the server's files beside it and the scale-out checks agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from m3agent.errors import ConfigError

SPEC_HINT = "use a path, sqlite:///relative.db, sqlite:////absolute/path.db or postgresql://user@host/db"
_POSTGRES_SCHEMES = ("postgresql", "postgres")


class StoreKind(StrEnum):
    """The two store backends a memory can live in; also the SQL dialect each speaks
    (:data:`m3agent.store.sql.dialect.Dialect` is this enum)."""

    SQLITE = "sqlite"
    POSTGRES = "postgres"


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A parsed memory spec: a SQLite ``path`` (resolved) or a PostgreSQL ``url`` (``postgresql://``).

    Two locations are equal when they name the same file or URL, however written; ``str()`` gives
    the spec as written and :attr:`canonical` a spec that means the same from any working directory.
    """

    kind: StoreKind
    path: Path | None = None
    url: str | None = None
    spec: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.spec or self.canonical

    @property
    def canonical(self) -> str:
        """The absolute file path or the ``postgresql://`` URL: what settings serialise (Ray workers)."""
        return str(self.path) if self.path is not None else str(self.url)


def parse_location(spec: str | Path | StoreLocation) -> StoreLocation:
    """The location a memory spec names; a spec naming no file or an unknown scheme is a :class:`ConfigError`."""
    if isinstance(spec, StoreLocation):
        return spec
    if isinstance(spec, Path):
        return _sqlite(str(spec), str(spec))
    text = spec.strip()
    scheme, sep, rest = text.partition("://")
    if sep and scheme.lower() in _POSTGRES_SCHEMES:
        return StoreLocation(StoreKind.POSTGRES, url=f"postgresql://{rest}", spec=text)
    if text.lower().startswith("sqlite:"):
        return _sqlite(text, _sqlite_target(text[len("sqlite:"):]))
    if sep:
        raise ConfigError(f"memory store {text!r}: unknown kind {scheme!r}", hint=SPEC_HINT)
    return _sqlite(text, text)


def _sqlite_target(rest: str) -> str:
    """The file part of a ``sqlite:`` spec: SQLAlchemy's slashes for ``sqlite://`` URLs, no ``?query``."""
    rest = rest.partition("?")[0]
    if rest.startswith("//"):
        rest = rest[2:]
        rest = rest[1:] if rest.startswith("/") else rest  # sqlite:///rel.db -> rel.db, sqlite:////abs -> /abs
    return rest


def _sqlite(spec: str, target: str) -> StoreLocation:
    """A SQLite location of ``target`` (``~`` expanded, resolved against the working directory)."""
    if not target.strip() or target == ":memory:":
        raise ConfigError(f"memory store {spec!r} names no file", hint=SPEC_HINT)
    return StoreLocation(StoreKind.SQLITE, path=Path(target).expanduser().resolve(), spec=spec)


def change_stamp(path: Path | None) -> tuple[object, ...] | None:
    """Moves whenever a commit may have changed the SQLite file at ``path``: the file's and its WAL's
    modification time and size (any writer's commit moves one of them); ``None`` for a memory without a
    file (PostgreSQL), whose changes this cannot see."""
    if path is None:
        return None
    stats: list[object] = []
    for file in (path, path.with_name(path.name + "-wal")):
        try:
            info = file.stat()
            stats += [info.st_mtime_ns, info.st_size]
        except OSError:
            stats.append(None)
    return tuple(stats)
