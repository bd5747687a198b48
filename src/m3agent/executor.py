"""Ingest many videos: one after another here, or as Ray tasks that write one shared memory.

``ingest_videos(settings, sources)`` expands folders into their video files and
ingests every video with :func:`m3agent.pipeline.ingest_source`, by the
executor ``settings.executor.kind``:

- ``local``: in this process, one video after another;
- ``ray``: one Ray task per video, declaring ``cpus_per_task`` CPUs and
  ``gpus_per_task`` GPUs, on the cluster at ``ray_address`` or on a local one
  of ``workers`` tasks. Every task writes the shared memory, so the memory must
  be a PostgreSQL URL (a SQLite file is one machine's, and one writer's).

A failed video is tried again up to ``retries`` times. A retry never
duplicates anything: ingest commits clip by clip and resumes after the last
committed clip (the store refuses a clip that is already stored). Outcomes
are reported per video as they arrive (``on_outcome``); Ray is imported only
when used (extra ``[ray]``). :func:`map_on_ray` (tasks, retries, results as they
arrive) also runs M3-Bench questions (:mod:`m3agent.bench.m3.ray_tasks`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, M3AgentError, MissingExtraError
from m3agent.store.location import StoreKind

if TYPE_CHECKING:
    from m3agent.settings import ExecutorSettings, Settings

VIDEO_SUFFIXES = frozenset({".mp4", ".mkv", ".avi", ".mov", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".flv"})
OBJECT_STORE_BYTES = 200 * 1024 * 1024  # a local cluster moves only small reports: keep its shared memory small


@dataclass(frozen=True, slots=True)
class VideoJob:
    source: str
    video_id: str


@dataclass
class VideoOutcome:
    """What became of one video: its ingest report, or the error of its last attempt."""

    source: str
    video_id: str
    ok: bool
    attempts: int
    report: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    wall_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def video_jobs(paths: Sequence[str], video_id: str | None = None) -> list[VideoJob]:
    """One job per video: files and URLs as given, folders expanded to their video files (sorted)."""
    from m3agent.media import default_video_id

    sources: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.is_file() and f.suffix.lower() in VIDEO_SUFFIXES)
            if not found:
                raise ConfigError(f"no video files in {raw}", hint=f"videos end in {', '.join(sorted(VIDEO_SUFFIXES))}")
            sources.extend(found)
        else:
            sources.append(raw)
    sources = list(dict.fromkeys(sources))
    if video_id is not None and len(sources) != 1:
        raise ConfigError("--video-id names one video, but several are given", hint="drop --video-id")
    jobs = [VideoJob(s, video_id or default_video_id(s)) for s in sources]
    ids = [j.video_id for j in jobs]
    twins = sorted({i for i in ids if ids.count(i) > 1})
    if twins:
        raise ConfigError(f"several videos would get the id {twins[0]!r}",
                          hint="rename the files, or ingest them apart")
    return jobs


def ingest_videos(settings: Settings, jobs: Sequence[VideoJob], *, perception_only: bool = False,
                  max_clips: int | None = None,
                  on_outcome: Callable[[VideoOutcome], None] | None = None) -> list[VideoOutcome]:
    """Ingest every job with the configured executor; outcomes in job order."""
    args = {"perception_only": perception_only, "max_clips": max_clips}
    report = on_outcome or (lambda outcome: None)
    if settings.executor.kind == "ray":
        return _on_ray(settings, jobs, args, report)
    outcomes = []
    for job in jobs:
        outcomes.append(_with_retries(settings, job, args))
        report(outcomes[-1])
    return outcomes


def ingest_task(settings_json: str, source: str, video_id: str, args: dict[str, Any]) -> dict[str, Any]:
    """One video (run in a Ray worker): settings travel as JSON, the report comes back as a dict."""
    from m3agent.pipeline import ingest_source
    from m3agent.settings import Settings

    settings = Settings.model_validate(json.loads(settings_json))
    return ingest_source(settings, source, video_id=video_id, show_progress=False, **args).to_dict()


def _with_retries(settings: Settings, job: VideoJob, args: dict[str, Any]) -> VideoOutcome:
    started = time.perf_counter()
    error = ""
    for attempt in range(1, settings.executor.retries + 2):
        try:
            report = ingest_task(settings.model_dump_json(), job.source, job.video_id, args)
        except M3AgentError as exc:
            error = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            continue
        return VideoOutcome(job.source, job.video_id, True, attempt, report, wall_seconds=time.perf_counter() - started)
    return VideoOutcome(job.source, job.video_id, False, settings.executor.retries + 1, error=error,
                        wall_seconds=time.perf_counter() - started)


def _on_ray(settings: Settings, jobs: Sequence[VideoJob], args: dict[str, Any],
            report: Callable[[VideoOutcome], None]) -> list[VideoOutcome]:
    if settings.memory.kind is not StoreKind.POSTGRES:
        raise ConfigError("Ray workers write one shared memory, and a SQLite file is one machine's",
                          hint="use --memory postgresql://... (see README, Scale-out)")
    settings_json = settings.model_dump_json()
    calls = [(settings_json, job.source, job.video_id, args) for job in jobs]
    outcomes: dict[int, VideoOutcome] = {}

    def done(result: TaskResult) -> None:
        job = jobs[result.index]
        outcomes[result.index] = VideoOutcome(job.source, job.video_id, result.ok, result.attempts,
                                              result.value if result.ok else {}, error=result.error,
                                              wall_seconds=result.wall_seconds)
        report(outcomes[result.index])

    cfg = settings.executor
    map_on_ray(settings, ingest_task, calls, num_cpus=cfg.cpus_per_task, num_gpus=cfg.gpus_per_task, on_result=done)
    return [outcomes[i] for i in range(len(jobs))]


@dataclass(frozen=True, slots=True)
class TaskResult:
    """One call of :func:`map_on_ray`: its value, or the error of its last attempt."""

    index: int
    ok: bool
    attempts: int
    value: Any = None
    error: str = ""
    wall_seconds: float = 0.0


def map_on_ray(settings: Settings, function: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
               num_cpus: float, num_gpus: float = 0.0, in_flight: int | None = None,
               on_result: Callable[[TaskResult], None]) -> None:
    """Run ``function(*call)`` for every call as a Ray task; report each result as it arrives.

    A task that fails (an exception, or its worker died) is submitted again up to
    ``settings.executor.retries`` times; the caller makes a retry harmless (ingest resumes
    after committed clips, a question is answered anew). At most ``in_flight`` tasks are
    submitted at once (``None``: all; the cluster's resources then bound what runs).
    """
    ray = _ray()
    _connect(ray, settings.executor)
    task = ray.remote(function).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)
    retries = settings.executor.retries
    window = len(calls) if in_flight is None else max(1, in_flight)
    started = time.perf_counter()
    waiting = list(reversed(range(len(calls))))
    pending: dict[Any, tuple[int, int]] = {}  # object ref -> (call index, attempt)
    while waiting or pending:
        while waiting and len(pending) < window:
            index = waiting.pop()
            pending[task.remote(*calls[index])] = (index, 1)
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        index, attempt = pending.pop(ref)
        elapsed = time.perf_counter() - started
        try:
            value = ray.get(ref)
        except ray.exceptions.RayError as exc:
            if attempt <= retries:
                pending[task.remote(*calls[index])] = (index, attempt + 1)
                continue
            on_result(TaskResult(index, False, attempt, error=_cause(exc), wall_seconds=elapsed))
        else:
            on_result(TaskResult(index, True, attempt, value, wall_seconds=elapsed))


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingExtraError("the Ray executor", "ray", package="ray") from None
    return ray


def _connect(ray: Any, cfg: ExecutorSettings) -> None:
    """Join ``ray_address``, or start a local cluster sized for ``workers`` tasks (reused if already up)."""
    if ray.is_initialized():
        return
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "warning"}
    if cfg.ray_address:
        ray.init(address=cfg.ray_address, **quiet)
        return
    ray.init(num_cpus=cfg.workers * cfg.cpus_per_task, num_gpus=cfg.workers * cfg.gpus_per_task,
             object_store_memory=OBJECT_STORE_BYTES, **quiet)


def _cause(exc: Exception) -> str:
    """The error a failed task raised, without Ray's traceback wrapping."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, M3AgentError):
        return f"{cause.message} ({cause.hint})" if cause.hint else cause.message
    if cause is not None:
        return f"{type(cause).__name__}: {cause}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
