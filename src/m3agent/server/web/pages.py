"""Rendering the inspector's pages: the Jinja2 environment (autoescaped, built on first use), a page filled from
a loader run in the threadpool, and the error page. One owner, so that every page module renders alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from m3agent import __version__, tags
from m3agent.errors import M3AgentError
from m3agent.server.failures import error_body, status_of
from m3agent.server.web import browser_text

HERE = Path(__file__).parents[1]  # the server package: its templates/ and static/


def _templates() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    env.filters["clock"] = _time_or_unknown
    env.globals.update(character_tag=tags.character, voice_tag=tags.voice, error_titles=browser_text.TITLES)
    env.filters["browser_message"] = browser_text.message
    env.filters["plural"] = plural
    return env


_ENV: list[Any] = []


def render(request: Request, name: str, **data: Any) -> HTMLResponse:
    """Template ``name`` filled with ``data`` (autoescaped); the environment is built on first use."""
    if not _ENV:
        _ENV.append(_templates())
    html = _ENV[0].get_template(name).render(request=request, version=__version__, **data)
    return HTMLResponse(html)


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 clip``, ``2 clips``; ``many`` for a plural that is not ``one`` + s (``memory``, ``memories``)."""
    return f"{count} {one if count == 1 else many or one + 's'}"


def _time_or_unknown(seconds: float | None) -> str:
    from m3agent.text import clock

    return "?" if seconds is None else clock(seconds)


async def page(request: Request, name: str | Callable[[dict[str, Any]], str],
               load: Callable[[], dict[str, Any]]) -> HTMLResponse:
    """Template ``name`` (or the one ``name`` picks for the data) filled with what ``load`` reads (in the
    threadpool); an m3agent error becomes an error page with its status, message and hint instead of a raw
    JSON body."""
    try:
        data = await run_in_threadpool(load)
    except M3AgentError as exc:
        return error_page(request, exc)
    return render(request, name if isinstance(name, str) else name(data), **data)


def error_page(request: Request, exc: M3AgentError) -> HTMLResponse:
    """The error (error, message, hint) as a browser user reads it (:mod:`m3agent.server.web.browser_text`), with
    the error's HTTP status."""
    status = status_of(exc)
    response = render(request, "error.html", problem=browser_text.problem(error_body(exc), status))
    response.status_code = status
    return response
