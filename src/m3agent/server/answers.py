"""Answers computed by a worker thread, so a client that leaves cannot wedge the server.

The worker takes the chat lock (when a model answers: local models are not
re-entrant), then a pooled read store, and feeds the answer's steps into a
small queue; requests only read that queue, so nothing is held across a
yield to a client. A request cancels its run when the client goes away or the
deadline (``server.request_timeout_s``) passes: the worker stops before its
next step (a model call under way finishes first) and gives the store and the
lock back. Waiting for the lock is bounded by the same deadline.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.errors import AnswerTimeoutError, ServerBusyError

if TYPE_CHECKING:
    from m3agent.control.steps import Step
    from m3agent.server.api.schemas import AskRequest
    from m3agent.server.context import ServerContext

QUEUED_STEPS = 8  # steps computed ahead of a slow reader
POLL_S = 0.1  # how often a waiting worker looks for a cancel


@dataclass(frozen=True)
class Finished:
    """The end of a run: ``error`` is what stopped it (``None``: it ended with its answer)."""

    error: Exception | None = None


class Cancelled(Exception):
    """The run was cancelled while its worker waited (for the chat lock); nobody waits for its steps."""


class AnswerRun:
    """One answer computed by its own worker thread; read its steps with :meth:`steps` or :func:`stream`."""

    def __init__(self, ctx: ServerContext, request: AskRequest, notify: Callable[[], None] | None = None) -> None:
        self._ctx = ctx
        self._request = request
        self._notify = notify
        self.deadline = time.monotonic() + ctx.settings.server.request_timeout_s
        self._queue: queue.Queue[Step | Finished] = queue.Queue(QUEUED_STEPS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="m3agent-answer", daemon=True)

    def start(self) -> AnswerRun:
        """Start the worker; returns the run."""
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Ask the worker to stop before its next step (idempotent)."""
        self._stop.set()

    def left_s(self) -> float:
        """Seconds until the deadline (negative once it passed)."""
        return self.deadline - time.monotonic()

    def take(self, wait_s: float) -> Step | Finished | None:
        """The next step or the end, waiting at most ``wait_s``; ``None`` when none came."""
        try:
            return self._queue.get(timeout=max(wait_s, 0.0)) if wait_s > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None

    def steps(self) -> Iterator[Step]:
        """The steps in order, blocking; :class:`AnswerTimeoutError` past the deadline. Cancels the run when left."""
        try:
            while True:
                item = self.take(self.left_s())
                if item is None:
                    raise self.timeout()
                if isinstance(item, Finished):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            self.cancel()

    def timeout(self) -> AnswerTimeoutError:
        """The error of a run past its deadline."""
        limit = self._ctx.settings.server.request_timeout_s
        return AnswerTimeoutError(f"the answer took longer than {limit:g} s (server.request_timeout_s) and was stopped")

    def _work(self) -> None:
        try:
            self._answer()
            self._put(Finished())
        except Cancelled:
            return
        except Exception as exc:  # every failure reaches the request, which answers it (or logs a bug)
            self._put(Finished(exc))

    def _answer(self) -> None:
        from m3agent.control.answering import answer_steps

        ctx, request = self._ctx, self._request
        chat = ctx.chat()
        with self._chat_turn(chat is not None), ctx.stores.read(wait_s=max(self.left_s(), 0.0)) as store:
            if request.video_id is not None:
                store.get_video(request.video_id)
            steps = answer_steps(request.question, store, ctx.settings, video_id=request.video_id,
                                 before_clip=request.before_clip, chat=chat, embedder=ctx.embedder(store),
                                 index=ctx.character_index(store, request.video_id, request.before_clip),
                                 mode=request.mode, rounds=request.rounds)
            for step in steps:
                if not self._put(step):
                    return

    @contextmanager
    def _chat_turn(self, needed: bool) -> Iterator[None]:
        """Hold the chat lock (when ``needed``) for the block, waiting until the deadline or a cancel."""
        lock = self._ctx.chat_lock
        while needed and not lock.acquire(timeout=POLL_S):
            if self._stop.is_set():
                raise Cancelled()
            if self.left_s() <= 0:
                raise ServerBusyError("the model stayed busy with other answers until the deadline",
                                      hint="retry later, or raise server.request_timeout_s")
        try:
            yield
        finally:
            if needed:
                lock.release()

    def _put(self, item: Step | Finished) -> bool:
        """Queue ``item`` for the reader; ``False`` once the run is cancelled or past its deadline."""
        while not self._stop.is_set() and self.left_s() > 0:
            try:
                self._queue.put(item, timeout=POLL_S)
            except queue.Full:
                continue
            if self._notify is not None:
                self._notify()
            return True
        return False


async def stream(ctx: ServerContext, request: AskRequest) -> AsyncIterator[Step]:
    """The steps of an answer for an async reader, without a thread of the pool per wait; the run is
    cancelled when the reader stops (a client disconnect cancels the reading task)."""
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()

    def wake() -> None:
        with suppress(RuntimeError):  # the loop has closed: nobody reads any more
            loop.call_soon_threadsafe(ready.set)

    run = AnswerRun(ctx, request, notify=wake).start()
    try:
        while True:
            ready.clear()
            item = run.take(0)
            if item is None:
                try:
                    await asyncio.wait_for(ready.wait(), timeout=max(run.left_s(), 0.0))
                except TimeoutError:
                    raise run.timeout() from None
                continue
            if isinstance(item, Finished):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        run.cancel()
