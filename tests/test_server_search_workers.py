"""Search worker processes (``server.search_workers``): they answer POST /api/search as the server does, see
writes made after they started, report errors as the server does, and stop with it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
from fastapi.testclient import TestClient

from m3agent.server.app import create_app
from m3agent.server.context import ServerContext
from server_helpers import Built, build_memory
from test_server_api import make_settings

QUERIES = [{"query": "salt in the soup", "k": 3}, {"query": "salt in the soup", "video_id": "walk"},
           {"query": "who walks the dog", "tool": "search_clip", "k": 2}]


@pytest.fixture()
def built(tmp_path: Path) -> Built:
    (tmp_path / "media").mkdir()
    return build_memory(tmp_path / "memory.db", tmp_path / "media")


def pooled(ctx: ServerContext, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while ctx.search_pool is None:
        assert time.monotonic() < deadline, "the search workers did not start"
        time.sleep(0.2)


@pytest.fixture()
def both(tmp_path: Path, built: Built) -> Iterator[tuple[TestClient, TestClient, ServerContext]]:
    """A server with one search worker and one without, on the same memory."""
    with_pool = create_app(make_settings(tmp_path, search_workers=1), mcp=False, inspector=False)
    plain = create_app(make_settings(tmp_path), mcp=False, inspector=False)
    with TestClient(with_pool, base_url="http://127.0.0.1") as a, TestClient(plain, base_url="http://127.0.0.1") as b:
        ctx = with_pool.state.ctx
        pooled(ctx)
        yield a, b, ctx
    assert ctx.search_pool is None  # stopped with the server


def test_workers_answer_as_the_server_does(both: tuple[TestClient, TestClient, ServerContext], built: Built) -> None:
    workers, plain, ctx = both
    for body in QUERIES:
        got, want = workers.post("/api/search", json=body), plain.post("/api/search", json=body)
        assert got.status_code == want.status_code == 200
        assert {**got.json(), "latency_s": 0} == {**want.json(), "latency_s": 0}
    missing = workers.post("/api/search", json={"query": "x", "video_id": "nope"})
    assert missing.status_code == 404 and missing.json()["error"] == plain.post(
        "/api/search", json={"query": "x", "video_id": "nope"}).json()["error"]
    assert ctx.search_pool is not None  # the answers above came from the worker


def test_workers_see_forgotten_memories_go(both: tuple[TestClient, TestClient, ServerContext], built: Built) -> None:
    workers, _, _ = both
    first = workers.post("/api/search", json=QUERIES[0]).json()
    top = next(h for clip in first["clips"] for h in clip["hits"])["memory_id"]
    assert workers.delete(f"/api/memories/{top}").status_code == 200
    again = workers.post("/api/search", json=QUERIES[0]).json()
    assert top not in {h["memory_id"] for clip in again["clips"] for h in clip["hits"]}
