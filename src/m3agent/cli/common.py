"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from m3agent.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="print machine-readable JSON")(func)


def memory_option(func: F) -> F:
    return click.option(
        "--memory", "-m", default=None, help="memory file: FILE.db or sqlite:///FILE.db"
    )(func)


def build_settings(ctx: click.Context, **overrides: Any) -> Settings:
    """Settings from the --config file, M3AGENT_* environment and the given CLI overrides."""
    config_file = (ctx.find_root().obj or {}).get("config_file")
    return load_settings(config_file, **overrides)
