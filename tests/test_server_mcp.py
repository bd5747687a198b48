"""The MCP tools, called with the official SDK's own client over stdio (``m3agent mcp``) and over
streamable HTTP (``/mcp`` of a real uvicorn server), against a real memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="needs the server extra: pip install 'm3agent[server]'")
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import Built, build_memory, live_server

BIN = Path(sys.executable).with_name("m3agent")
SRC = Path(__file__).resolve().parents[1] / "src"
TOOLS = {"remember", "job_status", "recall", "ask", "forget", "list_characters", "rename_character",
         "who_is_at", "person_profile", "appearances", "people_together", "shots", "count_people"}
TOKEN = "mcp-test-token-0123456789"


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
    return {**clean, "PYTHONPATH": str(SRC), "M3AGENT_EMBEDDER": "hash", "M3AGENT_LLM": "none"}


async def exercise(client: Client, built: Built, media: Path) -> None:
    """The same conversation over any transport: list, recall, ask, rename, forget, and errors with hints."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    recall = tools["recall"].input_schema
    assert recall["required"] == ["query"] and recall["properties"]["k"]["maximum"] == 100
    assert all(tools[name].description for name in TOOLS)

    found = await client.call_tool("recall", {"query": "salt in the soup", "k": 2})
    assert not found.is_error
    hits = _hits(found.structured_content)
    assert hits[0]["memory_id"] == built.memories[1]

    answer = await client.call_tool("ask", {"question": "What does the soup need?"})
    assert answer.structured_content["answered"]
    assert any(e["memory_id"] == built.memories[1] for e in answer.structured_content["evidence"])

    renamed = await client.call_tool("rename_character", {"character_id": 1, "name": "Gina"})
    assert renamed.structured_content["name"] == "Gina"
    people = await client.call_tool("list_characters", {})
    assert {c["name"] for c in people.structured_content["result"]} == {"Gina", ""}

    outside = await client.call_tool("remember", {"source": "/etc/passwd"})
    assert outside.is_error and "What to do:" in outside.content[0].text and "allowed" in outside.content[0].text
    bad = await client.call_tool("forget", {})
    assert bad.is_error and "exactly one" in bad.content[0].text
    unknown = await client.call_tool("recall", {"query": "x", "video_id": "nope"})
    assert unknown.is_error and "What to do:" in unknown.content[0].text
    wrong_type = await client.call_tool("recall", {"query": "x", "k": "many"})
    assert wrong_type.is_error

    await refused_like_rest(client)

    job = await client.call_tool("remember", {"source": str(media / "broken.mp4")})
    assert not job.is_error and job.structured_content["state"] in ("queued", "running", "failed")
    status = await _settled(client, job.structured_content["id"])
    assert status["state"] == "failed" and status["hint"]

    gone = await client.call_tool("forget", {"video": "walk"})
    assert gone.structured_content == {"deleted": "video", "id": "walk"}


async def refused_like_rest(client: Client) -> None:
    """Arguments REST refuses are refused by the tools too, each with the reason and a hint; nothing changes."""
    cases = [("recall", {"query": "x" * 2001}, "2000"), ("recall", {"query": "   "}, "query"),
             ("recall", {"query": "x", "k": 10**30}, "k"), ("recall", {"query": "x", "k": "many"}, "k"),
             ("ask", {"question": "q" * 5000}, "2000"), ("ask", {"question": "  "}, "question"),
             ("rename_character", {"character_id": 1, "name": "   "}, "name"),
             ("rename_character", {"character_id": 2**70, "name": "X"}, "character_id"),
             ("forget", {"memory": 2**70}, "memory"), ("remember", {"source": "x" * 5000}, "source"),
             ("who_is_at", {"video_id": "talk", "time": "1e999"}, "time"),
             ("person_profile", {"ref": "p" * 500}, "ref")]
    for name, arguments, reason in cases:
        refused = await client.call_tool(name, arguments)
        text = refused.content[0].text if refused.content else ""
        assert refused.is_error, (name, arguments)
        assert reason in text and "What to do:" in text and len(text) < 2000, (name, text[:400])
    people = await client.call_tool("list_characters", {})
    assert {c["name"] for c in people.structured_content["result"]} == {"Gina", ""}  # spaces renamed no one


def _hits(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [h for clip in result.get("clips", []) for h in clip["hits"]] or result.get("hits", [])


async def _settled(client: Client, job_id: str) -> dict[str, Any]:
    for _ in range(300):
        status = (await client.call_tool("job_status", {"job_id": job_id})).structured_content
        if status["state"] not in ("queued", "running"):
            return dict(status)
        await anyio.sleep(0.2)
    raise AssertionError("the job did not finish")


@pytest.fixture()
def memory(tmp_path: Path) -> tuple[Path, Built, Path]:
    media = tmp_path / "media"
    media.mkdir()
    (media / "broken.mp4").write_bytes(b"\x00" * 1000)
    return tmp_path / "memory.db", build_memory(tmp_path / "memory.db", media), media


def test_stdio_tools_with_the_sdk_client(memory: tuple[Path, Built, Path], tmp_path: Path) -> None:
    db, built, media = memory
    params = StdioServerParameters(command=str(BIN), args=["mcp", "--memory", str(db), "--allow-folder", str(media)],
                                   env=env(), cwd=str(tmp_path))

    async def main() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            await exercise(client, built, media)

    anyio.run(main)


def test_stdio_server_exits_when_stdin_closes(memory: tuple[Path, Built, Path], tmp_path: Path) -> None:
    db, _, _ = memory
    proc = subprocess.Popen([str(BIN), "mcp", "--memory", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(), cwd=tmp_path)
    time.sleep(1.0)
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert b"Traceback" not in (proc.stderr.read() if proc.stderr else b"")


def test_streamable_http_tools_with_the_sdk_client_and_a_token(memory: tuple[Path, Built, Path]) -> None:
    db, built, media = memory
    settings = load_settings(memory=str(db), embedder="hash", llm="none",
                             server={"allowed_folders": [str(media)], "token": TOKEN})

    async def main(url: str) -> None:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=120) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            await exercise(client, built, media)
        async with httpx2.AsyncClient(timeout=30) as anonymous:
            refused = await anonymous.post(f"{url}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert refused.status_code == 401

    with live_server(create_app(settings)) as url:
        anyio.run(main, url)


def test_stdio_answers_every_line_even_unreadable_ones(memory: tuple[Path, Built, Path], tmp_path: Path) -> None:
    """Raw lines, as a buggy or hostile client sends them: each gets a JSON-RPC answer, and the server goes on."""
    db, built, _ = memory
    proc = subprocess.Popen([str(BIN), "mcp", "--memory", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env(), cwd=tmp_path)
    try:
        rpc = RawLines(proc)
        rpc.send('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
                 '"capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}')
        assert rpc.read()["id"] == 1
        rpc.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        rpc.send("{this is not json")
        assert rpc.read() == {**rpc.last, "id": None, "error": {**rpc.last["error"], "code": -32700}}
        rpc.send('{"jsonrpc": "2.0", "id": 5}')
        assert rpc.last_error(rpc.read(), 5) == -32600
        rpc.send('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "recall", '
                 '"arguments": {"query": "\\ud800"}}}')
        answer = rpc.read()
        assert answer["id"] == 7 and ("error" in answer or answer["result"]["isError"]), answer
        assert "surrogate" in json.dumps(answer)
        rpc.send('{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "recall", '
                 '"arguments": {"query": "salt in the soup", "k": 2}}}')
        found = rpc.read()
        assert found["id"] == 8 and str(built.memories[1]) in json.dumps(found["result"]["structuredContent"])
    finally:
        proc.kill()
        proc.wait()


class RawLines:
    """JSON-RPC lines to and from a stdio server, each read bounded by a timeout."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.last: dict[str, Any] = {}

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 60.0) -> dict[str, Any]:
        import select

        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"no answer within {timeout} s"
        self.last = json.loads(self.proc.stdout.readline())
        return self.last

    @staticmethod
    def last_error(answer: dict[str, Any], request_id: int) -> int:
        assert answer["id"] == request_id and "hint" in answer["error"]["data"], answer
        return int(answer["error"]["code"])
