"""Endpoint replies are bounded: a total deadline per request, a size cap on bodies, malformed envelopes as errors.

Against a real loopback server (tests/hostile_http.py) that trickles bytes,
sends huge bodies or answers with envelopes that are not OpenAI replies. Every
case ends in an :class:`EndpointError` with a hint, in about the time asked for,
after reading at most the cap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostile_http import HostileServer, hostile_server, huge_body, json_reply, reply, trickled_body, trickled_headers
from m3agent.embed import create_embedder
from m3agent.errors import EndpointError, M3AgentError
from m3agent.llm import create_chat_model
from m3agent.llm.openai_compat import OpenAIChat

MB = 1 << 20
ASK = [{"role": "user", "content": "q"}]


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with hostile_server() as running:
        yield running


def chat(server: HostileServer, **options: Any) -> OpenAIChat:
    model = create_chat_model(f"openai://{server.base}?model=m", backoff_s=0.01, **options)
    assert isinstance(model, OpenAIChat)
    return model


def completion(content: Any = "hi", **extra: Any) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}], **extra}


@pytest.mark.parametrize("behaviour", [trickled_body(0.5), trickled_headers(0.5)], ids=["body", "headers"])
def test_a_trickling_server_is_cut_off_at_the_total_deadline(server: HostileServer, behaviour: Any) -> None:
    server.behaviours = [behaviour]
    started = time.monotonic()
    with pytest.raises(EndpointError, match=r"did not complete its reply within 2 s") as info:
        chat(server, timeout_s=2.0).chat(ASK)  # a byte every 0.5 s never trips a per-read timeout of 2 s
    assert time.monotonic() - started < 3.0
    assert "request_timeout_s" in info.value.hint
    assert len(server.requests) == 1  # a slow reply is not retried


@pytest.mark.parametrize("declare", [True, False], ids=["content-length", "no-length"])
def test_a_huge_body_is_abandoned_at_the_cap(server: HostileServer, declare: bool) -> None:
    server.behaviours = [huge_body(200 * MB, declare=declare)]
    started = time.monotonic()
    with pytest.raises(EndpointError, match="over the limit of 1,048,576 bytes") as info:
        chat(server, max_reply_bytes=MB).chat(ASK)
    assert time.monotonic() - started < 5.0
    assert "max_reply_mb" in info.value.hint
    time.sleep(0.3)
    assert server.bytes_sent < 40 * MB  # the client stopped reading; socket buffers hold the rest


def test_a_huge_error_body_is_not_read_again_on_every_retry(server: HostileServer) -> None:
    server.behaviours = [huge_body(50 * MB, status=503)] * 5
    with pytest.raises(EndpointError, match="over the limit"):
        chat(server, max_reply_bytes=MB).chat(ASK)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (json.dumps({"choices": "nope"}), "'choices' is a str"),
        (json.dumps({"choices": []}), "'choices' is an empty list"),
        (json.dumps({"choices": [1]}), "'choices' is a list of int"),
        (json.dumps({"choices": [{"message": "x"}]}), "'choices[0].message' is a str"),
        (json.dumps({"choices": [{"message": {"content": 5}}]}), "content' is a int"),
        (json.dumps({"model": "m"}), "'choices' is missing"),
        (json.dumps([1, 2]), "not an object"),
        ("[" * 100_000 + "]" * 100_000, "non-JSON"),
        ("\xff\xfe not json", "non-JSON"),
    ],
)
def test_malformed_envelopes_are_endpoint_errors_with_a_hint(server: HostileServer, body: str, problem: str) -> None:
    server.behaviours = [reply(200, body.encode("latin-1"))]
    with pytest.raises(EndpointError) as info:
        chat(server).chat(ASK)
    assert problem in info.value.message
    assert "OpenAI-compatible" in info.value.hint


def test_odd_usage_and_model_fields_do_not_fail_a_good_reply(server: HostileServer) -> None:
    server.behaviours = [json_reply(completion("ok", usage={"prompt_tokens": "many", "completion_tokens": -3},
                                               model={"nested": 1}))]
    reply_ = chat(server).chat(ASK)
    assert reply_.text == "ok" and reply_.usage.total_tokens == 0 and reply_.model == "m"


def test_a_model_list_that_is_not_a_list_is_an_endpoint_error(server: HostileServer) -> None:
    server.behaviours = [json_reply({"data": 5})]
    model = create_chat_model(f"openai://{server.base}")
    with pytest.raises(EndpointError, match="lists no models"):
        model.chat(ASK)


@pytest.mark.media
def test_a_malformed_envelope_fails_the_clip_not_the_ingest(server: HostileServer, media_dir: Path,
                                                            tmp_path: Path) -> None:
    from m3agent.pipeline import ingest_source
    from m3agent.settings import load_settings

    server.behaviours = [json_reply({"choices": "nope"})] * 10
    settings = load_settings(None, memory=str(tmp_path / "m.db"), embedder="hash", writer="mllm",
                             writer_llm=f"openai://{server.base}?model=omni",
                             perception={"faces": False, "voices": False})
    video = media_dir / "video" / "whitehouse_short_hamilton_clip.mp4"
    report = ingest_source(settings, str(video), max_clips=1, show_progress=False)
    assert [f["clip"] for f in report.clips_failed] == [0]
    assert "not an OpenAI chat completion" in report.clips_failed[0]["reason"]


# --- the remote embedder ----------------------------------------------------------------------


def embedder(server: HostileServer, **options: Any) -> Any:
    return create_embedder(f"openai://{server.base}?model=e", **options)


def test_remote_embedder_is_bounded_in_time_and_size(server: HostileServer) -> None:
    server.behaviours = [trickled_body(0.5), huge_body(100 * MB)]
    started = time.monotonic()
    with pytest.raises(EndpointError, match="within 2 s"):
        embedder(server, timeout_s=2.0).embed(["a"])
    assert time.monotonic() - started < 3.0
    with pytest.raises(EndpointError, match="over the limit"):
        embedder(server, max_reply_bytes=MB).embed(["a"])


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"data": "nope"}, "not a list of 2 objects"),
        ({"data": [{"embedding": [1.0], "index": 0}]}, "not a list of 2 objects"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0], "index": 0}]}, "'index' fields"),
        ({"data": [{"embedding": [1.0, 2.0]}, {"embedding": [1.0]}]}, "of one size"),
        ({"data": [{"embedding": "abc"}, {"embedding": "abd"}]}, "of one size"),
        ({"data": [{"embedding": [1.0, "x"]}, {"embedding": [1.0, 2.0]}]}, "not a finite number"),
        ({"data": [{"embedding": [1.0, float("nan")]}, {"embedding": [1.0, 2.0]}]}, "not a finite number"),
    ],
)
def test_remote_embedder_rejects_malformed_envelopes(server: HostileServer, value: Any, problem: str) -> None:
    server.behaviours = [json_reply(value)]
    with pytest.raises(EndpointError, match=problem) as info:
        embedder(server).embed(["a", "b"])
    assert isinstance(info.value, M3AgentError) and info.value.hint


def test_remote_embedder_orders_by_index(server: HostileServer) -> None:
    server.behaviours = [json_reply({"data": [{"embedding": [0.0, 2.0], "index": 1},
                                              {"embedding": [3.0, 0.0], "index": 0}]})]
    vectors = embedder(server).embed(["a", "b"])
    assert vectors.tolist() == [[1.0, 0.0], [0.0, 1.0]]
