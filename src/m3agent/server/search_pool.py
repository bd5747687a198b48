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
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m3agent.server.context import ServerContext
    from m3agent.server.schemas import SearchRequest
    from m3agent.settings import Settings

log = logging.getLogger(__name__)
_WORKER: ServerContext | None = None


class SearchPool:
    """``workers`` spawned processes, each with its own :class:`ServerContext` (never started: no jobs)."""

    def __init__(self, settings: Settings, workers: int, context: Callable[[Settings], ServerContext]) -> None:
        """``context`` makes a worker's context (the :class:`ServerContext` class, passed in: no import cycle)."""
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
    from m3agent.server import schemas, service

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
