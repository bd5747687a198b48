"""A real loopback HTTP server that misbehaves on purpose, for the endpoint-bounds tests.

Each connection reads one request (headers and ``Content-Length`` body), then
runs the scripted behaviour, which writes raw bytes to the socket: trickle a
reply byte by byte, send a huge body, or answer with a malformed envelope. It
listens on 127.0.0.1 only, serves each connection in a daemon thread, and every
behaviour stops after at most ``MAX_SECONDS`` or as soon as the client goes
away, so a test that fails cannot leave it running.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

MAX_SECONDS = 30.0
Behaviour = Callable[["Connection"], None]


class Connection:
    """The socket of one request, with helpers that stop quietly once the client has gone."""

    def __init__(self, sock: socket.socket, server: HostileServer) -> None:
        self.sock = sock
        self.server = server
        self.started = time.monotonic()

    def send(self, data: bytes) -> bool:
        """Send ``data``; ``False`` when the client has gone or the time bound is reached."""
        if time.monotonic() - self.started > MAX_SECONDS:
            return False
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        with self.server.lock:
            self.server.bytes_sent += len(data)
        return True

    def trickle(self, data: bytes, every_s: float) -> None:
        for byte in data:
            if not self.send(bytes([byte])):
                return
            time.sleep(every_s)


class HostileServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.behaviours: list[Behaviour] = []
        self.requests: list[str] = []
        self.bytes_sent = 0
        self.lock = threading.Lock()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(MAX_SECONDS)
                head = _read_request(self.request)
                if head is None:
                    return
                with server.lock:
                    server.requests.append(head)
                    behaviour = server.behaviours.pop(0) if server.behaviours else reply(500, b"no script")
                behaviour(Connection(self.request, server))

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]

    @property
    def base(self) -> str:
        return f"127.0.0.1:{self.port}/v1"


def _read_request(sock: socket.socket) -> str | None:
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) < 1 << 20:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < min(length, 1 << 24):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except OSError:
        return None
    return head.split(b"\r\n", 1)[0].decode("latin-1")


@contextmanager
def hostile_server() -> Iterator[HostileServer]:
    server = HostileServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _head(status: int, length: int | None, extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{size}{extra}Connection: close\r\n\r\n".encode()


def reply(status: int, body: bytes) -> Behaviour:
    """A well-formed HTTP reply with ``body`` (an endpoint envelope may still be malformed)."""

    def run(conn: Connection) -> None:
        conn.send(_head(status, len(body)) + body)

    return run


def json_reply(value: Any, status: int = 200) -> Behaviour:
    return reply(status, json.dumps(value).encode())


def trickled_body(every_s: float, size: int = 10_000) -> Behaviour:
    """Headers at once, then the body one byte every ``every_s`` seconds."""

    def run(conn: Connection) -> None:
        if conn.send(_head(200, size)):
            conn.trickle(b" " * size, every_s)

    return run


def trickled_headers(every_s: float) -> Behaviour:
    """The status line and headers themselves, one byte every ``every_s`` seconds."""
    return lambda conn: conn.trickle(_head(200, 2) + b"{}", every_s)


def huge_body(size: int, status: int = 200, declare: bool = True) -> Behaviour:
    """``size`` bytes of body in 1 MiB writes, with or without a ``Content-Length``."""

    def run(conn: Connection) -> None:
        if not conn.send(_head(status, size if declare else None)):
            return
        block = b"x" * (1 << 20)
        for _ in range(size // len(block)):
            if not conn.send(block):
                return

    return run
