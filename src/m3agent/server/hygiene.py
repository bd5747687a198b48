"""Request hygiene: JSON bodies the API can hold, and security headers on every answer.

- A JSON body must be strict JSON with valid Unicode: ``NaN``/``Infinity`` and lone
  surrogates (``"\\ud800"``) are refused with a 422 before any field is read, as
  they cannot be stored or sent back.
- Body sizes are bounded per route: a declared ``Content-Length`` over the
  limit is refused before anything is read (:class:`BodyLimitMiddleware`), and
  the framework's streaming limits (``max_body_size`` of each router, set in
  :func:`~m3agent.server.app.create_app`) count every chunk as it arrives, so a
  chunked body without ``Content-Length`` is cut off once past its limit.
- Every answer says ``nosniff``, may not be framed, sends no referrer, and
  carries a Content-Security-Policy that the inspector's pages satisfy (scripts
  and styles from this server only; style attributes for the timelines' bars).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NoReturn

from fastapi import Request

from m3agent.errors import BodyTooLargeError, InvalidRequestError, M3AgentError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
SURROGATE_HINT = "send valid Unicode: encode text as UTF-8 before escaping it"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
       "img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"), (b"content-security-policy", CSP.encode()))


async def strict_json(request: Request) -> None:
    """A dependency of every route: refuse a JSON body with non-finite numbers or lone surrogates (422)."""
    content_type = request.headers.get("content-type", "application/json").lower()
    if request.method not in BODY_METHODS or "json" not in content_type:
        return
    body = await request.body()  # cached: the route reads the same bytes
    if not body:
        return
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return  # not JSON at all: the route's own parsing answers it (422 json_invalid)
    if has_lone_surrogate(value):
        raise InvalidRequestError("the JSON body contains a lone surrogate (\\ud800-\\udfff), which is not text",
                                  hint=SURROGATE_HINT)


def _refuse_constant(name: str) -> NoReturn:
    raise InvalidRequestError(f"the JSON body contains {name}, which JSON does not allow",
                              hint="send finite numbers only (no NaN, Infinity or -Infinity)")


def has_lone_surrogate(value: Any) -> bool:
    """Whether parsed JSON holds a string (or key) that is not valid Unicode; walked without recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            pending += item
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


class SecurityHeadersMiddleware:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every HTTP answer that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {key.lower() for key, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodyLimitMiddleware:
    """ASGI middleware refusing (413, in the API's error shape) a body whose declared ``Content-Length`` is over
    its route's limit: ``upload_limit`` under ``upload_paths``, else ``limit``."""

    def __init__(self, app: ASGIApp, limit: int, upload_limit: int, upload_paths: tuple[str, ...]) -> None:
        self.app = app
        self.limit = limit
        self.upload_limit = upload_limit
        self.upload_paths = upload_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            limit = self.upload_limit if scope.get("path", "") in self.upload_paths else self.limit
            for key, value in scope.get("headers", []):
                if key.lower() == b"content-length" and (not value.isdigit() or int(value) > limit):
                    await send_problem(send, BodyTooLargeError(f"the request body is over this route's limit "
                                                               f"of {limit:,} bytes"))
                    return
        await self.app(scope, receive, send)


async def send_problem(send: Send, exc: M3AgentError) -> None:
    """Answer ``exc`` at the ASGI level, in the API's error shape, with its status."""
    from m3agent.server.failures import error_body, status_of

    body = json.dumps(error_body(exc)).encode()
    await send({"type": "http.response.start", "status": status_of(exc),
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
