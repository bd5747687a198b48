"""Request hygiene against a real uvicorn server: JSON the API cannot hold is a 422 in the documented shape,
bodies are bounded per route even when chunked without a Content-Length, every answer carries security headers,
and the API docs load nothing from another site."""

from __future__ import annotations

import json
import re
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
import httpx

from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import build_memory, live_server

MB = 1 << 20
PROBLEM = {"error", "message", "hint"}


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "media").mkdir()
    build_memory(tmp_path / "memory.db", tmp_path / "media")
    settings = load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                             server={"allowed_folders": [str(tmp_path / "media")], "max_upload_mb": 1})
    with live_server(create_app(settings, mcp=False)) as url:
        yield url


def post_raw(url: str, path: str, body: str, method: str = "POST") -> httpx.Response:
    return httpx.request(method, f"{url}{path}", content=body.encode("utf-8", "surrogatepass"),
                         headers={"content-type": "application/json"}, timeout=30)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", '"\\ud800"', '"a\\udfff"'])
def test_json_the_api_cannot_hold_is_a_422_in_the_documented_shape(server: str, value: str) -> None:
    cases = [("/api/search", f'{{"query": {value}}}'), ("/api/search", f'{{"query": "soup", "k": {value}}}'),
             ("/api/ask", f'{{"question": {value}}}'), ("/api/forget", f'{{"video": {value}}}'),
             ("/api/characters/1", f'{{"name": {value}}}')]
    for path, body in cases:
        answer = post_raw(server, path, body, "PATCH" if path.startswith("/api/characters") else "POST")
        assert answer.status_code == 422, (path, body, answer.status_code, answer.text[:300])
        assert set(answer.json()) == PROBLEM and answer.json()["hint"], (path, answer.text)
    assert httpx.get(f"{server}/api/characters/1").json()["name"] == ""  # nothing was renamed


def test_validation_errors_name_the_field_in_the_documented_shape(server: str) -> None:
    for path, body in [("/api/search", {"query": ""}), ("/api/search", {"query": "x", "k": "many"}),
                       ("/api/forget", {"video": "walk", "memory": 1}), ("/api/ask", {})]:
        answer = httpx.post(f"{server}{path}", json=body, timeout=30)
        assert answer.status_code == 422 and set(answer.json()) == PROBLEM, (path, answer.text)
    k = httpx.post(f"{server}/api/search", json={"query": "x", "k": "many"}).json()
    assert "k" in k["message"] and "many" not in k["message"]  # the field, not an echo of the value
    assert set(httpx.get(f"{server}/api/memories", params={"limit": 0}).json()) == PROBLEM
    for unknown in (httpx.get(f"{server}/api/nothing-here"), httpx.put(f"{server}/api/search", json={})):
        assert unknown.status_code in (404, 405) and set(unknown.json()) == PROBLEM


def send_chunked(url: str, path: str, content_type: str, first: bytes, total: int) -> tuple[int, bytes]:
    """POST ``first`` then zeros up to ``total`` bytes, chunked with no Content-Length, until the server answers
    or stops reading; returns the bytes sent and the answer's head."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    block = b"0" * MB
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: {content_type}\r\n"
                     "transfer-encoding: chunked\r\n\r\n".encode())
        sent = 0
        try:
            for chunk in [first] + [block] * (total // MB):
                if select.select([sock], [], [], 0)[0]:
                    break  # the server has answered
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            else:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # it stopped reading: what it sent is what counts
        return sent, _answer(sock)


def _answer(sock: socket.socket) -> bytes:
    data = b""
    deadline = time.monotonic() + 10
    sock.settimeout(1)
    while b"\r\n\r\n" not in data and time.monotonic() < deadline:
        try:
            part = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        if not part:
            break
        data += part
    return data


def test_a_300_mb_json_body_is_refused_early_without_a_content_length(server: str) -> None:
    sent, answer = send_chunked(server, "/api/search", "application/json", b'{"query": "', 300 * MB)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sent < 32 * MB, f"the server read {sent / MB:.0f} MB of a body over its limit"
    assert httpx.get(f"{server}/health").status_code == 200


def test_a_chunked_upload_is_stopped_once_past_the_limit(server: str, tmp_path: Path) -> None:
    boundary = "m3agentboundary"
    first = (f"--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"big.mp4\"\r\n"
             "content-type: video/mp4\r\n\r\n").encode()
    sent, answer = send_chunked(server, "/api/jobs/upload", f"multipart/form-data; boundary={boundary}", first,
                                300 * MB)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sent < 40 * MB, f"the server read {sent / MB:.0f} MB of an upload over its 1 MB limit"
    problem = json.loads(answer.partition(b"\r\n\r\n")[2] or b"{}") if b"content-length" in answer.lower() else {}
    assert not problem or set(problem) == PROBLEM
    uploads = tmp_path / "memory-server" / "uploads"
    assert not uploads.exists() or not any(uploads.iterdir())


def test_every_answer_carries_security_headers(server: str) -> None:
    for path in ("/", "/api/videos", "/docs", "/static/style.css", "/api/nothing-here"):
        headers = httpx.get(f"{server}{path}").headers
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["x-frame-options"] == "DENY", path
        assert headers["referrer-policy"] == "no-referrer", path
        policy = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy, path
        assert "unsafe-eval" not in policy and "script-src 'self'" in policy, path


def test_the_api_docs_are_served_from_this_server(server: str) -> None:
    docs = httpx.get(f"{server}/docs")
    assert docs.status_code == 200 and "/openapi.json" in docs.text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", docs.text), "the docs load assets from another site"
    for operation in ("POST /api/search", "POST /api/ask/stream", "GET /api/videos/{video_id}"):
        assert operation in " ".join(re.sub(r"<[^>]+>", " ", docs.text).split()), operation
    assert httpx.get(f"{server}/redoc").status_code == 404
