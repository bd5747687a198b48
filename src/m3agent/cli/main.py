"""The ``m3agent`` command line. Settings are built here and passed down."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from m3agent import __version__
from m3agent.cli.output import err_console
from m3agent.errors import M3AgentError
from m3agent.terminal import markup_literal


class _Group(click.Group):
    """Turns m3agent errors into a message plus a hint and a non-zero exit code, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except M3AgentError as exc:
            _report(exc)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            err_console().print("[yellow]interrupted[/]: what was committed so far is kept")
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:
            if (ctx.obj or {}).get("debug"):
                raise
            _report(M3AgentError(
                f"internal error: {type(exc).__name__}: {exc}",
                hint="rerun with `m3agent --debug ...` to see the traceback, and please report it",
            ))
            sys.exit(70)


def _report(exc: M3AgentError) -> None:
    """Message and hint shown literally: they may quote stored names, paths or replies."""
    con = err_console()
    con.print(f"[bold red]error:[/] {markup_literal(exc.message)}", markup=True)
    if exc.hint:
        con.print(f"[bold]what to do:[/] {markup_literal(exc.hint)}", markup=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="m3agent")
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="settings file (default: ./m3agent.toml when present)")
@click.option("--debug", is_flag=True, help="show tracebacks of internal errors")
@click.pass_context
def main(ctx: click.Context, config_file: Path | None, debug: bool) -> None:
    """m3agent: long-term multimodal memory. Watch, recognise, remember, answer with evidence."""
    ctx.ensure_object(dict)
    ctx.obj["config_file"] = config_file
    ctx.obj["debug"] = debug


def _register_commands() -> None:
    from m3agent.cli import (
        cmd_ask,
        cmd_bench,
        cmd_consolidate,
        cmd_doctor,
        cmd_import,
        cmd_ingest,
        cmd_manage,
        cmd_migrate,
        cmd_models,
        cmd_serve,
        cmd_show,
        cmd_train,
    )

    modules = (cmd_ingest, cmd_ask, cmd_show, cmd_bench, cmd_serve, cmd_doctor, cmd_manage, cmd_import, cmd_migrate,
               cmd_models, cmd_consolidate, cmd_train)
    for module in modules:
        for command in module.COMMANDS:
            main.add_command(command)


_register_commands()
