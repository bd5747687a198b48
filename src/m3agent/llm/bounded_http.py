"""HTTP requests to model endpoints with a total deadline and a size cap on the reply.

httpx's timeouts apply to each socket read, so a server that trickles one byte
at a time within the read timeout could hold a request for ever, and a reply is
read whole however large. :class:`BoundedClient` fixes both:

- every socket operation of a request (connect, TLS, write, read, headers
  included) gets at most the time left until the request's deadline, so the
  request ends within ``timeout_s`` (plus one scheduling tick) whatever the
  server does; the expiry surfaces as an ``httpx.TimeoutException``;
- the body is read in chunks and abandoned as soon as it passes ``max_bytes``
  (or when ``Content-Length`` already announces more), raising
  :class:`~m3agent.errors.EndpointError`.

Requests through a proxy taken from the environment use httpx's own transport:
there the deadline is checked between body chunks only.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.errors import EndpointError

if TYPE_CHECKING:
    import httpcore
    import httpx

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("m3agent_http_deadline", default=None)
_SIZE_HINT = "raise max_reply_mb (M3AGENT_MAX_REPLY_MB) if the server is right to send that much; else check the URL"


@dataclass(frozen=True, slots=True)
class HttpReply:
    """A whole, size-checked reply: status, headers (lower-case names) and body bytes."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` (or ``RecursionError`` for absurd nesting) when it is not."""
        return json.loads(self.body)


class BoundedClient:
    """Sends JSON requests; each ends within ``timeout_s`` and reads at most ``max_bytes`` of reply."""

    def __init__(
        self,
        *,
        timeout_s: float,
        max_bytes: int,
        connect_timeout_s: float = 5.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        timeout = httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
        sent = {"Accept-Encoding": "identity", **(headers or {})}  # no compressed replies: no decompression bombs
        self._client = httpx.Client(timeout=timeout, headers=sent, transport=transport or deadline_transport())

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, url: str, payload: Any = None) -> HttpReply:
        """Send ``payload`` as JSON (``None``: no body); httpx transport errors and timeouts propagate."""
        token = _DEADLINE.set(time.monotonic() + self.timeout_s)
        try:
            with self._client.stream(method, url, json=payload) as response:
                body = self._read(response, url)
                return HttpReply(response.status_code, {k.lower(): v for k, v in response.headers.items()}, body)
        finally:
            _DEADLINE.reset(token)

    def _read(self, response: httpx.Response, url: str) -> bytes:
        import httpx

        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise EndpointError(f"{url} announced a reply of {int(declared):,} bytes, over the limit of "
                                f"{self.max_bytes:,} bytes; not read", hint=_SIZE_HINT)
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise EndpointError(f"{url} sent a reply over the limit of {self.max_bytes:,} bytes; "
                                    "stopped reading", hint=_SIZE_HINT)
            chunks.append(chunk)
            if _remaining() <= 0:  # the deadline also holds where a proxy transport does not clamp reads
                raise httpx.ReadTimeout("the reply did not complete before the request deadline")
        return b"".join(chunks)


def _remaining() -> float:
    deadline = _DEADLINE.get()
    return float("inf") if deadline is None else deadline - time.monotonic()


def _clamped(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` shortened to the time left before the current request's deadline."""
    left = _remaining()
    if left == float("inf"):
        return timeout
    if left <= 0:
        raise expired("the request deadline has passed")
    return left if timeout is None else min(timeout, left)


@functools.cache
def _network_stream_class() -> Callable[[httpcore.NetworkStream], httpcore.NetworkStream]:
    import httpcore

    class DeadlineStream(httpcore.NetworkStream):
        """A socket stream whose every read and write ends by the request deadline."""

        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, _clamped(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, _clamped(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> httpcore.NetworkStream:
            return DeadlineStream(
                self._inner.start_tls(ssl_context, server_hostname, _clamped(timeout, httpcore.ConnectTimeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    return DeadlineStream


def _network_backend() -> httpcore.NetworkBackend:
    import httpcore

    stream_class = _network_stream_class()

    class DeadlineBackend(httpcore.NetworkBackend):
        """httpcore's socket backend, with connects and streams bound to the request deadline."""

        def __init__(self) -> None:
            self._inner = httpcore.SyncBackend()

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                        socket_options: Any = None) -> httpcore.NetworkStream:
            clamped = _clamped(timeout, httpcore.ConnectTimeout)
            return stream_class(self._inner.connect_tcp(host, port, clamped, local_address, socket_options))

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Any = None) -> httpcore.NetworkStream:
            clamped = _clamped(timeout, httpcore.ConnectTimeout)
            return stream_class(self._inner.connect_unix_socket(path, clamped, socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return DeadlineBackend()


def deadline_transport() -> httpx.BaseTransport:
    """An httpx transport over an httpcore connection pool whose sockets honour the request deadline."""
    return _transport_class()()


@functools.cache  # classes built on first use: importing this module must not import httpx
def _transport_class() -> type[httpx.BaseTransport]:
    import httpcore
    import httpx

    class _Body(httpx.SyncByteStream):
        def __init__(self, response: httpcore.Response) -> None:
            self._response = response

        def __iter__(self) -> Iterator[bytes]:
            try:
                yield from self._response.iter_stream()
            except _core_errors() as exc:
                raise _as_httpx(exc) from exc

        def close(self) -> None:
            self._response.close()

    class _Transport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(),
                                                 network_backend=_network_backend(), max_connections=8)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            assert isinstance(request.stream, httpx.SyncByteStream)
            core = httpcore.Request(
                method=request.method,
                url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                                 target=request.url.raw_path),
                headers=request.headers.raw, content=request.stream, extensions=request.extensions,
            )
            try:
                response = self._pool.handle_request(core)
            except _core_errors() as exc:
                raise _as_httpx(exc) from exc
            return httpx.Response(status_code=response.status, headers=response.headers, stream=_Body(response),
                                  extensions=response.extensions)

        def close(self) -> None:
            self._pool.close()

    return _Transport


def _core_errors() -> tuple[type[Exception], ...]:
    import httpcore

    return (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol)


def _as_httpx(exc: Exception) -> Exception:
    """The httpx exception of the same name as an httpcore one (httpx mirrors httpcore's tree)."""
    import httpx

    kind = getattr(httpx, type(exc).__name__, None)
    if not (isinstance(kind, type) and issubclass(kind, httpx.TransportError)):
        kind = httpx.TransportError
    return kind(str(exc) or type(exc).__name__)
