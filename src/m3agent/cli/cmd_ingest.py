"""``m3agent ingest``: watch a video or stream and write its memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from m3agent.cli.common import build_settings, json_option, memory_option
from m3agent.cli.output import err_console, print_json

if TYPE_CHECKING:
    from m3agent.pipeline import IngestReport

EXIT_CLIPS_FAILED = 6  # documented in the help above and in the README


@click.command()
@click.argument("source")
@memory_option
@click.option("--video-id", default=None, help="id of the video in the memory (default: from the file name)")
@click.option("--writer", type=click.Choice(["perception", "mllm", "local"]), default=None,
              help="who writes memories: perception-only (default), an MLLM endpoint, or the local LLM")
@click.option("--llm", "writer_llm", default=None, help="memorization endpoint for --writer mllm")
@click.option("--perception-only", is_flag=True, help="store faces, voices and identities; no memory writer")
@click.option("--clip-seconds", type=float, default=None, help="clip length (default 30)")
@click.option("--fps", "frame_fps", type=float, default=None, help="frames per second sampled for faces")
@click.option("--asr-model", default=None, help="base (default), tiny.en, or a CTranslate2 model folder")
@click.option("--max-clips", type=int, default=None, help="stop after this many new clips")
@json_option
@click.pass_context
def ingest(ctx: click.Context, source: str, memory: str | None, video_id: str | None, writer: str | None,
           writer_llm: str | None, perception_only: bool, clip_seconds: float | None, frame_fps: float | None,
           asr_model: str | None, max_clips: int | None, as_json: bool) -> None:
    """Ingest SOURCE (a file, URL or device) into the memory; rerun to resume where it stopped.

    A second ingest of the same video into the same memory waits until the first one ends.

    Exit status: 0 when every clip of this run was stored; 6 when some clips failed (disk full, endpoint
    error, malformed reply, ...): they are named on stderr with their reason, recorded in the memory, and
    retried by the next run. --json prints the same report either way.
    """
    from m3agent.pipeline import ingest_source

    media = {k: v for k, v in {"clip_seconds": clip_seconds, "frame_fps": frame_fps}.items() if v is not None}
    perception = {"asr_model": asr_model} if asr_model else {}
    settings = build_settings(ctx, memory=memory, writer=writer, writer_llm=writer_llm,
                              media=media or None, perception=perception or None)
    report = ingest_source(settings, source, video_id=video_id, perception_only=perception_only,
                           max_clips=max_clips, show_progress=not as_json)
    if as_json:
        print_json(report)
    if report.clips_failed:
        _report_failures(report)
        ctx.exit(EXIT_CLIPS_FAILED)


def _report_failures(report: IngestReport) -> None:
    """One summary line naming the failed clips and why, then what to do (stderr)."""
    done = report.clips_done + len(report.clips_failed)
    failed = "; ".join(f"clip {f['clip']}: {f['reason']}" for f in report.clips_failed)
    con = err_console()
    con.print(f"[bold red]error:[/] {len(report.clips_failed)} of {done} clips of {report.video_id!r} failed "
              f"({failed})", markup=True)
    con.print("[bold]what to do:[/] fix the cause, then rerun the same command: it retries only the failed "
              "clips", markup=True)


COMMANDS = [ingest]
