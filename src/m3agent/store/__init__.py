"""Memory stores: the single-file SQLite store (default) and PostgreSQL + pgvector (shared, many workers)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import M3AgentError, StoreNeedsUpgradeError
from m3agent.registry import Registry
from m3agent.store.location import StoreLocation, parse_location

if TYPE_CHECKING:
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore

STORES: Registry[MemoryStore] = Registry("memory store")
STORES.register("sqlite", "m3agent.store.sqlite.store:open_sqlite", "single-file SQLite memory (default)")
STORES.register("postgresql", "m3agent.store.postgres.store:open_postgres",
                "PostgreSQL + pgvector: one memory for many workers (extra [postgres])")
STORES.register("postgres", "m3agent.store.postgres.store:open_postgres", "alias of postgresql")


def open_store(spec: str | Path | StoreLocation, *, readonly: bool = False, create: bool = True,
               link_confidence: float | None = None, pool_size: int | None = None) -> MemoryStore:
    """Open the store at ``spec``: a :class:`StoreLocation`, or a spec :func:`parse_location` reads (a plain
    file path, ``sqlite:///relative.db``, ``sqlite:////abs.db`` or ``postgresql://...``).

    ``link_confidence`` is ``settings.perception.link_accept_confidence``: from it on, face-voice links
    form characters (``None``: the setting's default). ``pool_size`` is ``settings.memory_pool_size``:
    the most connections a PostgreSQL store holds (``None``: the setting's default).
    """
    location = parse_location(spec)
    return STORES.factory(location.kind)(location, readonly=readonly, create=create,
                                         link_confidence=link_confidence, pool_size=pool_size)


def open_memory(settings: Settings, *, readonly: bool = False, create: bool = True) -> MemoryStore:
    """:func:`open_store` of ``settings.memory`` with the settings the store applies (link acceptance, pool).

    A read-only open of a memory an older m3agent wrote upgrades it first when the user may write it (``m3agent
    ask`` after an upgrade must not ask for a command that writes); without write permission the error stands."""
    options: dict[str, Any] = {"link_confidence": settings.perception.link_accept_confidence,
                               "pool_size": settings.memory_pool_size}
    try:
        return open_store(settings.memory, readonly=readonly, create=create, **options)
    except StoreNeedsUpgradeError as exc:
        try:
            open_store(settings.memory, readonly=False, create=False, **options).close()  # applies the migrations
        except M3AgentError:
            raise exc from None
        return open_store(settings.memory, readonly=readonly, create=create, **options)
