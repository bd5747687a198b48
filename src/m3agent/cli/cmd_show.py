"""``m3agent show``: look inside a memory (videos, entities, characters, memories, a clip)."""

from __future__ import annotations

from typing import Any

import click

from m3agent.cli.common import CLIP_INDEX, COUNT, build_settings, json_option, memory_option
from m3agent.cli.output import console, print_json
from m3agent.errors import ConfigError

VIEWS = ("videos", "entities", "characters", "memories", "clip")


@click.command()
@click.argument("what", type=click.Choice(VIEWS), default="videos", required=False)
@memory_option
@click.option("--video", "video_id", default=None, help="video id (default: the only video)")
@click.option("--clip", "clip_index", type=CLIP_INDEX, default=None, help="clip index: show that clip")
@click.option("--limit", type=COUNT, default=200, show_default=True, help="most rows to print")
@json_option
@click.pass_context
def show(ctx: click.Context, what: str, memory: str | None, video_id: str | None,
         clip_index: int | None, limit: int, as_json: bool) -> None:
    """Print what a memory holds. `show --clip N` prints one clip's memories, faces and voices."""
    from m3agent.store import open_memory
    from m3agent.views import clip_report, list_characters, list_entities, list_memories, list_videos

    settings = build_settings(ctx, memory=memory)
    if clip_index is not None:
        what = "clip"
    with open_memory(settings, readonly=True, create=False) as store:
        if what == "clip":
            if clip_index is None:
                raise ConfigError("`show clip` needs --clip N")
            data: Any = clip_report(store, video_id, clip_index)
        elif what == "videos":
            data = list_videos(store)
        elif what == "entities":
            data = list_entities(store)[:limit]
        elif what == "characters":
            data = list_characters(store, video_id)[:limit]
        else:
            data = list_memories(store, video_id)[:limit]
    if as_json:
        print_json(data)
    else:
        _print_human(what, data)


def _print_human(what: str, data: Any) -> None:
    from m3agent.views import render_table

    console().print(render_table(what, data))


COMMANDS = [show]
