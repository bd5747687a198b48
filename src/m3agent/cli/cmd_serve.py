"""``m3agent serve`` (REST API, web inspector, MCP over HTTP) and ``m3agent mcp`` (MCP over stdio)."""

from __future__ import annotations

from pathlib import Path

import click

from m3agent.cli.common import build_settings, memory_option


@click.command()
@memory_option
@click.option("--host", default=None, help="address to bind (default 127.0.0.1; others need a token)")
@click.option("--port", default=None, type=int, help="TCP port (default 8765)")
@click.option("--allow-folder", "folders", multiple=True, type=click.Path(path_type=Path, file_okay=False),
              help="a server-side folder ingest jobs may read (repeatable)")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
@click.pass_context
def serve(ctx: click.Context, memory: str | None, host: str | None, port: int | None, folders: tuple[Path, ...],
          log_level: str) -> None:
    """Serve a memory: REST API (/docs), web inspector (/), MCP over streamable HTTP (/mcp).

    The token for a non-loopback bind comes from M3AGENT_SERVER__TOKEN or m3agent.toml, never from the command
    line (where other users could read it). With a consolidation model (memorize.consolidate_llm, else llm) the
    server consolidates pending clips while no ingest job runs, one unit at a time (GET /api/consolidation;
    server.consolidate_when_idle = false turns it off).
    """
    from m3agent.server.run import serve as run_server

    server = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    settings = build_settings(ctx, memory=memory)
    if server or folders:
        update = {**server, "allowed_folders": [*settings.server.allowed_folders, *folders]}
        settings = build_settings(ctx, memory=memory, server={**settings.server.model_dump(), **update})
    run_server(settings, log_level=log_level)


@click.command()
@memory_option
@click.option("--allow-folder", "folders", multiple=True, type=click.Path(path_type=Path, file_okay=False),
              help="a server-side folder the remember tool may read (repeatable)")
@click.pass_context
def mcp(ctx: click.Context, memory: str | None, folders: tuple[Path, ...]) -> None:
    """Serve the memory's MCP tools over stdio (for agent hosts); exits when stdin closes."""
    from m3agent.server.run import serve_stdio

    settings = build_settings(ctx, memory=memory)
    if folders:
        server = {**settings.server.model_dump(),
                  "allowed_folders": [*settings.server.allowed_folders, *folders]}
        settings = build_settings(ctx, memory=memory, server=server)
    serve_stdio(settings)


COMMANDS = [serve, mcp]
