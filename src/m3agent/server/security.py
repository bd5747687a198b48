"""Who may call and what may be read: bind rules, the bearer token, Host checks, path confinement.

- Loopback binds need no token; any other bind refuses to start without one.
- With a token set, every request but ``/health`` must carry ``Authorization:
  Bearer TOKEN`` (or the ``m3agent_token`` cookie the inspector's login sets);
  others get 401.
- The Host header must name this machine (loopback names, the bound host, or
  ``server.allowed_hosts``), so a web page cannot reach a loopback server
  through DNS rebinding.
- A state-changing request (POST, PUT, PATCH, DELETE) sent by a browser from
  another site is refused with 403, token or not (cross-site request forgery):
  its ``Origin`` must be this server (the Host it called) or one of
  ``server.cors_origins``, and its ``Sec-Fetch-Site`` ``same-origin`` or
  ``none``. Every current browser sends ``Origin`` (and ``Sec-Fetch-Site``) with
  such a request from another origin, even in ``no-cors`` mode; a request with
  neither header is not a browser's (curl, scripts, SDKs) and goes through.
- Server-side paths are resolved (``..`` and symlinks followed) and must then
  lie inside one of ``server.allowed_folders``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from m3agent.errors import AccessDeniedError, ConfigError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from m3agent.settings import ServerSettings

TOKEN_COOKIE = "m3agent_token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SAME_SITE_FETCHES = ("same-origin", "none")  # Sec-Fetch-Site values of the server's own pages and typed URLs
OPEN_PATHS = ("/health", "/login", "/static/")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


TOKEN_HINT = "set M3AGENT_SERVER__TOKEN (16+ characters, e.g. from `openssl rand -hex 24`) or bind 127.0.0.1"
MIN_TOKEN_SYMBOLS = 8  # distinct characters a token for a public bind needs (a hex token of 16 has about 14)


def check_bind(server: ServerSettings) -> None:
    """Refuse to serve off loopback without a token, or with one that is easy to guess (:class:`ConfigError`)."""
    if is_loopback(server.host):
        return
    if not server.token:
        raise ConfigError(f"binding {server.host} exposes the memory to the network, so a token is required",
                          hint=TOKEN_HINT)
    symbols = len(set(server.token))
    if symbols < MIN_TOKEN_SYMBOLS:
        raise ConfigError(f"the server token is easy to guess ({symbols} distinct characters; a token for "
                          f"{server.host} needs at least {MIN_TOKEN_SYMBOLS})", hint=TOKEN_HINT)


class GuessThrottle:
    """Wrong tokens are answered one at a time, each after ``delay_s``: at most ``1 / delay_s`` guesses a second
    reach an answer, however many are sent at once. Right tokens never wait."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._lock: asyncio.Lock | None = None

    async def failed(self) -> None:
        """Wait out this failed guess's turn (call before answering it)."""
        if self.delay_s <= 0:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await asyncio.sleep(self.delay_s)


def confined(path_text: str, folders: list[Path]) -> Path:
    """``path_text`` resolved, if it is an existing file inside one of ``folders``; else :class:`AccessDeniedError`."""
    if not folders:
        raise AccessDeniedError("this server reads no server-side paths",
                                hint="list folders in server.allowed_folders, or upload the file")
    if "\x00" in path_text:
        raise AccessDeniedError("the path contains a NUL character")
    try:
        resolved = Path(path_text).expanduser().resolve(strict=True)
    except (OSError, RuntimeError):
        raise AccessDeniedError(f"{path_text} does not exist or cannot be read") from None
    for folder in folders:
        root = folder.expanduser().resolve()
        if resolved.is_relative_to(root):
            if not resolved.is_file():
                raise AccessDeniedError(f"{path_text} is not a file", hint="name a video or audio file")
            return resolved
    raise AccessDeniedError(f"{path_text} is outside the allowed folders")


def cross_site(headers: dict[str, str], allowed_origins: frozenset[str]) -> bool:
    """Whether a browser sent the request from another origin than the server's (the ``Host`` it called) and
    the ``allowed_origins``; a request without ``Origin`` and ``Sec-Fetch-Site`` is no browser's."""
    origin = headers.get("origin")
    if origin is not None:
        origin = origin.strip().rstrip("/").lower()
        if origin in allowed_origins:
            return False
        if origin == "null" or urlsplit(origin).netloc != headers.get("host", "").strip().lower():
            return True
    return headers.get("sec-fetch-site", "same-origin").strip().lower() not in SAME_SITE_FETCHES


def inside(path: Path, folders: list[Path]) -> bool:
    """Whether ``path`` (resolved, symlinks followed) lies inside one of ``folders``."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    return any(resolved.is_relative_to(folder.expanduser().resolve()) for folder in folders)


class GuardMiddleware:
    """ASGI middleware enforcing the Host check and the bearer token (see the module docstring)."""

    def __init__(self, app: ASGIApp, server: ServerSettings, throttle: GuessThrottle) -> None:
        self.app = app
        self.token = server.token
        self.throttle = throttle
        self.hosts = {*LOOPBACK_NAMES, server.host.lower(), *(h.lower() for h in server.allowed_hosts)}
        self.any_host = "*" in server.allowed_hosts
        self.origins = frozenset(o.strip().rstrip("/").lower() for o in server.cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not self.any_host and _host_name(headers.get("host", "")) not in self.hosts:
            await _refuse(send, 421, "unknown Host header", "call the server by its bound address")
            return
        if scope.get("method") in UNSAFE_METHODS and cross_site(headers, self.origins):
            await _refuse(send, 403, "another site may not change this memory (cross-site request refused)",
                          "send it from the inspector's own pages or from a client that is not a browser; a web "
                          "app of another origin must be listed in server.cors_origins")
            return
        path: str = scope.get("path", "")
        if self.token and not path.startswith(OPEN_PATHS) and path != "/health" and not self._authorised(headers):
            if _carries_token(headers):
                await self.throttle.failed()
            if scope.get("method") == "GET" and "text/html" in headers.get("accept", ""):
                await _redirect(send, "/login")  # a person at a browser: ask for the token once
                return
            await _refuse(send, 401, "a bearer token is required",
                          "send `Authorization: Bearer TOKEN` (the server.token setting)")
            return
        await self.app(scope, receive, send)

    def _authorised(self, headers: dict[str, str]) -> bool:
        assert self.token is not None
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and secrets.compare_digest(value.strip().encode(), self.token.encode()):
            return True
        cookie = _cookie(headers.get("cookie", ""), TOKEN_COOKIE)
        return cookie is not None and secrets.compare_digest(cookie.encode(), self.token.encode())


def _carries_token(headers: dict[str, str]) -> bool:
    return "authorization" in headers or _cookie(headers.get("cookie", ""), TOKEN_COOKIE) is not None


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


async def _redirect(send: Send, location: str) -> None:
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode()), (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, status: int, message: str, hint: str) -> None:
    body = json.dumps({"error": {401: "unauthorized", 413: "too_large"}.get(status, "refused"), "message": message,
                       "hint": hint}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
