"""Ingest jobs: one worker thread per served memory, a journal beside it, resumed after a restart.

A job is queued by the API (a path, an upload or a URL), run by
:func:`m3agent.pipeline.ingest_source` in the worker thread (so it survives
client disconnects), and reports progress after every committed clip.
Cancelling takes effect at the next clip boundary; the clips committed so far
stay. The journal (``jobs.json`` in the server's data folder, rewritten
atomically) lists every job; at start-up, jobs that were queued or running
are queued again, and the ingest resumes after the last clip the store holds,
as ``m3agent ingest`` does when rerun.

Files: a path job checks its path again when it runs (still inside
``server.allowed_folders``, no symlink swapped in since it was accepted); a URL
job downloads its file through the checked fetcher (:mod:`m3agent.server.fetch`)
into the uploads folder and ingests that copy. The server's copies (uploads and
downloads) leave with their cancelled job or their forgotten video, and so do
the finished jobs of a forgotten video.

While no job is queued the worker consolidates (:mod:`m3agent.server.idle`):
after ``server.consolidate_idle_s`` without a job it runs one unit of clips at a
time, looking at the queue between units, so a new job waits for at most one
unit; jobs then leave consolidation to it instead of consolidating their video
at their end.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import queue
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from m3agent.errors import AccessDeniedError, DownloadError, M3AgentError, NotFoundError

if TYPE_CHECKING:
    from m3agent.pipeline import IngestReport
    from m3agent.server.idle import IdleConsolidator
    from m3agent.settings import Settings

log = logging.getLogger(__name__)

JOURNAL = "jobs.json"
UPLOADS = "uploads"
SourceKind = Literal["path", "upload", "url"]


class JobState(enum.StrEnum):
    """Where a job is; queued and running ones (:data:`ACTIVE`) are resumed after a restart."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE = (JobState.QUEUED, JobState.RUNNING)


class Job(BaseModel, frozen=True):
    """One ingest job as the API shows it; replaced (never mutated) as it progresses."""

    id: str = Field(description="job id")
    source: str = Field(description="what is ingested: a server path, a stored upload, or a URL")
    source_kind: SourceKind
    video_id: str
    id_derived: bool = Field(False, description="the id came from the file's or URL's name: when it already "
                             "names another file, the job takes the next free one (name-2, name-3, ...)")
    max_clips: int | None = None
    perception_only: bool = False
    state: JobState = JobState.QUEUED
    clips_total: int | None = Field(None, description="clips the source holds (unknown for live streams)")
    clips_done: int = Field(0, description="clips committed by this job")
    clips_already_done: int = Field(0, description="clips the store held before this run")
    clips_failed: int = 0
    memories_written: int = 0
    rtf: float = Field(0.0, description="wall seconds per media second so far")
    error: str | None = None
    hint: str | None = None
    resumed: int = Field(0, description="how many times a restart resumed this job")
    created_at: float = Field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None


class Cancelled(Exception):
    """Raised from the progress hook to stop an ingest at a clip boundary."""


class JobRunner:
    """Queue, worker thread and journal of the ingest jobs of one memory."""

    def __init__(self, settings: Settings, folder: Path, on_change: Callable[[], None] = lambda: None,
                 idle: IdleConsolidator | None = None) -> None:
        self.settings = settings
        self.idle = idle if idle is not None and idle.enabled else None
        self.on_change = on_change
        self.folder = folder
        self.uploads = folder / UPLOADS
        self._jobs: dict[str, Job] = {}
        self._cancel: set[str] = set()
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._stopping: set[str] = set()

    # lifecycle --------------------------------------------------------------
    def start(self) -> None:
        """Load the journal, queue again what was queued or running, start the worker."""
        for job in self._load():
            if job.state in ACTIVE:
                job = job.model_copy(update={"state": JobState.QUEUED, "resumed": job.resumed + 1})
                self._queue.put(job.id)
                self._idle.clear()
            self._jobs[job.id] = job
        self._save()
        self._thread = threading.Thread(target=self._work, name="m3agent-jobs", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the running job to stop at its next clip and end the worker; unfinished jobs stay active in the
        journal, so the next start resumes them."""
        with self._lock:
            running = [j.id for j in self._jobs.values() if j.state == JobState.RUNNING]
            self._stopping.update(running)
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout)

    # API ----------------------------------------------------------------------
    def submit(self, source: str, kind: SourceKind, video_id: str, *, max_clips: int | None = None,
               perception_only: bool = False, id_derived: bool = False) -> Job:
        """Queue an ingest of ``source`` and journal it, so it survives a restart; returns the queued job.
        ``id_derived``: ``video_id`` was made from the source's name, not asked for (see :class:`Job`)."""
        job = Job(id=uuid.uuid4().hex[:12], source=source, source_kind=kind, video_id=video_id,
                  id_derived=id_derived, max_clips=max_clips, perception_only=perception_only)
        with self._lock:
            self._jobs[job.id] = job
            self._save()
        self._idle.clear()
        self._queue.put(job.id)
        return job

    def get(self, job_id: str) -> Job:
        """The job's current state (:class:`~m3agent.errors.NotFoundError` for an unknown id)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id}", hint="list jobs with GET /api/jobs")
        return job

    def all(self) -> list[Job]:
        """Every journaled job, newest first."""
        with self._lock:
            return sorted(self._jobs.values(), key=lambda j: j.created_at, reverse=True)

    def cancel(self, job_id: str) -> Job:
        """Cancel a queued job now, a running one at its next clip boundary; finished jobs are left as they are."""
        with self._lock:
            job = self.get(job_id)
            if job.state == JobState.QUEUED:
                job = self._update(job_id, state=JobState.CANCELLED, finished_at=time.time())
                self._discard(job)
            elif job.state == JobState.RUNNING:
                self._cancel.add(job_id)
            return job

    def active_job_of(self, video_id: str) -> Job | None:
        """The queued or running job of ``video_id``, if any (the running one first)."""
        with self._lock:
            active = [j for j in self._jobs.values() if j.video_id == video_id and j.state in ACTIVE]
        return min(active, key=lambda j: (j.state != JobState.RUNNING, j.created_at), default=None)

    def forget_video(self, video_id: str, source: str) -> None:
        """After the video was deleted: delete the server's copy of its file and its finished jobs (with
        their copies); active jobs stay."""
        self._unlink_copy(Path(source))
        with self._lock:
            gone = [j for j in self._jobs.values() if j.video_id == video_id and j.state not in ACTIVE]
            for job in gone:
                del self._jobs[job.id]
                self._discard(job)
            if gone:
                self._save()

    def wait_idle(self, timeout: float) -> bool:
        """Block until no job is queued or running (tests, shutdown)."""
        return self._idle.wait(timeout)

    # worker -------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job_id = self._next_job()
            if job_id is None:
                return
            with self._lock:
                job = self._jobs.get(job_id)
                if job is None or job.state != JobState.QUEUED:
                    self._mark_idle()
                    continue
                self._update(job_id, state=JobState.RUNNING, started_at=time.time())
            self._run(job)
            with self._lock:
                self._mark_idle()

    def _next_job(self) -> str | None:
        """The next queued job id (``None``: stop). Until one comes, idle work runs one step at a time: the first
        after ``consolidate_idle_s`` without a job, the next at once while steps find work (the queue is looked
        at between them), else after :meth:`IdleConsolidator.next_wait`."""
        idle = self.idle
        if idle is None:
            return self._queue.get()
        wait = idle.delay_s
        while True:
            try:
                return self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                pass
            wait = 0.0 if self._idle_step(idle) else idle.next_wait()

    @staticmethod
    def _idle_step(idle: IdleConsolidator) -> bool:
        try:
            return idle.step()
        except Exception:  # the step records its own failures; this is the last guard of the worker
            log.exception("idle work crashed")
            return False

    def _mark_idle(self) -> None:
        if all(j.state not in ACTIVE for j in self._jobs.values()):
            self._idle.set()

    def _run(self, job: Job) -> None:
        from m3agent.pipeline import ingest_source

        try:
            with self._local_source(job) as source:
                self._update(job.id, clips_total=self._clips_total(source))
                report = ingest_source(self.settings, source, video_id=job.video_id,
                                       stored_source=job.source if job.source_kind == "path" else None,
                                       perception_only=job.perception_only, max_clips=job.max_clips,
                                       show_progress=False, on_clip=lambda r: self._progress(job.id, r),
                                       consolidate=self.idle is None, new_id_on_clash=job.id_derived)
            self._progress(job.id, report, final=True)
            self._finish(job.id, report)
        except Cancelled:
            if job.id in self._stopping:
                log.info("job %s interrupted by shutdown; it resumes at the next start", job.id)
                return
            with self._lock:  # whoever reads the job cancelled finds its copy gone (the lock is the readers')
                self._discard(self._update(job.id, state=JobState.CANCELLED, finished_at=time.time()))
        except M3AgentError as exc:
            self._update(job.id, state=JobState.FAILED, error=self._public(exc.message),
                         hint=self._public(exc.hint), finished_at=time.time())
        except Exception as exc:  # a job must end recorded, whatever went wrong in it
            log.exception("ingest job %s crashed", job.id)
            self._update(job.id, state=JobState.FAILED, error=self._public(f"{type(exc).__name__}: {exc}"),
                         hint="see the server log; rerun the job to resume after the last committed clip",
                         finished_at=time.time())
        finally:
            self._cancel.discard(job.id)

    def _finish(self, job_id: str, report: IngestReport) -> None:
        """Done, or failed when clips failed: their reasons in ``error`` (a rerun retries only those)."""
        if not report.clips_failed:
            self._update(job_id, state=JobState.DONE, finished_at=time.time())
            return
        reasons = "; ".join(f"clip {f['clip']}: {f['reason']}" for f in report.clips_failed[:5])
        more = len(report.clips_failed) - 5
        error = (f"{len(report.clips_failed)} clips failed ({reasons}{f'; {more} more' if more > 0 else ''});"
                 f" {report.clips_done} committed")
        self._update(job_id, state=JobState.FAILED, error=self._public(error), finished_at=time.time(),
                     hint="fix the cause, then submit the same source again: it retries only the failed clips")

    @contextmanager
    def _local_source(self, job: Job) -> Iterator[str]:
        """The local file the job ingests: its path checked again and held open now (what is read is the file
        that was checked, whatever is swapped in later), its upload, or its URL downloaded."""
        if job.source_kind == "path":
            with held_at_use(job.source, self.settings.server.allowed_folders) as held:
                yield held
            return
        if job.source_kind == "upload":
            yield job.source
            return
        target = self._downloaded(job)
        try:
            yield target
        except BaseException:
            self._drop_unrecorded(target)
            raise

    def _public(self, text: str) -> str:
        """An error for the API: no server folder named, bounded (:func:`m3agent.server.failures.public`)."""
        from m3agent.server.failures import private_folders, public

        return public(text, private_folders(self.settings, self.folder))

    def _drop_unrecorded(self, download: str) -> None:
        """Delete a URL job's download that no stored video reads (its job failed before recording one)."""
        from m3agent.store import open_memory

        try:
            with open_memory(self.settings) as store:
                if any(video.source == download for video in store.videos()):
                    return
        except M3AgentError:
            return  # the memory cannot tell: keep the file
        self._unlink_copy(Path(download))

    def _downloaded(self, job: Job) -> str:
        """A URL job's file, downloaded by the checked fetcher (a cancel or a shutdown stops it)."""
        from m3agent.server.fetch import FetchPolicy, download

        target = self._download_path(job)
        self.uploads.mkdir(parents=True, exist_ok=True)
        try:
            download(job.source, target, FetchPolicy.of(self.settings.server),
                     keep_going=lambda: job.id not in self._cancel and job.id not in self._stopping)
        except DownloadError:
            target.unlink(missing_ok=True)
            if job.id in self._cancel or job.id in self._stopping:
                raise Cancelled(job.id) from None
            raise
        return str(target)

    def _download_path(self, job: Job) -> Path:
        """Where a URL job's download goes: the uploads folder, named by the job (a rerun overwrites it)."""
        from urllib.parse import urlsplit

        suffix = Path(urlsplit(job.source).path).suffix.lower()
        return self.uploads / f"url-{job.id}{suffix if suffix in self.settings.server.upload_extensions else ''}"

    def _discard(self, job: Job) -> None:
        """Delete the server's copy of the job's file (its upload or download), if it made one."""
        if job.source_kind == "upload":
            self._unlink_copy(Path(job.source))
        elif job.source_kind == "url":
            self._unlink_copy(self._download_path(job))

    def _unlink_copy(self, path: Path) -> None:
        """Delete ``path`` if it is a file of the uploads folder (never anything else)."""
        if path.parent == self.uploads:
            path.unlink(missing_ok=True)

    def _clips_total(self, source: str) -> int | None:
        from m3agent.media import probe

        duration = probe(source).duration_s
        return None if not duration else max(1, int(-(-duration // self.settings.media.clip_seconds)))

    def _progress(self, job_id: str, report: IngestReport, *, final: bool = False) -> None:
        self.on_change()
        self._update(job_id, video_id=report.video_id, clips_done=report.clips_done,
                     clips_failed=len(report.clips_failed),
                     clips_already_done=report.clips_already_done, memories_written=report.memories_written,
                     rtf=round(report.rtf, 3))
        if not final and (job_id in self._cancel or job_id in self._stopping):
            raise Cancelled(job_id)

    # journal --------------------------------------------------------------------
    def _update(self, job_id: str, **changes: Any) -> Job:
        with self._lock:
            job = self._jobs[job_id].model_copy(update=changes)
            self._jobs[job_id] = job
            self._save()
            return job

    def _load(self) -> list[Job]:
        path = self.folder / JOURNAL
        if not path.exists():
            return []
        try:
            rows = json.loads(path.read_text())
            return [Job.model_validate(row) for row in rows]
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable job journal %s: %s", path, exc)
            return []

    def _save(self) -> None:
        """Write the journal (atomically), first dropping the oldest finished jobs past ``server.jobs_kept``."""
        self._prune()
        path = self.folder / JOURNAL
        tmp = path.with_suffix(".tmp")
        rows = [job.model_dump(mode="json") for job in self._jobs.values()]
        tmp.write_text(json.dumps(rows, separators=(",", ":")))
        os.replace(tmp, path)

    def _prune(self) -> None:
        finished = sorted((j for j in self._jobs.values() if j.state not in ACTIVE),
                          key=lambda j: j.finished_at or j.created_at, reverse=True)
        for job in finished[self.settings.server.jobs_kept:]:
            del self._jobs[job.id]


@contextmanager
def held_at_use(source: str, folders: list[Path]) -> Iterator[str]:
    """A path job's file, checked again when the job runs and held open while it is read.

    :class:`AccessDeniedError` when the path now lies outside ``folders``, is no regular file, or a symlink
    was swapped in for it (or a folder above it) since the job was accepted. The file is opened without
    following a final link, the kernel's own name for what was opened must be ``source``, and what the
    ingest reads is that open file (``/proc/PID/fd/N``): a swap after this check cannot change it."""
    from m3agent.server.security import confined

    resolved = confined(source, folders)
    swapped = AccessDeniedError(f"{source} became a link to another file after the job was accepted",
                                hint="links are not followed at run time; submit the file itself again")
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block
    except OSError:
        raise swapped from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise AccessDeniedError(f"{source} is not a file", hint="name a video or audio file")
        by_fd = Path(f"/proc/{os.getpid()}/fd/{fd}")
        pinned = by_fd.is_symlink()  # Linux's /proc; elsewhere the checked path is read
        opened = os.readlink(by_fd) if pinned else str(resolved)
        if opened != source or str(resolved) != source:
            raise swapped
        yield str(by_fd) if pinned else source
    finally:
        os.close(fd)
