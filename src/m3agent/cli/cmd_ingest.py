"""``m3agent ingest``: watch videos or a stream and write their memory (many at once with --executor ray)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from m3agent.cli.common import COUNT, build_settings, json_option, memory_option
from m3agent.cli.output import console, err_console, print_json
from m3agent.terminal import markup_literal as escape

if TYPE_CHECKING:
    from m3agent.pipeline import IngestReport

EXIT_CLIPS_FAILED = 6  # documented in the help above and in the README
EXIT_CONSOLIDATION_FAILED = 7


@click.command()
@click.argument("sources", nargs=-1, required=True)
@memory_option
@click.option("--video-id", default=None, help="id of the video in the memory (default: from the file name)")
@click.option("--writer", type=click.Choice(["perception", "mllm", "local"]), default=None,
              help="who writes memories: perception-only (default), an MLLM endpoint, or the local LLM")
@click.option("--llm", "writer_llm", default=None,
              help="LLM of --writer mllm/local, and of semantic consolidation at the end (e.g. llamacpp:qwen-0.5b); "
                   "without it (llm none) consolidation is skipped")
@click.option("--no-consolidate", is_flag=True,
              help="return at perception speed: leave semantic consolidation to `m3agent consolidate` later "
                   "(memorize.consolidate_after_ingest=false)")
@click.option("--perception-only", is_flag=True, help="store faces, voices and identities; no memory writer")
@click.option("--clip-seconds", type=float, default=None, help="clip length (default 30)")
@click.option("--fps", "frame_fps", type=float, default=None, help="frames per second sampled for faces")
@click.option("--asr-model", default=None, help="base (default), tiny.en, or a CTranslate2 model folder")
@click.option("--max-clips", type=int, default=None, help="stop after this many new clips (per video)")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="local: one video after another (default); ray: one Ray task per video")
@click.option("--workers", type=COUNT, default=None, help="videos at once on a local Ray cluster (default 2)")
@click.option("--ray-address", default=None, help="Ray cluster to join (default: start a local one)")
@json_option
@click.pass_context
def ingest(ctx: click.Context, sources: tuple[str, ...], memory: str | None, video_id: str | None,
           writer: str | None, writer_llm: str | None, no_consolidate: bool, perception_only: bool,
           clip_seconds: float | None,
           frame_fps: float | None, asr_model: str | None, max_clips: int | None, executor: str | None,
           workers: int | None, ray_address: str | None, as_json: bool) -> None:
    """Ingest SOURCES (files, folders of videos, URLs or a device) into the memory; rerun to resume.

    With several videos, each is reported as it finishes; a failed video is retried (it resumes
    after its committed clips). A second ingest of the same video into the same memory waits
    until the first one ends.

    Exit status: 0 when every clip of this run was stored; 6 when some clips failed (disk full, endpoint
    error, malformed reply, ...): they are named on stderr with their reason, recorded in the memory, and
    retried by the next run; 7 when every clip was stored but consolidation stopped (the local model's
    process crashed, an endpoint failed): `m3agent consolidate` resumes it; 1 when a whole video failed
    (several videos). --json prints the same report.
    """
    from m3agent.executor import ingest_videos, video_jobs

    media = {k: v for k, v in {"clip_seconds": clip_seconds, "frame_fps": frame_fps}.items() if v is not None}
    perception = {"asr_model": asr_model} if asr_model else {}
    run = {k: v for k, v in {"kind": executor, "workers": workers, "ray_address": ray_address}.items()
           if v is not None}
    memorize = {k: v for k, v in {"consolidate_llm": writer_llm,
                                  "consolidate_after_ingest": False if no_consolidate else None}.items()
                if v is not None}
    settings = build_settings(ctx, memory=memory, writer=writer, writer_llm=writer_llm, media=media or None,
                              perception=perception or None, executor=run or None, memorize=memorize or None)
    jobs = video_jobs(sources, video_id)
    if len(jobs) == 1 and settings.executor.kind == "local":
        _single(settings, jobs[0].source, jobs[0].video_id, perception_only, max_clips, as_json)
        return
    outcomes = ingest_videos(settings, jobs, perception_only=perception_only, max_clips=max_clips,
                             on_outcome=None if as_json else _print_outcome)
    if as_json:
        print_json({"videos": [o.to_dict() for o in outcomes], "failed": sum(not o.ok for o in outcomes)})
    if not all(o.ok for o in outcomes):
        sys.exit(1)
    if any(o.report.get("clips_failed") for o in outcomes):
        sys.exit(EXIT_CLIPS_FAILED)
    if any("failed" in (o.report.get("consolidation") or {}) for o in outcomes):
        sys.exit(EXIT_CONSOLIDATION_FAILED)


def _single(settings: Any, source: str, video_id: str, perception_only: bool, max_clips: int | None,
            as_json: bool) -> None:
    """One video here, with a progress bar (the report as before)."""
    from m3agent.pipeline import ingest_source

    report = ingest_source(settings, source, video_id=video_id, perception_only=perception_only,
                           max_clips=max_clips, show_progress=not as_json)
    if as_json:
        print_json(report)
    else:
        _report_consolidation(report.consolidation)
    if report.clips_failed:
        _report_failures(report)
        sys.exit(EXIT_CLIPS_FAILED)
    if "failed" in report.consolidation:
        sys.exit(EXIT_CONSOLIDATION_FAILED)


def _report_consolidation(outcome: dict[str, Any]) -> None:
    """One line on stderr: consolidation skipped (and how to run it), failed, or what it wrote."""
    con = err_console()
    if isinstance(outcome.get("skipped"), str):  # a note instead of a report (whose "skipped" counts clips)
        con.print(f"[yellow]note:[/] {escape(str(outcome['skipped']))}", markup=True)
    elif "failed" in outcome:
        con.print(f"[bold red]consolidation stopped:[/] {escape(str(outcome['failed']))}", markup=True)
    elif outcome:
        con.print(f"consolidation: {outcome['facts_written']} new facts, {outcome['reinforced']} reinforced, "
                  f"{len(outcome['dropped'])} dropped, RTF {outcome['rtf']:.2f}", markup=False)


def _report_failures(report: IngestReport) -> None:
    """One summary line naming the failed clips and why, then what to do (stderr)."""
    done = report.clips_done + len(report.clips_failed)
    failed = "; ".join(f"clip {f['clip']}: {escape(str(f['reason']))}" for f in report.clips_failed)
    con = err_console()
    video = escape(repr(report.video_id))
    con.print(f"[bold red]error:[/] {len(report.clips_failed)} of {done} clips of {video} failed ({failed})",
              markup=True)
    con.print("[bold]what to do:[/] fix the cause, then rerun the same command: it retries only the failed "
              "clips", markup=True)


def _print_outcome(outcome: Any) -> None:
    if outcome.ok:
        r = outcome.report
        failed = len(r.get("clips_failed", []))
        console().print(f"[green]done[/] {escape(outcome.video_id)}: {r.get('clips_done', 0)} clips"
                        f" (+{r.get('clips_already_done', 0)} before), {r.get('memories_written', 0)} memories,"
                        f" {failed} clips failed, {outcome.wall_seconds:.1f} s, attempt {outcome.attempts}")
    else:
        console().print(f"[red]failed[/] {escape(outcome.video_id)} after {outcome.attempts} attempts:"
                        f" {escape(outcome.error)}")


COMMANDS = [ingest]
