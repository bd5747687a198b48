"""The FastAPI app: REST API, OpenAPI docs, MCP over streamable HTTP (``/mcp``) and the web inspector.

Built from one :class:`~m3agent.settings.Settings`, like the CLI; the
lifespan creates the memory if needed, starts the job runner (resuming
interrupted jobs) and the MCP session manager, and stops them on shutdown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool

from m3agent import __version__
from m3agent.server import failures
from m3agent.server.api import consolidation as api_consolidation
from m3agent.server.api import docs as api_docs
from m3agent.server.api import entities as api_entities
from m3agent.server.api import graph as api_graph
from m3agent.server.api import jobs as api_jobs
from m3agent.server.api import memories as api_memories
from m3agent.server.api import schemas
from m3agent.server.api import videos as api_videos
from m3agent.server.context import ServerContext
from m3agent.server.deps import Ctx
from m3agent.server.hygiene import BodyLimitMiddleware, SecurityHeadersMiddleware, strict_json
from m3agent.server.jobs import ACTIVE
from m3agent.server.search_pool import start_search_workers
from m3agent.server.security import GuardMiddleware, GuessThrottle

if TYPE_CHECKING:
    from m3agent.settings import Settings

DESCRIPTION = """Long-term multimodal memory over HTTP: ingest videos, look inside the memory, search it,
ask it questions with cited evidence, fix who is who, and forget. Errors answer
`{"error", "message", "hint"}`; the hint says what to do next."""


def create_app(settings: Settings, *, mcp: bool = True, inspector: bool = True) -> FastAPI:
    """The app serving ``settings.memory`` (``mcp``/``inspector``: mount ``/mcp`` and the web pages)."""
    ctx = ServerContext(settings)
    mcp_server = None
    if mcp:
        from m3agent.server.mcp_tools import build_mcp

        mcp_server = build_mcp(ctx)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(ctx.start)
        start_search_workers(ctx)
        async with AsyncExitStack() as stack:
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            try:
                yield
            finally:
                await run_in_threadpool(ctx.stop)

    app = FastAPI(title="m3agent", version=__version__, description=DESCRIPTION, lifespan=lifespan,
                  responses={400: {"model": schemas.Problem}, 404: {"model": schemas.Problem},
                             413: {"model": schemas.Problem}, 422: {"model": schemas.Problem}},
                  docs_url=None, redoc_url=None, dependencies=[Depends(strict_json)])
    app.state.ctx = ctx
    failures.install(app)
    _add_health(app)
    limit = body_limit(settings)
    app.include_router(api_jobs.upload_router, max_body_size=upload_limit(settings))
    for module in (api_videos, api_jobs, api_consolidation, api_entities, api_graph, api_memories):
        app.include_router(module.router, max_body_size=limit)
    api_docs.install(app)
    if mcp_server is not None:
        from starlette.middleware.body_limit import RequestBodyLimitMiddleware

        mcp_app = mcp_server.streamable_http_app(streamable_http_path="/", host=settings.server.host)
        app.mount("/mcp", RequestBodyLimitMiddleware(mcp_app, max_body_size=limit))
    if inspector:
        from m3agent.server.web import inspector as pages

        pages.install(app, max_body_size=limit)
    _add_middleware(app, settings)
    return app


def _add_health(app: FastAPI) -> None:
    @app.get("/health", response_model=schemas.Health, tags=["health"],
             summary="The API can serve (503 while no read store frees up within server.ready_wait_s)",
             responses={503: {"model": schemas.Problem}})
    def health(ctx: Ctx) -> schemas.Health:
        """Borrows a read store for a moment, so a server whose stores are all stuck answers 503 (probes)."""
        with ctx.stores.read(wait_s=ctx.settings.server.ready_wait_s) as store:
            store.embedding_model()
        return schemas.Health(status="ok", version=__version__)

    @app.get("/ready", response_model=schemas.Readiness, tags=["health"],
             summary="The memory can be read (503 while it cannot)", responses={503: {"model": schemas.Problem}})
    def ready(ctx: Ctx) -> schemas.Readiness:
        """Reads the memory, so it fails (503) while the memory cannot be read (readiness probes)."""
        jobs = ctx.require_jobs().all()
        with ctx.stores.read(wait_s=ctx.settings.server.ready_wait_s) as store:
            model = store.embedding_model()
            building = getattr(store, "indexes_building", None)
            return schemas.Readiness(ready=True, memory=store.url, videos=len(store.videos()),
                                     indexes_building=list(building()) if callable(building) else [],
                                     embedding_model=None if model is None else f"{model.name}/{model.dim}",
                                     jobs_active=sum(1 for j in jobs if j.state in ACTIVE),
                                     search_workers=ctx.search_pool.workers if ctx.search_pool else 0)


def body_limit(settings: Settings) -> int:
    """The body limit of every route but uploads in bytes (``server.max_body_kb``)."""
    return settings.server.max_body_kb << 10


def upload_limit(settings: Settings) -> int:
    """The body limit of an upload in bytes: ``server.max_upload_mb`` and room for the multipart framing."""
    return int(settings.server.max_upload_mb * (1 << 20)) + (1 << 20)


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """Outermost first: security headers, Host and token guard, declared body sizes, then CORS (only when origins
    are configured). Chunked bodies are counted by each router's own limit (``max_body_size``)."""
    app.add_middleware(BodyLimitMiddleware, limit=body_limit(settings), upload_limit=upload_limit(settings),
                       upload_paths=("/api/jobs/upload",))
    if settings.server.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=settings.server.cors_origins,
                           allow_methods=["GET", "POST", "PATCH", "DELETE"],
                           allow_headers=["authorization", "content-type"])
    app.state.guesses = GuessThrottle(settings.server.failed_guess_delay_s)  # the middleware's and /login's
    app.add_middleware(GuardMiddleware, server=settings.server, throttle=app.state.guesses)
    app.add_middleware(SecurityHeadersMiddleware)
