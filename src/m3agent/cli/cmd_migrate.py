"""``m3agent migrate``: copy a whole memory between stores (SQLite file <-> PostgreSQL database)."""

from __future__ import annotations

import click

from m3agent.cli.common import json_option
from m3agent.cli.output import console, print_json
from m3agent.terminal import printable


@click.command()
@click.option("--from", "source", required=True, help="memory to copy: FILE.db, sqlite:///FILE.db or postgresql://...")
@click.option("--to", "target", required=True, help="empty memory to fill (created if missing)")
@json_option
def migrate(source: str, target: str, as_json: bool) -> None:
    """Copy every video, clip, entity, observation, memory and link from one store to another, ids kept.

    The target must hold no memory yet; the copy is one transaction on it.
    """
    from m3agent.errors import ConfigError
    from m3agent.store import open_store
    from m3agent.store.location import parse_location
    from m3agent.store.transfer import copy_memory

    origin, destination = parse_location(source), parse_location(target)
    if origin == destination:
        raise ConfigError("--from and --to name the same memory", hint="copy into another file or database")
    with open_store(origin, readonly=True, create=False) as src, open_store(destination) as dst:
        report = copy_memory(src, dst)
    if as_json:
        print_json(report)
        return
    rows = ", ".join(f"{n} {t}" for t, n in report.rows.items() if n)
    console().print(printable(f"copied {report.source} -> {report.target}: {rows or 'an empty memory'}"),
                    markup=False)
    for table, columns in report.skipped_columns.items():
        console().print(printable(f"not copied {table}: columns {', '.join(columns)} exist on one side only"),
                        markup=False)


COMMANDS = [migrate]
