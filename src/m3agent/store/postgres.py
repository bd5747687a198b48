"""PostgreSQL + pgvector store: registered so that ``postgresql://`` URLs fail with a clear message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from m3agent.errors import NotAvailableYet

if TYPE_CHECKING:
    from m3agent.registry import BackendSpec


def open_postgres(spec: BackendSpec, **_: Any) -> NoReturn:
    raise NotAvailableYet(
        f"the PostgreSQL store ({spec.scheme}://...) is not available yet",
        hint="use a SQLite memory file for now: --memory mem.db",
    )
