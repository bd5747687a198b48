"""Ingest: source -> clips -> perception -> identity -> memories -> store, resumable.

Clips are processed in strict time order; each clip's rows (observations,
entities, memories, timings) are written in one store transaction, so an
interrupted ingest resumes after the last committed clip with no duplicates.
Faces and voices of a clip are perceived concurrently (both run native code
that releases the GIL), so the two CPU cores are both busy.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.domain import ClipMedia, ClipPerception, ClipStatus, Memory
from m3agent.errors import M3AgentError, NotAvailableYet

if TYPE_CHECKING:
    from m3agent.embed import Embedder
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

    @property
    def rtf(self) -> float:
        return self.wall_seconds / self.media_seconds if self.media_seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["rtf"] = round(self.rtf, 3)
        data["stage_seconds"] = {k: round(v, 2) for k, v in self.stage_seconds.items()}
        return data


def ingest_source(settings: Settings, source: str, *, video_id: str | None = None, perception_only: bool = False,
                  max_clips: int | None = None, show_progress: bool = True) -> IngestReport:
    """Ingest ``source`` into ``settings.memory``; rerunning continues after the last committed clip."""
    from m3agent.embed import create_embedder
    from m3agent.media import default_video_id, iter_clips, probe
    from m3agent.store import open_store

    if settings.writer != "perception" and not perception_only:
        raise NotAvailableYet(f"the {settings.writer!r} memory writer is not available yet",
                              hint="use the default perception writer (drop --writer)")
    info = probe(source)
    vid = video_id or default_video_id(source)
    embedder = create_embedder(settings.embedder, threads=settings.perception.threads)
    with open_store(settings.memory) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        store.add_video(info.to_video(vid))
        done = {c.index for c, status, _ in store.clips(vid) if status == ClipStatus.DONE}
        start = _first_missing(done)
        report = IngestReport(video_id=vid, source=str(source), clips_already_done=len(done))
        clips = iter_clips(source, settings.media, start, video_id=vid)
        with _progress(show_progress, info.duration_s, settings.media.clip_seconds, start) as advance:
            for media in _limit(clips, done, max_clips):
                _ingest_clip(store, embedder, settings, media, report, perception_only)
                advance(report)
    return report


def _first_missing(done: set[int]) -> int:
    index = 0
    while index in done:
        index += 1
    return index


def _limit(clips: Iterator[ClipMedia], done: set[int], max_clips: int | None) -> Iterator[ClipMedia]:
    count = 0
    for media in clips:
        if media.clip.index in done:
            continue
        if max_clips is not None and count >= max_clips:
            return
        count += 1
        yield media


def _ingest_clip(store: MemoryStore, embedder: Embedder, settings: Settings, media: ClipMedia,
                 report: IngestReport, perception_only: bool) -> None:
    """Perceive, resolve identities and write memories of one clip in one transaction."""
    started = time.perf_counter()
    report.problems.extend(media.problems)
    perception: ClipPerception | None = None
    try:
        perception = perceive_clip(media, settings)
        with store.clip(media.clip) as writer:
            memories = _write_clip(store, writer, embedder, settings, perception, report, perception_only)
            for stage, seconds in perception.timings.items():
                writer.record_timing(stage, seconds)
        report.memories_written += memories
        report.clips_done += 1
    except M3AgentError as exc:
        _record_failure(store, media, report, exc.message)
    except (ValueError, RuntimeError, MemoryError) as exc:
        _record_failure(store, media, report, f"{type(exc).__name__}: {exc}")
    report.media_seconds += media.clip.duration_s
    report.wall_seconds += time.perf_counter() - started
    for stage, seconds in (perception.timings if perception else {}).items():
        report.stage_seconds[stage] = report.stage_seconds.get(stage, 0.0) + seconds


def _record_failure(store: MemoryStore, media: ClipMedia, report: IngestReport, reason: str) -> None:
    store.mark_clip(media.clip, ClipStatus.FAILED, reason)
    report.clips_failed.append({"clip": media.clip.index, "reason": reason})


def _write_clip(store: MemoryStore, writer: Any, embedder: Embedder, settings: Settings,
                perception: ClipPerception, report: IngestReport, perception_only: bool) -> int:
    from m3agent.identity.resolver import IdentityRules, resolve_clip
    from m3agent.memorize.perception_writer import write_clip

    started = time.perf_counter()
    resolved = resolve_clip(store, writer, perception, IdentityRules.from_settings(settings))
    report.new_entities += len(resolved.new_entities)
    writer.record_timing("identity", time.perf_counter() - started)
    if perception_only:
        return 0
    started = time.perf_counter()
    memories = write_clip(perception.media.clip, resolved.tracks, resolved.voices, settings.media.frame_fps)
    for memory in embed_memories(embedder, memories):
        writer.add_memory(memory)
    elapsed = time.perf_counter() - started
    writer.record_timing("memorize", elapsed)
    report.stage_seconds["identity+memorize"] = report.stage_seconds.get("identity+memorize", 0.0) + elapsed
    return len(memories)


def embed_memories(embedder: Embedder, memories: list[Memory]) -> list[Memory]:
    """The same memories with their text embeddings attached (one batch)."""
    if not memories:
        return []
    vectors = embedder.embed([m.text for m in memories])
    return [dataclasses.replace(m, embedding=v) for m, v in zip(memories, vectors, strict=True)]


def perceive_clip(media: ClipMedia, settings: Settings) -> ClipPerception:
    """Faces and voices of one clip, computed concurrently; per-stage wall times in ``timings``."""
    timings: dict[str, float] = {}

    def timed(name: str, func: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args)
        finally:
            timings[name] = time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=2) as pool:
        faces = voices = None
        if settings.perception.faces and media.frames:
            from m3agent.perception.faces import perceive_faces

            faces = pool.submit(timed, "faces", perceive_faces, media, settings.perception)
        if settings.perception.voices and media.audio is not None:
            from m3agent.perception.voices import perceive_audio

            voices = pool.submit(timed, "voices", perceive_audio, media, settings)
        tracks = faces.result() if faces else ()
        segments = voices.result() if voices else ()
    return ClipPerception(media=media, tracks=tuple(tracks), voices=tuple(segments), timings=timings)


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
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("ingest", total=total, completed=start, status="")

        def advance(report: IngestReport) -> None:
            status = f"RTF {report.rtf:.2f}  memories {report.memories_written}  failed {len(report.clips_failed)}"
            progress.update(task, advance=1, status=status)

        yield advance
