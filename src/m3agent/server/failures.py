"""m3agent errors as HTTP answers: a status by error type, and ``{"error", "message", "hint"}`` as the body."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3agent import errors

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

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
    409: "the memory was left unchanged; check the ids and try again",
}


def error_body(exc: errors.M3AgentError) -> dict[str, str]:
    """The JSON of an error answer; a hint is always present (a default by status when the error has none)."""
    hint = exc.hint or DEFAULT_HINTS.get(status_of(exc), "see /docs for the request format")
    return {"error": type(exc).__name__, "message": exc.message, "hint": hint}


def install(app: FastAPI) -> None:
    """Answer every m3agent error with its status and hint instead of a 500 traceback."""
    from fastapi.responses import JSONResponse

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, errors.M3AgentError)
        return JSONResponse(error_body(exc), status_code=status_of(exc))

    app.add_exception_handler(errors.M3AgentError, handle)
