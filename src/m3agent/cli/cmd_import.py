"""``m3agent import-m3``: bring a memory graph released with M3-Bench into a store."""

from __future__ import annotations

from pathlib import Path

import click

from m3agent.cli.common import build_settings, json_option, memory_option
from m3agent.cli.output import console, print_json


@click.command(name="import-m3")
@click.argument("graph", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@memory_option
@click.option("--video-id", default=None, help="video id in the memory (default: the file stem)")
@click.option("--replace", is_flag=True, help="replace a video of the same id")
@json_option
@click.pass_context
def import_m3(ctx: click.Context, graph: Path, memory: str | None, video_id: str | None, replace: bool,
              as_json: bool) -> None:
    """Import GRAPH.pkl (a reference VideoGraph) safely: only the graph's own classes are unpickled.

    The file is read and checked against the importer limits (settings ``importer``) before
    the memory is opened: a refused file writes nothing, not even an empty memory file.
    """
    from m3agent.embed import embedder_for_store
    from m3agent.importers import import_m3_graph, read_reference_graph
    from m3agent.importers.limits import GraphLimits
    from m3agent.store import open_memory

    settings = build_settings(ctx, memory=memory)
    limits = GraphLimits.from_settings(settings.importer)
    deadline = limits.deadline()
    read = read_reference_graph(graph, limits, deadline)
    with open_memory(settings) as store:
        embedder = embedder_for_store(store.embedding_model(), settings.embedder)
        report = import_m3_graph(graph, store, video_id, embedder=embedder, replace_existing=replace,
                                 limits=limits, graph=read, deadline=deadline)
    if as_json:
        print_json(report)
    else:
        console().print(report)


COMMANDS = [import_m3]
