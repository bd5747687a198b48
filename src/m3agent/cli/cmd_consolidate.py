"""``m3agent consolidate``: turn the episodic memories of ingested videos into semantic facts (resumable)."""

from __future__ import annotations

from typing import Any

import click

from m3agent.cli.common import build_settings, json_option, memory_option
from m3agent.cli.output import console, print_json
from m3agent.terminal import markup_literal as escape


@click.command()
@memory_option
@click.option("--video", "video_ids", multiple=True, help="consolidate only this video (repeatable; default: all)")
@click.option("--llm", default=None,
              help="model that writes the facts (default: memorize.consolidate_llm, else the control llm), "
                   "e.g. llamacpp:qwen-0.5b or openai://host/v1?model=NAME")
@click.option("--clips-per-call", type=click.IntRange(0), default=None,
              help="clips read by one model call (default 1; 0: a whole video at once)")
@click.option("--redo", is_flag=True,
              help="forget what consolidation wrote for the selected videos (its facts, their sources, the record "
                   "of consolidated clips; weights it changed are put back) and consolidate every clip again; "
                   "semantic memories written otherwise stay")
@json_option
@click.pass_context
def consolidate(ctx: click.Context, memory: str | None, video_ids: tuple[str, ...], llm: str | None,
                clips_per_call: int | None, redo: bool, as_json: bool) -> None:
    """Write semantic memories (names, roles, relations, habits, facts of the place) from the episodic
    memories of each video's clips, with their sources; clips already consolidated are skipped, so an
    interrupted run continues where it stopped. --redo starts a video over (e.g. with a better model): the
    forgetting is one transaction per video, and an interrupted redo is continued by a plain rerun. The cost
    is reported as RTF (seconds per media second)."""
    from m3agent.embed import create_embedder
    from m3agent.errors import ConfigError
    from m3agent.llm import chat_model_from_settings
    from m3agent.memorize.consolidation.run import consolidate_store, consolidation_model
    from m3agent.store import open_memory

    memorize = {k: v for k, v in {"consolidate_llm": llm, "consolidate_clips": clips_per_call}.items()
                if v is not None}
    settings = build_settings(ctx, memory=memory, memorize=memorize or None)
    spec = consolidation_model(settings)
    if spec is None:
        raise ConfigError("no LLM to consolidate with (llm is none)",
                          hint="pass --llm llamacpp:qwen-1.5b (`m3agent models pull qwen-1.5b` first) or an "
                               "openai://host/v1?model=NAME endpoint")
    chat = chat_model_from_settings(settings, spec)
    embedder = create_embedder(settings.embedder, threads=settings.perception.threads)
    with open_memory(settings, create=False) as store:
        reports = consolidate_store(store, settings, chat, embedder, video_ids or None, redo=redo,
                                    show_progress=not as_json)
    if as_json:
        print_json({"videos": [r.to_dict() for r in reports]})
        return
    for report in reports:
        _print_report(report.to_dict())


def _print_report(r: dict[str, Any]) -> None:
    if r["forgotten"] is not None:
        f = r["forgotten"]
        console().print(f"[yellow]redo[/] {escape(r['video_id'])}: forgot {f['facts']} facts of {f['clips']} clips,"
                        f" put back {f['restored']} memories it had reinforced or weakened")
    console().print(
        f"[green]consolidated[/] {escape(r['video_id'])}: {r['clips_consolidated']} clips"
        f" (+{r['clips_already']} before), {r['facts_written']} new facts, {r['reinforced']} reinforced,"
        f" {r['contradicted']} contradicted, {len(r['dropped'])} dropped; {r['calls']} calls,"
        f" {r['wall_seconds']:.1f} s, RTF {r['rtf']:.2f} ({escape(r['model'])})")
    for note in r["dropped"]:
        console().print(f"  [yellow]dropped[/] {escape(note)}")


COMMANDS = [consolidate]
