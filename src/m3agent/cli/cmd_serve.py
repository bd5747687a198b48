"""``m3agent serve``: REST API, web inspector and MCP (not available yet)."""

from __future__ import annotations

import click

from m3agent.errors import NotAvailableYet


@click.command()
@click.option("--memory", "-m", default=None, help="memory store to serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=int)
def serve(memory: str | None, host: str, port: int) -> None:
    """Serve a memory over REST with a web inspector and MCP tools."""
    raise NotAvailableYet(
        "`m3agent serve` is not available yet: the REST server, web inspector and MCP tools are planned",
        hint="use `m3agent ask` and `m3agent show` meanwhile",
    )


COMMANDS = [serve]
