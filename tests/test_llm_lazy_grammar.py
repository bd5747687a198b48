"""Greedy replies under a grammar checking only the chosen token give the replies of the full mask, faster.

Real packaged SmolLM2 in two model processes, one with ``lazy_grammar=0`` (llama-cpp-python's own sampler: the
grammar masks the whole vocabulary before each token) and one with the default: the same prompts under the same
schemas must give the same text, token for token, both where the model follows the schema of itself and where
the grammar has to turn it (a reply the model would start in prose)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from m3agent.llm import create_chat_model
from test_llm_prefix_states import smollm2

ENUM = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}},
        "required": ["colour"], "additionalProperties": False}
FACTS = {"type": "object", "properties": {"facts": {"type": "array", "maxItems": 2, "items": {
    "type": "object", "properties": {"person": {"type": "string", "enum": ["<voice_1>", "<voice_2>"]},
                                     "value": {"type": "string", "maxLength": 30}},
    "required": ["person", "value"], "additionalProperties": False}}}, "required": ["facts"],
    "additionalProperties": False}
PROMPTS = [
    ("Tell me a long story about the sea.", ENUM),  # prose by nature: the grammar must turn it
    ("What colour is grass? Reply in JSON.", ENUM),
    ('<voice_1> says: "I was a nurse for ten years." <voice_2> says: "I love jazz." List facts as JSON.', FACTS),
]


def replies(spec: str, tmp: Any) -> tuple[list[str], list[dict[str, float]]]:
    chat: Any = create_chat_model(spec, cache_dir=tmp)
    texts, timings = [], []
    try:
        for question, schema in PROMPTS:
            reply = chat.chat([{"role": "user", "content": question}], schema=schema, max_tokens=48)
            texts.append(reply.text)
            timings.append(dict(chat.timings))
    finally:
        chat.close()
    return texts, timings


@pytest.mark.llm
@pytest.mark.slow
def test_the_lazy_grammar_gives_the_full_masks_replies(tmp_path: Any) -> None:
    smollm2()
    eager, eager_timings = replies("llamacpp:smollm2?n_threads=1&lazy_grammar=0&runtime=llama-cpp-python",
                                   tmp_path / "eager")
    lazy, lazy_timings = replies("llamacpp:smollm2?n_threads=1&runtime=llama-cpp-python", tmp_path / "lazy")
    assert lazy == eager
    for text, (_, schema) in zip(lazy, PROMPTS, strict=True):
        parsed = json.loads(text)
        assert set(parsed) == set(schema["required"]), text
    assert all("grammar_rechecks" not in t for t in eager_timings), "the full mask is llama-cpp-python's own"
    assert lazy_timings[0]["grammar_rechecks"] >= 1, "prose turned into the schema: the grammar refused a token"
    assert all(t["grammar_rechecks"] < t["generated"] for t in lazy_timings), lazy_timings
