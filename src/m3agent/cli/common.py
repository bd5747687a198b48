"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from m3agent.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])


class _Integer(click.IntRange):
    """An integer in a range; its errors say "not a valid integer" and show the range."""

    name = "integer"


CLIP_INDEX = _Integer(0, 2**31 - 1)
"""A clip index: 0 or more, and small enough for every store (an int4 column)."""
ROW_ID = _Integer(1, 2**63 - 1)
"""An entity or memory id: positive, and within SQLite's 64-bit integers."""
COUNT = _Integer(1, 2**31 - 1)
"""A positive count (rounds, rows)."""


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="print machine-readable JSON")(func)


def memory_option(func: F) -> F:
    return click.option(
        "--memory", "-m", default=None, help="memory: FILE.db, sqlite:///FILE.db or postgresql://..."
    )(func)


def row_id(ctx: click.Context, name: str, text: str) -> int:
    """``text`` as an entity or memory id, or a usage error (exit 2) naming the argument."""
    param = next((p for p in ctx.command.params if p.name == name), None)
    raw: Any = text  # click's typing expects the converted type; it converts strings
    return int(ROW_ID.convert(raw, param, ctx))


def build_settings(ctx: click.Context, **overrides: Any) -> Settings:
    """Settings from the --config file, M3AGENT_* environment and the given CLI overrides."""
    config_file = (ctx.find_root().obj or {}).get("config_file")
    return load_settings(config_file, **overrides)
