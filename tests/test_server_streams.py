"""Clients that leave cannot wedge the server: dropped answer streams, a per-request deadline, and a
``/health`` that says when the API cannot serve. Real uvicorn servers, real sockets, and a real
OpenAI-compatible endpoint that is slow on purpose (or the local llama.cpp server)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
import httpx

from hostile_http import Behaviour, Connection, hostile_server, json_reply
from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from server_helpers import Built, build_memory, live_server

QUESTION = {"question": "What does the soup need?", "mode": "select"}
SELECT = {"choice": "none", "answer": "salt"}


def make_settings(tmp_path: Path, llm: str, **server: Any) -> Settings:
    return load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm=llm,
                         server={"allowed_folders": [str(tmp_path / "media")], **server})


@pytest.fixture()
def built(tmp_path: Path) -> Built:
    (tmp_path / "media").mkdir()
    return build_memory(tmp_path / "memory.db", tmp_path / "media")


def slow_reply(seconds: float) -> Behaviour:
    """An OpenAI chat completion after ``seconds`` (a model that is busy thinking)."""

    def run(conn: Connection) -> None:
        time.sleep(seconds)
        json_reply({"choices": [{"message": {"role": "assistant", "content": json.dumps(SELECT)}}]})(conn)

    return run


@contextmanager
def slow_llm(seconds: float) -> Iterator[str]:
    """The ``llm`` setting of a real loopback endpoint answering every call after ``seconds``."""
    with hostile_server() as endpoint:
        endpoint.behaviours = [slow_reply(seconds)] * 2000
        yield f"openai://{endpoint.base}?model=slow"


def drop_stream(url: str) -> bytes:
    """Open ``POST /api/ask/stream``, read what comes within 0.2 s (at least the status), and hang up."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps(QUESTION).encode()
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"POST /api/ask/stream HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))
        sock.settimeout(0.2)
        try:
            return sock.recv(4096)
        except TimeoutError:
            return b""


def assert_every_endpoint_answers(url: str, within_s: float) -> None:
    """Every read endpoint (each GET without path parameters, a video, a search) answers 200 within ``within_s``."""
    spec = httpx.get(f"{url}/openapi.json", timeout=30).json()  # the listing; built on its first call (seconds)
    paths = [p for p, ops in spec["paths"].items() if "get" in ops and "{" not in p]
    calls = [("GET", p, None) for p in ["/health", "/", *paths, "/api/videos/talk", "/api/characters/1"]]
    calls.append(("POST", "/api/search", {"query": "soup salt"}))
    for method, path, body in calls:
        started = time.monotonic()
        try:
            answer = httpx.request(method, f"{url}{path}", json=body, timeout=within_s + 1)
        except httpx.TimeoutException:
            raise AssertionError(f"{method} {path} did not answer within {within_s + 1} s") from None
        took = time.monotonic() - started
        assert answer.status_code == 200 and took < within_s, (method, path, answer.status_code, took)


def drop_then_check(url: str, streams: int = 50) -> None:
    """Drop ``streams`` answer streams, then every endpoint answers within 1 s and a new answer completes."""
    heads = [drop_stream(url) for _ in range(streams)]
    assert sum(h.startswith(b"HTTP/1.1 200") for h in heads) >= 1
    assert_every_endpoint_answers(url, within_s=1.0)
    answer = httpx.post(f"{url}/api/ask", json=QUESTION, timeout=120)
    assert answer.status_code == 200 and answer.json()["type"] == "answer"


def test_dropped_streams_do_not_wedge_the_api(tmp_path: Path, built: Built) -> None:
    with slow_llm(1.0) as llm, live_server(create_app(make_settings(tmp_path, llm), mcp=False)) as url:
        drop_then_check(url)


def test_dropped_streams_without_a_model_do_not_wedge_the_api(tmp_path: Path, built: Built) -> None:
    with live_server(create_app(make_settings(tmp_path, "none"), mcp=False)) as url:
        drop_then_check(url)


@pytest.mark.slow
def test_dropped_streams_with_a_local_llm_server_do_not_wedge_the_api(tmp_path: Path, built: Built) -> None:
    from llm_server import llama_server

    with llama_server() as base:
        llm = f"openai://{base.removeprefix('http://')}?model=smollm2"
        with live_server(create_app(make_settings(tmp_path, llm), mcp=False)) as url:
            drop_then_check(url, streams=50)


def test_an_answer_past_the_deadline_is_a_504_with_a_hint(tmp_path: Path, built: Built) -> None:
    with slow_llm(4.0) as llm:
        settings = make_settings(tmp_path, llm, request_timeout_s=1.5)
        with live_server(create_app(settings, mcp=False)) as url:
            started = time.monotonic()
            late = httpx.post(f"{url}/api/ask", json=QUESTION, timeout=30)
            assert late.status_code == 504 and time.monotonic() - started < 3.0
            assert set(late.json()) == {"error", "message", "hint"} and "request_timeout_s" in late.json()["hint"]
            with httpx.stream("POST", f"{url}/api/ask/stream", json=QUESTION, timeout=30) as stream:
                lines = list(stream.iter_lines())
            assert "event: error" in lines
            error = json.loads(lines[lines.index("event: error") + 1].removeprefix("data: "))
            assert "request_timeout_s" in error["hint"]
            assert_every_endpoint_answers(url, within_s=1.0)


def test_health_says_not_ready_while_no_store_can_be_had(tmp_path: Path, built: Built) -> None:
    app = create_app(make_settings(tmp_path, "none", read_stores=1), mcp=False)
    with live_server(app) as url:
        assert httpx.get(f"{url}/health", timeout=5).json()["status"] == "ok"
        with app.state.ctx.stores.read():  # every pooled store lent out: the API cannot read the memory
            started = time.monotonic()
            busy = httpx.get(f"{url}/health", timeout=5)
            assert time.monotonic() - started < 1.0
        assert busy.status_code == 503 and set(busy.json()) == {"error", "message", "hint"}
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
