"""m3agent errors as HTTP answers: a status by error type, and ``{"error", "message", "hint"}`` as the body.

Every error answer of the API has that shape: m3agent errors, request validation errors (which name the
fields, never echo the values: they may be huge or unprintable) and the framework's own HTTP errors (an
unknown route, a body over its limit).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent import errors

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from m3agent.settings import Settings

STATUS: tuple[tuple[type[errors.M3AgentError], int], ...] = (
    (errors.NotFoundError, 404),
    (errors.IntegrityError, 409),
    (errors.StoreReadOnlyError, 403),
    (errors.StoreFullError, 507),
    (errors.StoreVersionError, 409),
    (errors.StoreCorruptError, 500),
    (errors.MissingExtraError, 501),
    (errors.NotAvailableYet, 501),
    (errors.MalformedReplyError, 502),
    (errors.EndpointError, 502),
    (errors.MediaError, 422),
    (errors.ModelError, 500),
    (errors.ConfigError, 400),
)


def status_of(exc: errors.M3AgentError) -> int:
    """The HTTP status of an m3agent error (400 for a bad request of any other kind)."""
    if isinstance(exc, errors.ServerRequestError):
        return exc.status_code
    for kind, status in STATUS:
        if isinstance(exc, kind):
            return status
    return 400


DEFAULT_HINTS = {
    404: "list what exists: GET /api/videos, /api/entities, /api/characters, /api/memories, /api/jobs",
    405: "see /docs for the methods each path takes",
    409: "the memory was left unchanged; check the ids and try again",
}
MAX_FIELDS = 5  # validation errors named in one message


MAX_TEXT = 600  # characters of a message or hint an answer carries: an echoed input is cut, never sent whole


def private_folders(settings: Settings, data_dir: Path) -> tuple[str, ...]:
    """The server's own folders, which its answers never name: the memory's folder, ``data_dir`` (the server's
    uploads and journal), home."""
    folders = {str(data_dir), str(Path.home())}
    if settings.memory.path is not None:
        folders.add(str(settings.memory.path.expanduser().resolve().parent))
    return tuple(sorted((f for f in folders if f not in ("", os.sep)), key=len, reverse=True))


def public(text: str, private: Sequence[str] = ()) -> str:
    """``text`` for a client: each path under a ``private`` folder shortened to what lies below it (its own
    name for the folder itself), and cut to :data:`MAX_TEXT` characters."""
    for folder in private:
        text = text.replace(folder + os.sep, "").replace(folder, Path(folder).name)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def error_body(exc: errors.M3AgentError, private: Sequence[str] = ()) -> dict[str, str]:
    """The JSON of an error answer; a hint is always present (a default by status when the error has none).
    Message and hint go through :func:`public`."""
    hint = exc.hint or DEFAULT_HINTS.get(status_of(exc), "see /docs for the request format")
    return {"error": type(exc).__name__, "message": public(exc.message, private), "hint": public(hint, private)}


def validation_message(problems: Sequence[Any]) -> str:
    """What is wrong with a request, field by field (``body.k: Input should be a valid integer``)."""
    parts = []
    for problem in problems[:MAX_FIELDS]:
        where = ".".join(str(part) for part in problem.get("loc", ())) or "request"
        why = problem.get("msg", "invalid")
        detail = problem.get("ctx", {}).get("error") if problem.get("type") == "json_invalid" else None
        parts.append(f"{where}: {why}" + (f" ({detail})" if isinstance(detail, str) else ""))
    more = f" (and {len(problems) - MAX_FIELDS} more)" if len(problems) > MAX_FIELDS else ""
    return "; ".join(parts) + more


def http_error_body(status: int, detail: object) -> dict[str, str]:
    """The JSON of a framework HTTP error (``NotFoundError`` for 404, ``ContentTooLargeError`` for 413...)."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "HTTP error"
    name = "".join(word.capitalize() for word in phrase.replace("-", " ").split()) + "Error"
    message = detail if isinstance(detail, str) else phrase
    return {"error": name, "message": message, "hint": DEFAULT_HINTS.get(status, "see /docs for the API")}


def install(app: FastAPI) -> None:
    """Answer every m3agent error, validation error and HTTP error in the one shape, never a 500 traceback."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, errors.M3AgentError)
        ctx = getattr(request.app.state, "ctx", None)
        private = private_folders(ctx.settings, ctx.data_dir) if ctx is not None else ()
        return JSONResponse(error_body(exc, private), status_code=status_of(exc))

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return await handle(request, errors.InvalidRequestError(validation_message(exc.errors())))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 413:  # a body over its route's limit, found while reading it
            return await handle(request, errors.BodyTooLargeError("the request body is over this route's limit"))
        return JSONResponse(http_error_body(exc.status_code, exc.detail), status_code=exc.status_code,
                            headers=exc.headers)

    app.add_exception_handler(errors.M3AgentError, handle)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
