"""End to end: the agent loop over a real llama.cpp OpenAI-compatible server running SmolLM2.

The server is ``python -m llama_cpp.server`` started as a subprocess
(tests/llm_server.py); the agent talks to it through the ``openai://``
backend, on a memory written through the store API. SmolLM2-135M cannot
reason well, so the test asserts the contract (a well-formed, schema-driven
run whose Answer carries causal evidence), not the answer's wording.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_server import llama_server
from m3agent.control import AgentConfig, Answer, answer_question, run_to_answer
from m3agent.llm import create_chat_model
from m3agent.llm.openai_compat import OpenAIChat
from test_control_world import World, opened_world

pytestmark = [pytest.mark.llm, pytest.mark.slow]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with llama_server(n_ctx=4096) as base:
        yield base


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with opened_world(tmp_path) as built:
        yield built


def test_agent_answers_through_the_openai_backend_with_evidence(server_url: str, world: World) -> None:
    spec = server_url.replace("http://", "openai://") + "?model=smollm2&max_string=200"
    chat = create_chat_model(spec, timeout_s=300)
    assert isinstance(chat, OpenAIChat)
    config = AgentConfig.from_settings(rounds=3, max_tokens=200, max_context_tokens=3500)
    store, embedder = world.store, world.embedder
    steps = list(answer_question(store, embedder, chat, "Who buys bread?", video_id="v1", before_clip=4, config=config))
    answer = run_to_answer(steps)
    assert isinstance(steps[-1], Answer) and steps[-1] is answer
    assert answer.answered and answer.text.strip(), answer.failure
    assert 1 <= answer.rounds <= 3 and answer.usage.calls == answer.rounds
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    assert answer.evidence and all(e.clip.video_id == "v1" and e.clip.index <= 4 for e in answer.evidence)
    assert all(e.start_s >= 0 and e.end_s > e.start_s for e in answer.evidence)
    # llama-cpp-python's server refuses json_schema (422) and constrains json_object + schema
    assert chat.structured_mode == "json_object_schema"
    data = json.loads(json.dumps(answer.to_dict()))
    assert data["model"] and data["evidence"][0]["clip_index"] <= 4
