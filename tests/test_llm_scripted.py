"""The scripted chat backend: registered like the real ones, replays replies in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from m3agent.errors import ConfigError, EndpointError
from m3agent.llm import ChatModel, create_chat_model
from m3agent.llm.scripted import ScriptedChat

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_replays_strings_mappings_and_callables_then_runs_out() -> None:
    chat = create_chat_model(
        "scripted:", replies=["plain", {"a": 1}, lambda messages: f'{{"a": {len(messages)}}}']
    )
    assert isinstance(chat, ChatModel)
    assert chat.chat([{"role": "user", "content": "x"}]).text == "plain"
    assert chat.chat([{"role": "user", "content": "x"}], schema=SCHEMA).parsed == {"a": 1}
    third = chat.chat([{"role": "system", "content": "s"}, {"role": "user", "content": "x"}], schema=SCHEMA)
    assert third.parsed == {"a": 2}
    assert isinstance(chat, ScriptedChat) and len(chat.calls) == 3 and chat.schemas[0] is None
    with pytest.raises(EndpointError, match="ran out of replies"):
        chat.chat([{"role": "user", "content": "x"}])


def test_schema_mismatch_is_reported_in_the_reply() -> None:
    chat = create_chat_model("scripted:", replies=['{"a": "one"}'])
    reply = chat.chat([{"role": "user", "content": "x"}], schema=SCHEMA)
    assert reply.parsed is None and reply.error is not None and "$.a: expected integer" in reply.error


def test_replies_from_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps([{"a": 5}, "text"]), encoding="utf-8")
    chat = create_chat_model(f"scripted:{path}")
    assert chat.chat([{"role": "user", "content": "x"}], schema=SCHEMA).parsed == {"a": 5}
    assert chat.chat([{"role": "user", "content": "x"}]).text == "text"


def test_missing_replies_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs replies"):
        create_chat_model("scripted:")
    with pytest.raises(ConfigError, match="cannot read"):
        create_chat_model(f"scripted:{tmp_path / 'absent.json'}")
