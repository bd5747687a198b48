"""Consolidation while the server is idle: one unit of clips at a time, between ingest jobs.

The job worker (:class:`~m3agent.server.jobs.JobRunner`) calls :meth:`IdleConsolidator.step` once no job
has been queued for ``server.consolidate_idle_s`` seconds. A step consolidates one unit of one video's
pending clips (``memorize.consolidate_clips`` clips, one model call; :mod:`m3agent.memorize.consolidation.consolidate`)
and returns; the worker looks at its queue before the next step, so a submitted ingest job waits for at
most one unit. A unit holds its video's writer lock, taken without waiting (a video that another process
is ingesting is left for later), and is one store transaction, as in ``m3agent consolidate``. The model
(``memorize.consolidate_llm``, else ``llm``) is loaded on first use and kept; a step waits for no answer
being written with it (it takes the server's chat lock without blocking, or skips its turn).

Nothing a step meets stops the worker: a failure (the model cannot load, the endpoint is down, anything
unexpected) is logged and shown by ``GET /api/consolidation``, and what failed (the video, or the model) is
tried again only after ``server.consolidate_retry_s``, doubled per repeated failure up to 8x.
"""

from __future__ import annotations

import copy
import enum
import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from m3agent.errors import M3AgentError, StoreError

if TYPE_CHECKING:
    from m3agent.domain import Clip
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.memorize.consolidation.consolidate import ConsolidationReport
    from m3agent.server.api.schemas import ConsolidationStatus
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore

log = logging.getLogger(__name__)

MAX_BACKOFF = 8  # a repeated failure waits at most this many times server.consolidate_retry_s
POLL_S = 60.0  # with nothing to consolidate, look again this often (other processes may ingest)


class IdleState(enum.StrEnum):
    """What idle consolidation is doing (``GET /api/consolidation``'s ``state``)."""

    OFF = "off"  # no consolidation model, or server.consolidate_when_idle is false
    IDLE = "idle"  # nothing pending (or waiting for the queue to be quiet)
    RUNNING = "running"  # consolidating a video, unit by unit
    FAILED = "failed"  # the last attempt failed; it is retried after its back-off


class Models(Protocol):
    """What the server shares with idle consolidation (:class:`~m3agent.server.context.ServerContext`)."""

    chat_lock: threading.Lock

    def embedder(self, store: MemoryStore) -> Embedder:
        """The text embedder matching the store's recorded model."""
        ...

    def consolidation_chat(self, spec: str) -> ChatModel:
        """The consolidation model ``spec``, loaded once and kept."""
        ...


@dataclass
class Failure:
    """A failed attempt: of a video (``video_id``), or of the model or store (``None``)."""

    video_id: str | None
    error: str
    hint: str | None
    count: int
    retry_at: float  # time.monotonic() from which it is tried again


class IdleConsolidator:
    """Consolidates pending clips step by step for the job worker; :meth:`status` for the API."""

    def __init__(self, settings: Settings, models: Models, on_change: Callable[[], None] = lambda: None) -> None:
        from m3agent.memorize.consolidation.consolidate import ConsolidationOptions
        from m3agent.memorize.consolidation.run import consolidation_model
        from m3agent.memorize.rules import WriteRules

        self.settings = settings
        self.models = models
        self.on_change = on_change
        self.on_unit: Callable[[ConsolidationReport], None] | None = None  # after each committed unit
        self.spec = consolidation_model(settings) if settings.server.consolidate_when_idle else None
        self.delay_s = settings.server.consolidate_idle_s
        self.options = ConsolidationOptions.from_settings(settings)
        self.rules = WriteRules.from_settings(settings)
        self._lock = threading.Lock()  # guards the status below
        self._state = IdleState.IDLE if self.spec else IdleState.OFF
        self._video: str | None = None
        self._report: ConsolidationReport | None = None
        self._pass_over = False  # the last step found nothing: the next unit starts a new report
        self._model_busy = False  # the last step found the model answering a question: try again soon
        self._units = 0
        self._last_error: str | None = None
        self._failures: dict[str | None, Failure] = {}
        self._updated_at: float | None = None

    @property
    def enabled(self) -> bool:
        """A consolidation model is configured and ``server.consolidate_when_idle`` is on."""
        return self.spec is not None

    # the worker's step ---------------------------------------------------------
    def step(self) -> bool:
        """Consolidate one unit of the first video with pending clips that can be taken now; ``False`` when
        there was none (all consolidated, busy elsewhere, waiting after a failure, or the model busy)."""
        if self.spec is None or self._waiting(None):
            return False
        self._model_busy = not self.models.chat_lock.acquire(blocking=False)
        if self._model_busy:
            return False  # an answer is being written with the model: try again after the idle delay
        try:
            return self._step(self.spec)
        except Exception as exc:  # the model or the store: nothing may stop the worker
            self._failed(None, exc)
            return False
        finally:
            self.models.chat_lock.release()

    def _step(self, spec: str) -> bool:
        from m3agent.store import open_memory

        with open_memory(self.settings, create=False) as store:
            for video in store.videos():
                if not self._waiting(video.video_id) and self._unit(store, spec, video.video_id):
                    return True
        self._pass_over = True
        self._set(IdleState.FAILED if self._failures else IdleState.IDLE)
        return False

    def _unit(self, store: MemoryStore, spec: str, video_id: str) -> bool:
        """Consolidate the video's first pending unit; ``False`` when it has none or is locked elsewhere. The
        model is loaded here, when first needed (a failure to load it is the step's, not the video's)."""
        from m3agent.memorize.consolidation.consolidate import pending_units

        with ExitStack() as stack:
            try:
                stack.enter_context(store.video_lock(video_id, wait=False))
            except StoreError:
                return False  # another process is ingesting or consolidating it
            units, already = pending_units(store, video_id, self.options.clips_per_call)
            if not units:
                return False
            chat = self.models.consolidation_chat(spec)
            try:
                self._consolidate(store, chat, video_id, units[0], already)
            except Exception as exc:
                self._failed(video_id, exc)
            return True
        return False  # not reached: the stack swallows nothing

    def _consolidate(self, store: MemoryStore, chat: ChatModel, video_id: str, unit: list[Clip],
                     already: int) -> None:
        from m3agent.memorize.consolidation.consolidate import ConsolidationReport, consolidate_unit
        from m3agent.memorize.embedding import check_embedding_model

        with self._lock:
            current = self._report
        if current is None or current.video_id != video_id or self._pass_over:
            current = ConsolidationReport(video_id, chat.name, clips_already=already)
        self._pass_over = False
        report = copy.deepcopy(current)  # the API reads the current one meanwhile
        self._set(IdleState.RUNNING, video_id)
        started = time.perf_counter()
        embedder = self.models.embedder(store)
        check_embedding_model(store, embedder)
        consolidate_unit(store, chat, embedder, unit, self.options, self.rules, report)
        report.wall_seconds += time.perf_counter() - started
        with self._lock:
            self._report = report
            self._units += 1
            self._failures.pop(video_id, None)
            self._failures.pop(None, None)
        self.on_change()
        if self.on_unit is not None:
            self.on_unit(report)

    def next_wait(self) -> float:
        """Seconds before the next step is worth trying after one that found nothing: :data:`POLL_S`, or less
        when a failure's retry comes first, or the idle delay when the model was busy (never less)."""
        if self._model_busy:
            return self.delay_s
        with self._lock:
            retries = [f.retry_at - time.monotonic() for f in self._failures.values()]
        return max(self.delay_s, min([POLL_S, *retries]))

    # failures ------------------------------------------------------------------
    def _waiting(self, video_id: str | None) -> bool:
        with self._lock:
            failure = self._failures.get(video_id)
            return failure is not None and time.monotonic() < failure.retry_at

    def _failed(self, video_id: str | None, exc: Exception) -> None:
        what = f"video {video_id!r}" if video_id is not None else "the model or the store"
        if isinstance(exc, M3AgentError):
            message, hint = exc.message, exc.hint
            log.warning("idle consolidation of %s failed: %s (%s)", what, message, hint)
        else:
            message, hint = f"{type(exc).__name__}: {exc}", "see the server log"
            log.exception("idle consolidation of %s crashed", what)
        with self._lock:
            previous = self._failures.get(video_id)
            count = previous.count + 1 if previous else 1
            wait = self.settings.server.consolidate_retry_s * min(2 ** (count - 1), MAX_BACKOFF)
            self._failures[video_id] = Failure(video_id, message, hint, count, time.monotonic() + wait)
            self._last_error = f"{what}: {message}"
        self._set(IdleState.FAILED, video_id)

    def _set(self, state: IdleState, video_id: str | None = None) -> None:
        with self._lock:
            self._state = state
            if video_id is not None:
                self._video = video_id
            self._updated_at = time.time()

    # the API's view --------------------------------------------------------------
    def status(self, store: MemoryStore) -> ConsolidationStatus:
        """The state, the clips still to consolidate (read from ``store``), the last video's report and the
        failures waiting for their retry."""
        from m3agent.server.api.schemas import ConsolidationFailure, ConsolidationStatus

        pending = pending_clips(store, self.options.clips_per_call)
        now = time.monotonic()
        with self._lock:
            failures = [ConsolidationFailure(video_id=f.video_id, error=f.error, hint=f.hint, failures=f.count,
                                             retry_in_s=round(max(0.0, f.retry_at - now), 1))
                        for f in self._failures.values()]
            return ConsolidationStatus(
                enabled=self.enabled, model=self.spec, state=self._state.value, video_id=self._video,
                pending_clips=pending, units_done=self._units, last_error=self._last_error, failures=failures,
                last_report=None if self._report is None else self._report.to_dict(), updated_at=self._updated_at)


def pending_clips(store: MemoryStore, clips_per_call: int) -> int:
    """Stored clips of every video that are not consolidated yet."""
    from m3agent.memorize.consolidation.consolidate import pending_units

    return sum(len(unit) for video in store.videos()
               for unit in pending_units(store, video.video_id, clips_per_call)[0])
