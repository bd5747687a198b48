"""``m3agent doctor``: report which backends, models and extras are usable."""

from __future__ import annotations

import sys

import click

from m3agent.cli.common import build_settings, json_option, memory_option
from m3agent.cli.output import console, print_json


@click.command()
@click.option("--deep", is_flag=True, help="also load the text embedder and run it once")
@click.option("--quick", is_flag=True, help="do not run the configured local LLM on the check prompt (about 10 s)")
@memory_option
@json_option
@click.pass_context
def doctor(ctx: click.Context, deep: bool, quick: bool, memory: str | None, as_json: bool) -> None:
    """Check installed backends, models and extras, with the fix for each missing one; a PostgreSQL memory
    (--memory postgresql://...) is connected to and checked; the configured local LLM answers a real prompt."""
    from rich.table import Table

    from m3agent.doctor import run_checks

    settings = build_settings(ctx, memory=memory)
    checks = run_checks(deep=deep, memory=settings.memory, cache_dir=settings.resolved_cache_dir(),
                        llm=None if quick else settings.llm, llamacpp_runtime=settings.llamacpp_runtime,
                        local_runtime=settings.local_runtime)
    if as_json:
        print_json({"ok": all(c.status == "ok" for c in checks if c.category != "optional"),
                    "checks": [c.to_dict() for c in checks]})
        return
    table = Table(title="m3agent doctor")
    for column in ("check", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    colours = {"ok": "green", "missing": "yellow", "error": "red"}
    for check in checks:
        table.add_row(check.name, f"[{colours[check.status]}]{check.status}[/]", check.detail, check.fix)
    console().print(table)
    if any(c.status == "error" for c in checks):
        sys.exit(1)


COMMANDS = [doctor]
