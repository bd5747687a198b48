"""JSON extraction and schema validation of model replies."""

from __future__ import annotations

import pytest

from m3agent.llm.schema import extract_json, parse_reply, strip_thinking, validate

ACTION = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {"type": "string", "enum": ["search_clip", "search_memory", "answer"]},
        "content": {"type": "string", "minLength": 1},
    },
    "required": ["thought", "action", "content"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        'Sure! Here it is: {"a": 1} hope that helps',
        '```json\n{"a": 1}\n```',
        '<think>maybe {"a": 2}?</think>\n{"a": 1}',
        'I thought about {"a": 2} at length.</think>{"a": 1}',
    ],
)
def test_extract_json_finds_the_reply_object(text: str) -> None:
    assert extract_json(text) == {"a": 1}


def test_extract_json_reads_a_raw_line_break_inside_a_string() -> None:
    """llama.cpp's JSON grammar lets a sampled string hold a raw line break; the reply is still one object."""
    assert extract_json('{"thought": "first\nsecond", "action": "answer"}') == {
        "thought": "first\nsecond", "action": "answer"}


def test_extract_json_explains_failures() -> None:
    with pytest.raises(ValueError, match="empty"):
        extract_json("<think>only thinking</think>")
    with pytest.raises(ValueError, match="not JSON"):
        extract_json("Action: [Search] Content: who is there")


def test_strip_thinking_keeps_text_after_the_last_block() -> None:
    assert strip_thinking("<think>a</think> b <think>c</think> d") == "b  d"


def test_validate_reports_each_problem_with_its_path() -> None:
    errors = validate({"thought": 3, "action": "dance", "extra": 1}, ACTION)
    joined = " | ".join(errors)
    assert "$: missing field 'content'" in joined
    assert "$: unexpected field 'extra'" in joined
    assert "$.thought: expected string" in joined
    assert "$.action: must be one of" in joined
    assert validate({"thought": "", "action": "answer", "content": "Lily"}, ACTION) == []


def test_validate_nested_arrays_and_numbers() -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 2}},
    }
    assert validate({"xs": [1, 2]}, schema) == []
    assert validate({"xs": [1, -1]}, schema) == ["$.xs[1]: must be >= 0"]
    assert validate({"xs": [1, 2, 3]}, schema) == ["$.xs: allows at most 2 items"]
    assert validate({"xs": [True]}, schema) == ["$.xs[0]: expected integer, got bool"]


def test_parse_reply_returns_value_or_reason() -> None:
    value, error = parse_reply('{"thought": "t", "action": "answer", "content": "Lily"}', ACTION)
    assert error is None and value["content"] == "Lily"
    value, error = parse_reply('{"thought": "t", "action": "answer", "content": ""}', ACTION)
    assert value is None and error is not None and "shorter than 1" in error
