"""Searches answered by worker processes beside the server's own (``server.search_workers``).

A search is CPU work in Python (ranking, rows, the query's embedding): in one process the GIL holds a
server to about one core however many threads answer. Each worker process keeps its own read store
(which loads the vector snapshot once), embedder and character indexes, and answers
``POST /api/search`` with :func:`m3agent.server.service.search`, as the server would; the server process
keeps the HTTP, the jobs and everything else. Workers start once the memory's vector index is built
and saved (so they load it instead of each building one); until then, and if the pool breaks, the
server answers searches itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from m3agent.server.context import ServerContext

if TYPE_CHECKING:
    from m3agent.server.api.schemas import SearchRequest
    from m3agent.settings import Settings

log = logging.getLogger(__name__)
_WORKER: ServerContext | None = None


def start_search_workers(ctx: ServerContext) -> None:
    """With ``server.search_workers``, start the pool in the background for a started ``ctx`` (it waits for the
    vector index to be built and saved); the server answers searches itself until then."""
    if ctx.settings.server.search_workers:
        threading.Thread(target=_start_pool, args=(ctx,), name="m3agent-search-pool", daemon=True).start()


def _start_pool(ctx: ServerContext) -> None:
    """Once the vector index is built and saved (workers load it rather than each building one), start the
    search workers; the server answers searches itself until then, or if they cannot start."""
    from m3agent.store import open_memory

    try:
        with open_memory(ctx.settings, create=False) as store:
            build_index = getattr(store, "build_vector_index", None)
            if callable(build_index):
                build_index()  # waits for the graph being built in the background, saves it
        if ctx.stopping.is_set():
            return
        pool = SearchPool(ctx.settings, ctx.settings.server.search_workers, ServerContext)
    except Exception:  # the server answers searches itself
        log.exception("the search workers could not start")
        return
    if ctx.stopping.is_set():
        pool.close()
        return
    ctx.search_pool = pool
    log.info("%d search workers answer searches", pool.workers)


class SearchPool:
    """``workers`` spawned processes, each with its own :class:`ServerContext` (never started: no jobs)."""

    def __init__(self, settings: Settings, workers: int, context: Callable[[Settings], ServerContext]) -> None:
        """``context`` makes a worker's context (the :class:`ServerContext` class)."""
        import multiprocessing

        self.workers = workers
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_start_worker, initargs=(settings, context))
        try:  # start every worker now (each loads its store and models first), not on a user's request
            for started in [self._pool.submit(_ready) for _ in range(workers)]:
                started.result()
        except BaseException:
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise

    def search(self, request: SearchRequest) -> Future[dict[str, Any]]:
        """The search's ``SearchResult.to_dict()``, computed in a worker (its errors are re-raised)."""
        return self._pool.submit(_search, request)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _start_worker(settings: Settings, context: Callable[[Settings], ServerContext]) -> None:
    """Make the worker's context and warm it: a read store with the vector index loaded, the whole memory's
    character index, the embedder."""
    global _WORKER
    from m3agent.server import service
    from m3agent.server.api import schemas

    _WORKER = context(settings)
    service.search(_WORKER, schemas.SearchRequest(query="warm up", k=1))


def _ready() -> int:
    import os

    return os.getpid()


def _context() -> ServerContext:
    assert _WORKER is not None, "the worker was not initialised"
    return _WORKER


def _search(request: SearchRequest) -> dict[str, Any]:
    from m3agent.server import service

    return service.search(_context(), request).to_dict()
