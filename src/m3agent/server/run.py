"""Running the servers: ``m3agent serve`` (uvicorn) and ``m3agent mcp`` (stdio)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from m3agent.errors import MissingExtraError

if TYPE_CHECKING:
    from m3agent.settings import Settings


def require_server_extra() -> None:
    """Raise :class:`MissingExtraError` unless FastAPI, uvicorn, python-multipart and mcp are importable."""
    import importlib.util

    for module, package in (("fastapi", "fastapi"), ("uvicorn", "uvicorn"), ("multipart", "python-multipart"),
                            ("mcp", "mcp")):
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(f"the server ({package})", "server", package=package)


def serve(settings: Settings, *, log_level: str = "info") -> None:
    """Serve REST, ``/mcp`` and the inspector on ``settings.server.host:port`` until interrupted."""
    from m3agent.server.security import check_bind

    require_server_extra()
    check_bind(settings.server)
    check_memory(settings)
    import uvicorn

    from m3agent.server.app import create_app

    app = create_app(settings)
    uvicorn.run(app, host=settings.server.host, port=settings.server.port, log_level=log_level,
                timeout_graceful_shutdown=15)


def check_memory(settings: Settings) -> None:
    """Open the memory once before serving (created if missing): a corrupt, foreign, newer or unreadable one
    stops ``serve`` here with its own message and hint, not at the end of the web server's traceback."""
    from m3agent.store import open_memory

    with open_memory(settings, create=True):
        pass


def serve_stdio(settings: Settings) -> None:
    """Serve the MCP tools over stdin/stdout; returns when stdin closes."""
    require_server_extra()
    from m3agent.server.context import ServerContext
    from m3agent.server.mcp_stdio import serve
    from m3agent.server.mcp_tools import build_mcp
    from m3agent.server.search_pool import start_search_workers

    ctx = ServerContext(settings)
    ctx.start()
    start_search_workers(ctx)
    try:
        asyncio.run(serve(build_mcp(ctx)))
    finally:
        ctx.stop()
