"""``m3agent bench``: benchmarks that write their results to docs/benchmarks.md."""

from __future__ import annotations

import click

from m3agent.errors import NotAvailableYet


@click.group()
def bench() -> None:
    """Run a benchmark suite (store, perception, ingest, locomo, m3, all)."""


def _not_yet(name: str) -> click.Command:
    @click.command(name=name, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(args: tuple[str, ...]) -> None:
        raise NotAvailableYet(f"`m3agent bench {name}` is not available yet")

    command.help = f"The {name} benchmark (not available yet)."
    return command


for _name in ("store", "perception", "ingest", "locomo", "m3", "all"):
    bench.add_command(_not_yet(_name))

COMMANDS = [bench]
