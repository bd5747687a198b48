"""Ingest: source -> clips -> perception -> identity -> memories -> store, resumable.

Clips are processed in strict time order; each clip's rows (observations,
entities, memories, timings) are written in one store transaction, so an
interrupted ingest resumes after the last committed clip with no duplicates.
Faces and voices of a clip are perceived concurrently (both run native code
that releases the GIL), so the two CPU cores are both busy.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.ahead import ahead
from m3agent.domain import ClipMedia, ClipPerception, ClipSenses, ClipStatus, Video
from m3agent.errors import M3AgentError, StoreError, StoreFullError, VideoMismatchError

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.identity.resolver import ResolvedClip
    from m3agent.memorize import MemoryWriter
    from m3agent.memorize.rules import WriteRules
    from m3agent.perception.attributes.clip import ClipMeasures
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore


@dataclass
class IngestReport:
    """What an ingest run did; printed by the CLI and recorded by the benchmark."""

    video_id: str
    source: str
    clips_done: int = 0
    clips_failed: list[dict[str, Any]] = field(default_factory=list)
    clips_already_done: int = 0
    memories_written: int = 0
    new_entities: int = 0
    media_seconds: float = 0.0
    wall_seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    consolidation: dict[str, Any] = field(default_factory=dict)
    started_at: float = field(default_factory=time.perf_counter, repr=False)

    @property
    def rtf(self) -> float:
        return self.wall_seconds / self.media_seconds if self.media_seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("started_at")
        data["rtf"] = round(self.rtf, 3)
        data["stage_seconds"] = {k: round(v, 2) for k, v in self.stage_seconds.items()}
        return data


def ingest_source(settings: Settings, source: str, *, video_id: str | None = None, stored_source: str | None = None,
                  perception_only: bool = False, max_clips: int | None = None, show_progress: bool = True,
                  on_clip: Callable[[IngestReport], None] | None = None,
                  on_wait: Callable[[str], None] | None = None, consolidate: bool = True,
                  new_id_on_clash: bool = False) -> IngestReport:
    """Ingest ``source`` into ``settings.memory``; rerunning continues after the last committed clip.

    ``on_clip(report)`` runs after each clip is committed (or recorded as failed): the server's
    job progress. An exception it raises stops the ingest there; the clips done so far stay.
    The run holds the video's writer lock, so a second ingest of the same video
    waits (``on_wait`` gets a message; default: stderr) and then finds the clips
    done, instead of writing them twice. A failed clip is recorded with its
    reason and retried by the next run; ``report.clips_failed`` lists them.
    ``consolidate=False`` leaves the video's consolidation to someone else (the
    server consolidates while idle, one unit at a time, so jobs never wait on it).
    ``stored_source`` is the name the video is recorded under when ``source`` is only
    a way to read it (the server reads a checked path through its open file).
    One video id names one file (its content fingerprint is stored): a different file under a stored id
    raises :class:`~m3agent.errors.VideoMismatchError`, or with ``new_id_on_clash`` (an id derived from the
    file's name) goes to the first of ``id-2``, ``id-3``, … that is free or holds this file; the report's
    ``video_id`` and ``problems`` say so.
    """
    from m3agent.embed import create_embedder
    from m3agent.media import default_video_id, iter_clips, probe
    from m3agent.media.fingerprint import file_fingerprint
    from m3agent.memorize.embedding import ensure_embedding_model
    from m3agent.store import open_memory

    info = probe(source)
    if stored_source is not None:
        info = dataclasses.replace(info, source=stored_source)
    vid = video_id or default_video_id(stored_source or source)
    embedder = create_embedder(settings.embedder, threads=settings.perception.threads)
    memorizer = None if perception_only else Memorizer.from_settings(settings, embedder)
    video = dataclasses.replace(info.to_video(vid, max_frame_side=settings.media.max_frame_side),
                                fingerprint=file_fingerprint(source))
    with open_memory(settings) as store, \
            _claimed(store, video, new_id_on_clash, on_wait or _tell_waiting) as vid:
        ensure_embedding_model(store, embedder)
        done = {c.index for c, status, _ in store.clips(vid) if status == ClipStatus.DONE}
        start = _first_missing(done)
        report = IngestReport(video_id=vid, source=info.source, clips_already_done=len(done))
        if vid != video.video_id:
            report.problems.append(f"{video.video_id!r} already names another file: this one is {vid!r}")
        context_s = settings.perception.voice_context_seconds if settings.perception.voices else 0.0
        first = max(0, start - 1) if context_s > 0 else start  # a resumed run hears the clip before it too
        clips = _limit(_with_context(iter_clips(source, settings.media, first, video_id=vid), context_s),
                       done, max_clips)
        with _progress(show_progress, info.duration_s, settings.media.clip_seconds, start) as advance, \
                perceived_ahead(clips, settings) as perceived:
            for media, perception in perceived:
                full = _ingest_clip(store, memorizer, settings, media, perception, report)
                advance(report)
                if on_clip is not None:
                    on_clip(report)
                if full:
                    report.problems.append(f"stopped after clip {media.clip.index}: the memory store is full; "
                                           "free disk space and rerun to continue")
                    break
    if not perception_only and consolidate:
        report.consolidation = _consolidate(settings, embedder, vid, show_progress, on_wait)
    return report


@contextmanager
def _claimed(store: MemoryStore, video: Video, new_id_on_clash: bool,
             on_wait: Callable[[str], None]) -> Iterator[str]:
    """The video registered and its writer lock held for the block; yields its id (see :func:`ingest_source`)."""
    for n in itertools.count(1):
        vid = video.video_id if n == 1 else f"{video.video_id}-{n}"
        with store.video_lock(vid, on_wait=on_wait):
            try:
                store.add_video(dataclasses.replace(video, video_id=vid))
            except VideoMismatchError:
                if not new_id_on_clash:
                    raise
                continue
            yield vid
            return


def _consolidate(settings: Settings, embedder: Embedder, video_id: str, show_progress: bool,
                 on_wait: Callable[[str], None] | None) -> dict[str, Any]:
    """Semantic consolidation of the video's new clips when an LLM is configured (its report), else
    ``{"skipped": why}``; a failure is reported, never raised: the ingested clips stay and
    ``m3agent consolidate`` resumes it."""
    from m3agent.llm import chat_model_from_settings
    from m3agent.memorize.consolidation.run import DEFERRED, SKIPPED, consolidate_store, consolidation_model
    from m3agent.store import open_memory

    spec = consolidation_model(settings)
    if spec is None:
        return {"skipped": SKIPPED}
    if not settings.memorize.consolidate_after_ingest:
        return {"skipped": DEFERRED}
    try:
        chat = chat_model_from_settings(settings, spec)
        with open_memory(settings) as store:
            reports = consolidate_store(store, settings, chat, embedder, [video_id], show_progress=show_progress,
                                        on_wait=on_wait)
    except M3AgentError as exc:
        return {"failed": f"{exc.message}; rerun `m3agent consolidate` to continue ({exc.hint})"}
    return reports[0].to_dict()


def _tell_waiting(message: str) -> None:
    sys.stderr.write(f"m3agent: {message} (Ctrl-C stops waiting)\n")
    sys.stderr.flush()


def _first_missing(done: set[int]) -> int:
    index = 0
    while index in done:
        index += 1
    return index


def _with_context(clips: Iterator[ClipMedia], seconds: float) -> Iterator[ClipMedia]:
    """``clips``, each with the last ``seconds`` of the previous clip's audio as ``context_audio`` (voices across
    a clip boundary) and its last frame as ``context_frame`` (a cut on the boundary); both are taken from the clip
    decoded just before, so a resumed run that starts one clip early gives every clip the context an
    uninterrupted run gives it."""
    previous: ClipMedia | None = None
    for media in clips:
        if previous is not None and previous.clip.index == media.clip.index - 1:
            if seconds > 0 and previous.audio is not None:
                tail = previous.audio[max(0, len(previous.audio) - round(seconds * previous.audio_rate)) :]
                media = dataclasses.replace(media, context_audio=tail)
            if previous.frames:
                media = dataclasses.replace(media, context_frame=previous.frames[-1])
        previous = media
        yield media


def _limit(clips: Iterator[ClipMedia], done: set[int], max_clips: int | None) -> Iterator[ClipMedia]:
    count = 0
    for media in clips:
        if media.clip.index in done:
            continue
        if max_clips is not None and count >= max_clips:
            return
        count += 1
        yield media


def _ingest_clip(store: MemoryStore, memorizer: Memorizer | None, settings: Settings, media: ClipMedia,
                 perception: ClipPerception | Exception, report: IngestReport) -> bool:
    """Resolve identities and write memories of one perceived clip in one transaction.

    Returns whether the store is full (no later clip can be written either, so the run stops).
    """
    started = time.perf_counter()
    report.problems.extend(media.problems)
    full = False
    try:
        if isinstance(perception, Exception):
            raise perception
        report.problems.extend(f"clip {media.clip.index}: {skip.stage} skipped: {skip.reason}"
                               for skip in perception.senses.skipped)
        measures = _measure(perception, settings)
        with store.clip(media.clip) as writer:
            memories = _write_clip(store, writer, memorizer, settings, perception, report, measures)
            for stage, seconds in perception.timings.items():
                writer.record_timing(stage, seconds)
        report.memories_written += memories
        report.clips_done += 1
    except M3AgentError as exc:
        full = isinstance(exc, StoreFullError)
        _record_failure(store, media, report, exc.message)
    except (ValueError, RuntimeError, MemoryError) as exc:
        _record_failure(store, media, report, f"{type(exc).__name__}: {exc}")
    report.media_seconds += media.clip.duration_s
    report.wall_seconds = time.perf_counter() - report.started_at
    report.stage_seconds["write"] = report.stage_seconds.get("write", 0.0) + time.perf_counter() - started
    if not isinstance(perception, Exception):
        for stage, seconds in perception.timings.items():
            report.stage_seconds[stage] = report.stage_seconds.get(stage, 0.0) + seconds
    return full


@contextmanager
def perceived_ahead(clips: Iterator[ClipMedia],
                    settings: Settings) -> Iterator[Iterator[tuple[ClipMedia, ClipPerception | Exception]]]:
    """Decode the next clip in one background thread and perceive the one before it in another, while the caller
    writes the one before that: decoding a 30 s clip is a second or more of one core, which perception's stages
    would otherwise wait for at every clip.

    At most one decoded and one perceived clip wait, so memory stays bounded on long or live sources. The store
    is only touched by the caller's thread. Perception errors travel with their clip and are recorded as a failed
    clip by the caller; decode errors end the stream and are re-raised.
    """
    def perceive_each(decoded: Iterator[ClipMedia]) -> Iterator[tuple[ClipMedia, ClipPerception | Exception]]:
        for media in decoded:
            try:
                result: ClipPerception | Exception = perceive_clip(media, settings)
            except (M3AgentError, ValueError, RuntimeError, MemoryError) as exc:
                result = exc
            yield media, result

    with one_blas_thread(), ahead(clips, "m3agent-decode") as decoded, \
            ahead(perceive_each(decoded), "m3agent-perception") as perceived:
        yield perceived


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """The BLAS libraries loaded so far (numpy's) on one thread while perception runs, unless a stage asks for more
    (the ASR's pass sets its own). Perception's matrix products are small (mel filterbanks, embeddings) and run
    beside other stages: a second BLAS thread mostly spins. On the debate the voice stage took 1.44 CPU s for
    1.17 s of diarization and 0.48 for 0.23 s of CAM++; with one thread CPU equals wall, and perception's RTF
    was 0.43-0.46 against 0.47-0.50 (three runs each, alternating; docs/benchmarks.md, Identity: a change of
    voice inside a turn)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _record_failure(store: MemoryStore, media: ClipMedia, report: IngestReport, reason: str) -> None:
    """Record a failed clip, unless it is stored already (then another writer did it, and it stays done)."""
    try:
        if any(c.index == media.clip.index and s == ClipStatus.DONE for c, s, _ in store.clips(media.clip.video_id)):
            report.clips_already_done += 1
            return
        store.mark_clip(media.clip, ClipStatus.FAILED, reason)
    except StoreError as exc:  # e.g. a full disk: the clip stays not done, so the next run retries it anyway
        reason = f"{reason} (not recorded in the memory: {exc.message})"
    report.clips_failed.append({"clip": media.clip.index, "reason": reason})


@dataclass(frozen=True, slots=True)
class Memorizer:
    """The memory writer (perception, mllm or local), its write rules and the text embedder."""

    writer: MemoryWriter
    rules: WriteRules
    embedder: Embedder

    @classmethod
    def from_settings(cls, settings: Settings, embedder: Embedder) -> Memorizer:
        from m3agent.memorize import create_writer
        from m3agent.memorize.rules import WriteRules

        return cls(create_writer(settings), WriteRules.from_settings(settings), embedder)


def _write_clip(store: MemoryStore, writer: Any, memorizer: Memorizer | None, settings: Settings,
                perception: ClipPerception, report: IngestReport, measures: ClipMeasures | None = None) -> int:
    """Identities and the measured attributes of their entities, then memories (unless perception-only),
    inside the clip's transaction."""
    from m3agent.identity.resolver import IdentityRules, resolve_clip
    from m3agent.memorize.rules import memorize_clip

    started = time.perf_counter()
    resolved = resolve_clip(store, writer, perception, IdentityRules.from_settings(settings))
    report.new_entities += len(resolved.new_entities)
    writer.record_timing("identity", time.perf_counter() - started)
    if measures is not None:
        _write_attributes(writer, measures, resolved, report)
    if memorizer is None:
        return 0
    started = time.perf_counter()
    _, stats = memorize_clip(store, writer, memorizer.writer, perception.media, resolved, memorizer.embedder,
                             fps=settings.media.frame_fps, rules=memorizer.rules, senses=perception.senses)
    writer.record_timing("memorize", time.perf_counter() - started)
    return int(stats.inserted)


def _measure(perception: ClipPerception, settings: Settings) -> ClipMeasures | None:
    """The clip's measured descriptions (:mod:`m3agent.perception.attributes.clip`), taken before its
    transaction opens, their seconds added to the clip's timings as ``attributes``; ``None`` when switched off."""
    if not settings.perception.attributes:
        return None
    from m3agent.perception.attributes.clip import measure_clip

    started = time.perf_counter()
    measures = measure_clip(perception, threads=settings.perception.threads)
    perception.timings["attributes"] = time.perf_counter() - started
    return measures


def _write_attributes(writer: Any, measures: ClipMeasures, resolved: ResolvedClip, report: IngestReport) -> None:
    """The measured attributes of the clip's entities and its shots, written with the clip; a failed estimator
    is reported as a skip (the clip is ingested all the same)."""
    from m3agent.perception.attributes.clip import entity_attributes

    rows, skipped = entity_attributes(measures, resolved.tracks, resolved.voices)
    for row in rows:
        writer.add_attribute(row)
    for shot in measures.shots:
        writer.add_shot(shot)
    report.problems.extend(f"clip {measures.clip.index}: attribute {name} skipped: {reason}"
                           for name, reason in (*measures.skipped, *skipped))


def perceive_clip(media: ClipMedia, settings: Settings) -> ClipPerception:
    """Faces, voices and the scene stages of one clip, computed concurrently; per-stage wall times in
    ``timings``."""
    timings: dict[str, float] = {}

    def timed(name: str, func: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args)
        finally:
            timings[name] = time.perf_counter() - started

    from m3agent.perception.scene.senses import any_enabled, perceive_senses

    with ThreadPoolExecutor(max_workers=3) as pool:
        faces = voices = None
        senses = (pool.submit(perceive_senses, media, settings.senses, settings.resolved_cache_dir(), timings)
                  if any_enabled(settings.senses) else None)
        if settings.perception.faces and media.frames:
            from m3agent.perception.faces import perceive_faces

            faces = pool.submit(timed, "faces", perceive_faces, media, settings.perception)
        if settings.perception.voices and media.audio is not None:
            from m3agent.perception.audio.voices import perceive_speech

            voices = pool.submit(timed, "voices", perceive_speech, media, settings)
        tracks = faces.result() if faces else ()
        if tracks and settings.perception.active_speaker:
            tracks = timed("asd", _active_speaker, media, tracks, settings)
        segments, carried = voices.result() if voices else ((), ())
        scene = senses.result() if senses else ClipSenses()
    return ClipPerception(media=media, tracks=tuple(tracks), voices=tuple(segments), timings=timings, senses=scene,
                          carried=carried)


def _active_speaker(media: ClipMedia, tracks: Any, settings: Settings) -> Any:
    """The tracks with each sighting's mouth motion (:mod:`m3agent.perception.asd_video`)."""
    from m3agent.perception.asd_video import active_speaker

    return active_speaker(media, tracks, settings)


@contextmanager
def _progress(enabled: bool, duration_s: float | None, clip_seconds: float, start: int) -> Iterator[Any]:
    """A rich progress bar of clips, with the running real-time factor; a no-op when disabled."""
    if not enabled:
        yield lambda report: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = None if duration_s is None else max(1, int(-(-duration_s // clip_seconds)))
    columns = (TextColumn("[bold]ingest[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("clips"),
               TimeElapsedColumn(), TextColumn("{task.fields[status]}"))
    from rich.console import Console

    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task("ingest", total=total, completed=start, status="")

        def advance(report: IngestReport) -> None:
            status = f"RTF {report.rtf:.2f}  memories {report.memories_written}  failed {len(report.clips_failed)}"
            progress.update(task, advance=1, status=status)

        yield advance
