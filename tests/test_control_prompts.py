"""Prompt replies are typed models that match their schemas; templates refuse to leave a field unfilled."""

from __future__ import annotations

import string
import typing
from importlib import resources
from typing import Any

import pytest

from m3agent.control.replies import (
    AgentReply,
    AnswerReply,
    GroundedReply,
    PlanRef,
    PlanReply,
    SelectReply,
    VerdictReply,
)
from m3agent.errors import MalformedReplyError, PromptError
from m3agent.llm import ChatReply
from m3agent.llm.prompts import Reply, load_prompt_set

REPLIES: dict[str, type[Reply]] = {
    "control_agent": AgentReply,
    "control_answer": AnswerReply,
    "control_grounded": GroundedReply,
    "control_grounded_graph": GroundedReply,
    "control_select": SelectReply,
    "judge_m3": VerdictReply,
    "judge_locomo": VerdictReply,
    "control_plan": PlanReply,
}


def _prompt_names() -> list[str]:
    folder = resources.files("m3agent") / "prompts"
    return sorted(p.name.removesuffix(".txt") for p in folder.iterdir() if p.name.endswith(".txt"))


def reply(parsed: dict[str, Any] | None, error: str | None = None) -> ChatReply:
    return ChatReply(text="raw", parsed=parsed, error=error)


def test_every_control_and_judge_prompt_has_a_reply_model() -> None:
    names = {n for n in _prompt_names() if n.startswith(("control_", "judge_"))}
    assert names == set(REPLIES)


@pytest.mark.parametrize("name", sorted(REPLIES))
def test_reply_model_mirrors_the_prompt_schema(name: str) -> None:
    schema, model = load_prompt_set(name).schema, REPLIES[name]
    assert set(model.model_fields) == set(schema["properties"])
    assert {n for n, f in model.model_fields.items() if f.is_required()} == set(schema["required"])
    assert schema["additionalProperties"] is False and model.model_config.get("extra") == "forbid"
    for field, spec in schema["properties"].items():
        allowed = typing.get_args(model.model_fields[field].annotation)
        if "enum" in spec and name != "control_select":  # select's enum is completed per question
            assert tuple(spec["enum"]) == allowed


@pytest.mark.parametrize("side", ["person", "other"])
def test_plan_references_mirror_the_prompt_schema(side: str) -> None:
    schema = load_prompt_set("control_plan").schema["properties"][side]
    assert set(PlanRef.model_fields) == set(schema["properties"])
    assert {n for n, f in PlanRef.model_fields.items() if f.is_required()} == set(schema["required"])
    for field, spec in schema["properties"].items():
        if "enum" in spec:
            assert tuple(spec["enum"]) == typing.get_args(PlanRef.model_fields[field].annotation)


def test_agent_reply_is_read_by_attribute_and_stripped() -> None:
    parsed = AgentReply.read(reply({"thought": " look ", "action": "search_clip", "content": " bread "}))
    assert (parsed.thought, parsed.action, parsed.content) == ("look", "search_clip", "bread")
    with pytest.raises(MalformedReplyError, match="action"):
        AgentReply.read(reply({"thought": "", "action": "dance", "content": "x"}))
    with pytest.raises(MalformedReplyError, match="not JSON"):
        AgentReply.read(reply(None, "the reply is not JSON"))
    with pytest.raises(MalformedReplyError, match="no reply"):
        AnswerReply.read(reply(None))
    with pytest.raises(MalformedReplyError, match="action"):
        AnswerReply.read(reply({"thought": "", "action": "search_clip", "content": "x"}))


def test_select_and_verdict_replies() -> None:
    assert SelectReply.read(reply({"choice": "3", "answer": "bread"})).number == 3
    assert SelectReply.read(reply({"choice": "none", "answer": ""})).number is None
    with pytest.raises(MalformedReplyError, match="choice"):
        SelectReply.read(reply({"choice": "0", "answer": ""}))
    assert VerdictReply.read(reply({"verdict": "yes"})).correct is True
    assert VerdictReply.read(reply({"verdict": "no"})).correct is False
    with pytest.raises(MalformedReplyError, match="why: Extra inputs"):
        VerdictReply.read(reply({"verdict": "yes", "why": "because"}))


def test_missing_or_unknown_fields_fail_loudly() -> None:
    prompts = load_prompt_set("control_agent")
    with pytest.raises(PromptError, match=r"missing field.*rounds") as missing:
        prompts.render("round", round=1)
    assert "control_agent" in str(missing.value) and missing.value.hint
    with pytest.raises(PromptError, match="does not use: rounds_left"):
        prompts.render("round", round=1, rounds=5, rounds_left=4)
    with pytest.raises(PromptError, match=r"no \[nope\] section"):
        prompts.render("nope")
    assert prompts.render("round", round=1, rounds=5).startswith("Round 1 of 5")


@pytest.mark.parametrize("name", _prompt_names())
def test_every_packaged_section_renders_with_exactly_its_fields(name: str) -> None:
    prompts = load_prompt_set(name)
    for section, text in prompts.sections.items():
        fields = {field: f"<{field}>" for field in string.Template(text).get_identifiers()}
        rendered = prompts.render(section, **fields)
        assert all(value in rendered for value in fields.values())
        assert "$" not in rendered, f"{name} [{section}] keeps a '$'"
