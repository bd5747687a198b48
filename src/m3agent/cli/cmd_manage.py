"""Editing a memory: delete videos/entities/memories, rename, merge and split entities, undo merges."""

from __future__ import annotations

import click

from m3agent.cli.common import ROW_ID, build_settings, json_option, memory_option, row_id
from m3agent.cli.output import console, print_json
from m3agent.terminal import printable


@click.command()
@click.argument("kind", type=click.Choice(["video", "entity", "memory"]))
@click.argument("ident")
@memory_option
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@click.option("--compact", is_flag=True,
              help="then rewrite the memory's files so no deleted byte stays (PostgreSQL: VACUUM FULL, which "
                   "locks each table while it runs)")
@json_option
@click.pass_context
def delete(ctx: click.Context, kind: str, ident: str, memory: str | None, yes: bool, compact: bool,
           as_json: bool) -> None:
    """Delete a video, an entity or a memory and everything derived from it (crops, snippets, links).

    IDENT is a video id, or the number of an entity or memory. On PostgreSQL the deleted rows' bytes stay
    in the tables' free space until --compact (or a later VACUUM FULL) rewrites them.
    """
    from m3agent.store import open_memory

    number = None if kind == "video" else row_id(ctx, "ident", ident)
    settings = build_settings(ctx, memory=memory)
    if not yes and not as_json:
        click.confirm(f"delete {kind} {printable(ident)} and everything derived from it?", abort=True)
    with open_memory(settings, create=False) as store:
        if number is None:
            store.delete_video(ident)
        elif kind == "entity":
            store.delete_entity(number)
        else:
            store.delete_memory(number)
        if compact:
            store.compact()
    _done(as_json, {"deleted": kind, "id": ident, "compacted": compact})


@click.command()
@click.argument("entity_id", type=ROW_ID)
@click.argument("name")
@memory_option
@json_option
@click.pass_context
def rename(ctx: click.Context, entity_id: int, name: str, memory: str | None, as_json: bool) -> None:
    """Give an entity (face or voice) a name."""
    from m3agent.store import open_memory

    settings = build_settings(ctx, memory=memory)
    with open_memory(settings, create=False) as store:
        store.rename_entity(entity_id, name)
    _done(as_json, {"renamed": entity_id, "name": name})


@click.command()
@click.argument("keep", type=ROW_ID)
@click.argument("absorb", type=ROW_ID)
@memory_option
@json_option
@click.pass_context
def merge(ctx: click.Context, keep: int, absorb: int, memory: str | None, as_json: bool) -> None:
    """Merge entity ABSORB into entity KEEP (same person recognised twice)."""
    from m3agent.store import open_memory

    settings = build_settings(ctx, memory=memory)
    with open_memory(settings, create=False) as store:
        store.merge_entities(keep, absorb)
    _done(as_json, {"merged": absorb, "into": keep})


@click.command()
@memory_option
@json_option
@click.pass_context
def merges(ctx: click.Context, memory: str | None, as_json: bool) -> None:
    """List recorded entity merges (automatic ones with their evidence); undo one with `m3agent unmerge ID`."""
    from m3agent.store import open_memory

    settings = build_settings(ctx, memory=memory)
    with open_memory(settings, readonly=True, create=False) as store:
        rows = store.entity_merges()
    if as_json:
        print_json([{"id": m.id, "keep": m.keep_id, "absorbed": m.absorbed_id, "kind": m.kind, "source": m.source,
                     "evidence": m.evidence, "video_id": m.video_id, "clip": m.clip_index,
                     "created_at": m.created_at, "undone_at": m.undone_at} for m in rows])
        return
    for m in rows:
        where = f" ({m.video_id} clip {m.clip_index})" if m.video_id else ""
        state = f" [undone {m.undone_at}]" if m.undone_at else ""
        console().print(printable(f"{m.id}: {m.kind}_{m.absorbed_id} -> {m.kind}_{m.keep_id}, {m.source}{where}: "
                                  f"{m.evidence}{state}"), markup=False)


@click.command()
@click.argument("merge_id", type=ROW_ID)
@memory_option
@json_option
@click.pass_context
def unmerge(ctx: click.Context, merge_id: int, memory: str | None, as_json: bool) -> None:
    """Undo recorded merge MERGE_ID (see `m3agent merges`): the absorbed entity comes back under its old id."""
    from m3agent.store import open_memory

    settings = build_settings(ctx, memory=memory)
    with open_memory(settings, create=False) as store:
        entity = store.undo_merge(merge_id)
    _done(as_json, {"unmerged": merge_id, "restored": entity.tag})


@click.command()
@memory_option
@click.option("--embedder", default=None, help="the new text embedder (default: settings, i.e. minilm)")
@json_option
@click.pass_context
def reembed(ctx: click.Context, memory: str | None, embedder: str | None, as_json: bool) -> None:
    """Re-embed every memory with the configured embedder (all or nothing) and record it."""
    from rich.progress import Progress

    from m3agent.embed import create_embedder
    from m3agent.memorize.embedding import reembed as reembed_store
    from m3agent.store import open_memory

    settings = build_settings(ctx, memory=memory, embedder=embedder)
    model = create_embedder(settings.embedder)
    with open_memory(settings, create=False) as store, Progress(disable=as_json) as progress:
        task = progress.add_task("re-embedding", total=None)
        count = reembed_store(store, model, progress=lambda done, total: progress.update(task, completed=done,
                                                                                         total=total))
    _done(as_json, {"reembedded": count, "model": model.name, "dim": model.dim})


def _done(as_json: bool, result: dict[str, object]) -> None:
    if as_json:
        print_json(result)
    else:
        console().print(printable(", ".join(f"{k}: {v}" for k, v in result.items())), markup=False)


COMMANDS = [delete, rename, merge, merges, unmerge, reembed]
