"""The OpenAI-compatible client against a real local HTTP server with scripted behaviour.

The server (stdlib ``http.server`` on a free port) answers each request with
the next scripted ``(status, body, headers)`` and records what it received,
so retries, structured-output fallback and error mapping are observed on
real sockets.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from m3agent.errors import ConfigError, EndpointError
from m3agent.llm import CHAT_MODELS, create_chat_model
from m3agent.llm.openai_compat import OpenAIChat

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
Scripted = tuple[int, dict[str, Any], dict[str, str]]


def completion(content: str, prompt: int = 11, completion_tokens: int = 5) -> Scripted:
    body = {
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens},
    }
    return 200, body, {}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Scripted:
    return status, {"error": {"message": message}}, headers or {}


class FakeServer:
    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.requests: list[tuple[str, str, dict[str, Any], dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: dict[str, Any] | None) -> None:
                server.requests.append((self.command, self.path, body or {}, dict(self.headers)))
                status, payload, headers = server.script.pop(0) if server.script else error(500, "no script")
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                self._answer(json.loads(self.rfile.read(length)))

            def do_GET(self) -> None:
                self._answer(None)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"openai://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


def make(server: FakeServer, **kwargs: Any) -> OpenAIChat:
    chat = create_chat_model(server.url + "?model=m1", backoff_s=0.01, **kwargs)
    assert isinstance(chat, OpenAIChat)
    return chat


def test_spec_schemes_are_registered() -> None:
    assert {"openai", "http", "https", "llamacpp", "scripted"} <= set(CHAT_MODELS.names())
    chat = create_chat_model("https://api.example.com/v1?model=gpt-x", api_key="k")
    assert isinstance(chat, OpenAIChat)
    assert chat.base_url == "https://api.example.com/v1" and chat.model == "gpt-x"


def test_json_schema_output_usage_and_api_key(server: FakeServer) -> None:
    server.script = [completion('{"answer": "Lily"}')]
    reply = make(server, api_key="secret").chat([{"role": "user", "content": "name?"}], schema=SCHEMA)
    assert reply.parsed == {"answer": "Lily"} and reply.error is None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.calls) == (11, 5, 1)
    _, path, body, headers = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "m1"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert headers["Authorization"] == "Bearer secret"


def test_rejected_formats_fall_back_step_by_step_to_prompting(server: FakeServer) -> None:
    server.script = [
        error(400, "response_format type json_schema is not supported"),
        error(422, "response_format.schema: extra fields not permitted"),
        error(400, "unknown field response_format"),
        completion('Here: {"answer": "Lily"}'),
        completion('{"answer": "Tom"}'),
    ]
    chat = make(server)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]
    reply = chat.chat(messages, schema=SCHEMA)
    assert reply.parsed == {"answer": "Lily"}
    formats = [r[2].get("response_format") for r in server.requests]
    assert [f and f["type"] for f in formats] == ["json_schema", "json_object", "json_object", None]
    assert formats[1] == {"type": "json_object", "schema": SCHEMA} and "schema" not in formats[2]
    system = server.requests[3][2]["messages"][0]["content"]
    assert system.startswith("Be brief.") and '"answer"' in system and "JSON" in system
    # the working mode is remembered: the next call goes straight to prompting
    assert chat.structured_mode == "prompt"
    assert chat.chat([{"role": "user", "content": "q"}], schema=SCHEMA).parsed == {"answer": "Tom"}
    assert len(server.requests) == 5


def test_spec_options_choose_the_mode_and_cap_strings(server: FakeServer) -> None:
    server.script = [completion('{"answer": "Lily"}')]
    chat = create_chat_model(server.url + "?model=m1&structured=json_object_schema&max_string=50")
    assert chat.chat([{"role": "user", "content": "q"}], schema=SCHEMA).parsed == {"answer": "Lily"}
    sent = server.requests[0][2]["response_format"]
    assert sent["type"] == "json_object" and sent["schema"]["properties"]["answer"]["maxLength"] == 50
    with pytest.raises(ConfigError, match="structured-output mode"):
        create_chat_model(server.url + "?structured=xml")
    with pytest.raises(ConfigError, match="positive integer"):
        create_chat_model(server.url + "?max_string=-3")


def test_context_length_error_is_not_mistaken_for_a_format_problem(server: FakeServer) -> None:
    server.script = [error(400, "maximum context length is 4096 tokens")]
    chat = make(server)
    with pytest.raises(EndpointError, match="HTTP 400"):
        chat.chat([{"role": "user", "content": "q"}], schema=SCHEMA)
    assert chat.structured_mode == "json_schema" and len(server.requests) == 1


def test_retries_5xx_and_429_with_backoff_then_succeeds(server: FakeServer) -> None:
    server.script = [error(503, "busy"), error(429, "slow down", {"Retry-After": "0"}), completion("hi")]
    reply = make(server).chat([{"role": "user", "content": "q"}])
    assert reply.text == "hi" and reply.parsed is None
    assert len(server.requests) == 3


def test_gives_up_after_bounded_retries(server: FakeServer) -> None:
    server.script = [error(500, "boom")] * 10
    with pytest.raises(EndpointError, match="HTTP 500") as info:
        make(server, max_retries=2).chat([{"role": "user", "content": "q"}])
    assert len(server.requests) == 3
    assert "overloaded" in info.value.hint


def test_client_errors_are_not_retried(server: FakeServer) -> None:
    server.script = [error(401, "invalid api key"), completion("never")]
    with pytest.raises(EndpointError, match="invalid api key") as info:
        make(server).chat([{"role": "user", "content": "q"}])
    assert len(server.requests) == 1
    assert "API key" in info.value.hint


def test_model_is_taken_from_the_server_when_not_given(server: FakeServer) -> None:
    server.script = [(200, {"data": [{"id": "served-model"}]}, {}), completion("ok")]
    chat = create_chat_model(server.url)
    reply = chat.chat([{"role": "user", "content": "q"}])
    assert reply.text == "ok"
    assert server.requests[0][:2] == ("GET", "/v1/models")
    assert server.requests[1][2]["model"] == "served-model"


def test_unparsable_structured_reply_is_reported_not_raised(server: FakeServer) -> None:
    server.script = [completion("I cannot comply")]
    reply = make(server).chat([{"role": "user", "content": "q"}], schema=SCHEMA)
    assert reply.parsed is None and reply.error is not None and "not JSON" in reply.error


def test_refused_port_raises_endpoint_error_quickly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chat = create_chat_model(f"openai://127.0.0.1:{port}/v1?model=m")
    started = time.perf_counter()
    with pytest.raises(EndpointError, match="cannot reach") as info:
        chat.chat([{"role": "user", "content": "q"}])
    assert time.perf_counter() - started < 5.0
    assert "start the server" in info.value.hint
