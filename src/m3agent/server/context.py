"""What every request shares: the settings, a small pool of read stores, the models, the job runner.

Read-only store connections are kept open in a pool so each keeps its vector
index in memory (loading it per request would cost a snapshot read at 10^5
memories); edits open a writable store for the one call, as the CLI does, so
the store is never held open for writing between requests. The text embedder
and the chat models are loaded on first use and kept for the process; one chat
lock lets one call use a model at a time (local models are not re-entrant):
answers take it, idle consolidation (:mod:`m3agent.server.idle`) skips its turn
while it is held.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from m3agent.control.people.characters import IndexCache
from m3agent.errors import ServerBusyError
from m3agent.server.idle import IdleConsolidator

log = logging.getLogger(__name__)

CHAT_LOCK = threading.Lock()  # one chat call at a time in the process: local models are not re-entrant

if TYPE_CHECKING:
    from m3agent.control.people.characters import CharacterIndex
    from m3agent.control.results import ClipCache
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.server.api.schemas import ConsolidationStatus, SearchRequest
    from m3agent.server.jobs import JobRunner
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore


class SearchWorkers(Protocol):
    """Processes that answer searches beside the server's own (:class:`m3agent.server.search_pool.SearchPool`,
    started by :func:`m3agent.server.search_pool.start_search_workers` once the context has started)."""

    workers: int

    def search(self, request: SearchRequest) -> Future[dict[str, Any]]: ...

    def close(self) -> None: ...


def data_dir(settings: Settings) -> Path:
    """The server's own folder (uploads, job journal): ``server.data_dir`` or ``MEMORY-server/`` beside the file."""
    if settings.server.data_dir is not None:
        return settings.server.data_dir.expanduser().resolve()
    path = settings.memory.path
    if path is None:  # a PostgreSQL memory has no file to sit beside
        return (settings.resolved_cache_dir() / "server").resolve()
    return path.with_name(f"{path.stem}-server")


class StorePool:
    """``size`` read-only stores, opened on first use and lent one request at a time."""

    def __init__(self, settings: Settings, size: int) -> None:
        self._settings = settings
        self._idle: queue.LifoQueue[MemoryStore] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._all: list[MemoryStore] = []
        self._lock = threading.Lock()

    @contextmanager
    def read(self, wait_s: float | None = None) -> Iterator[MemoryStore]:
        """A read-only store for the ``with`` block; waits while all are lent, at most ``wait_s`` seconds
        (default: ``server.request_timeout_s``) before :class:`~m3agent.errors.ServerBusyError`."""
        if wait_s is None:
            wait_s = self._settings.server.request_timeout_s
        if not self._slots.acquire(timeout=wait_s):
            raise ServerBusyError(f"every read store of the memory stayed in use for {wait_s:g} s")
        try:
            try:
                store = self._idle.get_nowait()
            except queue.Empty:
                store = self._open()
            try:
                yield store
            finally:
                self._idle.put(store)
        finally:
            self._slots.release()

    def _open(self) -> MemoryStore:
        from m3agent.store import open_memory

        store = open_memory(self._settings, readonly=True, create=False)
        with self._lock:
            self._all.append(store)
        return store

    def close(self) -> None:
        """Close every store the pool opened (at shutdown; lent ones must have come back)."""
        with self._lock:
            for store in self._all:
                store.close()
            self._all.clear()
        while not self._idle.empty():
            self._idle.get_nowait()


class ServerContext:
    """The settings, stores, models and jobs of one served memory."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.data_dir = data_dir(settings)
        self.stores = StorePool(settings, settings.server.read_stores)
        self._models_lock = threading.Lock()
        self._embedder: Embedder | None = None
        self._chat: ChatModel | None = None
        self._chat_loaded = False
        self._consolidation_chat: ChatModel | None = None
        self.chat_lock = CHAT_LOCK
        self.jobs: JobRunner | None = None
        self.consolidator = IdleConsolidator(settings, self, on_change=self.changed)  # loads nothing yet
        self._generation = 0
        self._indexes = IndexCache()
        self.search_pool: SearchWorkers | None = None  # set once the index is saved (server.search_workers)
        self.stopping = threading.Event()

    def start(self) -> None:
        """Create the memory (empty) if it does not exist yet and bring its vector index up to date: the rows
        are loaded now (seconds at 10^5 memories), its graph is built and saved in the background (minutes on a
        new large memory; read stores share the process's index and search exactly meanwhile), then start the
        job runner (resuming jobs), whose worker also consolidates while idle."""
        # numpy is imported here, before the threads below: two threads importing it at once can see it
        # half-initialised ("cannot import name '__cpu_features__'"), and the server died at start
        import numpy  # noqa: F401

        from m3agent.server.jobs import JobRunner
        from m3agent.store import open_memory

        with open_memory(self.settings, create=True) as store, self.stores.read() as reader:
            # both cores: the rows' index here, the query model and the scopes' indexes on a read store beside it
            with ThreadPoolExecutor(1, thread_name_prefix="m3agent-warm") as beside:
                warmed = beside.submit(self._warm_searches, reader, store.embedding_model())
                build_index = getattr(store, "build_vector_index", None)  # SQLite: the snapshot read stores share
                if callable(build_index):
                    build_index(wait=False)
                warmed.result()
            join_index = getattr(reader, "build_vector_index", None)  # the read stores hold the index from now on
            if callable(join_index):  # (it is freed with the last store holding it: this writable one, next)
                join_index(wait=False)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.jobs = JobRunner(self.settings, self.data_dir, on_change=self.changed, idle=self.consolidator)
        self.jobs.start()

    def stop(self) -> None:
        """Stop the job runner (running jobs resume at the next start), the search workers, and close the read
        stores."""
        self.stopping.set()
        if self.jobs is not None:
            self.jobs.stop()
        pool, self.search_pool = self.search_pool, None
        if pool is not None:
            pool.close()
        self.stores.close()

    def require_jobs(self) -> JobRunner:
        """The job runner; a ``RuntimeError`` before :meth:`start` (a programming error, not a bad request)."""
        if self.jobs is None:
            raise RuntimeError("the server context was not started")
        return self.jobs

    def consolidation_status(self) -> ConsolidationStatus:
        """Idle consolidation's state, with the pending clips counted on a read store."""
        with self.stores.read() as store:
            return self.consolidator.status(store)

    @contextmanager
    def write(self) -> Iterator[MemoryStore]:
        """A writable store for one edit (rename, merge, delete), closed after it."""
        from m3agent.store import open_memory

        try:
            with open_memory(self.settings, create=False) as store:
                yield store
        finally:
            self.changed()

    def changed(self) -> None:
        """Note a write made by this process (cached derived views are rebuilt on next use)."""
        with self._models_lock:
            self._generation += 1

    def fingerprint(self) -> tuple[object, ...]:
        """Changes whenever the memory may have changed: this process's writes, or the file's (and its WAL's)
        modification time and size, which any writer's commit moves."""
        from m3agent.store.location import change_stamp

        return (self._generation, *(change_stamp(self.settings.memory.path) or ()))

    def character_index(self, store: MemoryStore, video_id: str | None, before_clip: int | None) -> CharacterIndex:
        """The searchers' character index of this scope, reused until the memory changes (building it reads
        every semantic memory: seconds at 10^5 memories)."""
        return self._indexes.get(store, video_id, before_clip, self.fingerprint())

    def clip_cache(self) -> ClipCache:
        """The searchers' clip spans, shared until the memory changes."""
        return self._indexes.clips(self.fingerprint())

    def embedder(self, store: MemoryStore) -> Embedder:
        """The embedder of the store's recorded model (queries must match the stored vectors), kept loaded."""
        return self._embedder_for(store.embedding_model())

    def _warm_searches(self, reader: MemoryStore, recorded: tuple[str, int] | None) -> None:
        """What the first searches would wait for: the query embedder (a failure is left to the first search that
        needs it, which reports it), the whole memory's character index and the keyword index (SQLite: built in
        the background)."""
        try:
            self._embedder_for(recorded)
        except Exception:  # the first search that needs it raises the same error to its caller
            log.warning("the query embedder could not be loaded at start", exc_info=True)
        self.character_index(reader, None, None)
        start_keywords = getattr(reader, "start_keyword_index", None)
        if callable(start_keywords):
            start_keywords()

    def _embedder_for(self, recorded: tuple[str, int] | None) -> Embedder:
        from m3agent.embed import embedder_for_store

        with self._models_lock:
            current = self._embedder
            if current is None or (recorded is not None and recorded != (current.name, current.dim)):
                self._embedder = current = embedder_for_store(recorded, self.settings.embedder)
            return current

    def chat(self) -> ChatModel | None:
        """The control LLM of the settings (``None`` for ``llm = "none"``), loaded once."""
        from m3agent.llm import chat_model_from_settings
        from m3agent.llm.spec import uses_llm

        with self._models_lock:
            if not self._chat_loaded:
                self._chat = chat_model_from_settings(self.settings) if uses_llm(self.settings.llm) else None
                self._chat_loaded = True
            return self._chat

    def consolidation_chat(self, spec: str) -> ChatModel:
        """The consolidation model ``spec``: the control LLM's instance when it is the same model (one copy in
        memory), else its own, loaded once."""
        from m3agent.llm import chat_model_from_settings

        if spec == self.settings.llm:
            chat = self.chat()
            if chat is not None:
                return chat
        with self._models_lock:
            if self._consolidation_chat is None:
                self._consolidation_chat = chat_model_from_settings(self.settings, spec)
            return self._consolidation_chat
