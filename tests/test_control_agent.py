"""The agent loop pinned with the scripted chat backend on a real SQLite memory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m3agent.control import (
    Action,
    AgentConfig,
    Answer,
    Observation,
    Thought,
    answer_question,
    ask,
    run_to_answer,
)
from m3agent.control.modes.conversation import estimate_tokens
from m3agent.errors import ConfigError, ContextOverflowError
from m3agent.llm.scripted import ScriptedChat
from test_control_select import scripted
from test_control_world import World, opened_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with opened_world(tmp_path) as built:
        yield built


LOOP = AgentConfig.from_settings(seed_search=False)
"""The bare loop: no retrieval before round 1 (pins round-by-round behaviour)."""


def act(action: str, content: str, thought: str = "") -> dict[str, str]:
    return {"thought": thought or f"I will {action}.", "action": action, "content": content}


def test_round_limit_forces_an_answer_in_the_last_round(world: World) -> None:
    chat = scripted(
        act("search_clip", "bread"),
        act("search_memory", "milk"),
        act("answer", "<character_1> bought bread."),
        act("search_clip", "never used"),
    )
    steps = list(answer_question(world.store, world.embedder, chat, "What did they buy?", rounds=3, config=LOOP))
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.answered and answer.rounds == 3
    assert len(chat.calls) == 3 and chat.remaining == 1
    # the last round may only answer: its schema has a single action, and the prompt says so
    assert chat.schemas[0]["properties"]["action"]["enum"] == ["search_clip", "search_memory", "answer"]
    assert chat.schemas[2]["properties"]["action"]["enum"] == ["answer"]
    assert "last round" in chat.calls[2][-1]["content"]
    assert "last round" not in chat.calls[1][-1]["content"]
    assert [type(s).__name__ for s in steps[:3]] == ["Thought", "Action", "Observation"]


def test_searching_in_the_last_round_yields_no_answer_and_says_why(world: World) -> None:
    chat = scripted(act("search_clip", "bread"), act("search_clip", "more bread"))
    answer = ask(world.store, world.embedder, chat, "What did they buy?", rounds=2, config=LOOP)
    assert not answer.answered and answer.text == "" and answer.rounds == 2
    assert answer.failure is not None
    assert "last round" in answer.failure and "must be one of" in answer.failure
    assert len(chat.calls) == 2


def test_unparsable_reply_becomes_feedback_not_an_empty_search(world: World) -> None:
    chat = scripted(
        "Action: [Search] Content: bread",
        act("search_clip", "who buys bread"),
        act("answer", "Bread."),
    )
    steps = list(answer_question(world.store, world.embedder, chat, "What was bought?", config=LOOP))
    first = steps[0]
    assert isinstance(first, Observation) and first.result is None
    assert first.error is not None and "not JSON" in first.error
    # the next call carries the bad reply and the explanation
    second_call = chat.calls[1]
    assert second_call[-2] == {"role": "assistant", "content": "Action: [Search] Content: bread"}
    assert "could not be used" in second_call[-1]["content"] and "not JSON" in second_call[-1]["content"]
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.answered and answer.rounds == 3
    assert len(answer.searches) == 1 and answer.searches[0].query == "who buys bread"


def test_schema_violations_are_explained(world: World) -> None:
    chat = scripted({"thought": "x", "action": "dance", "content": "now"}, act("answer", "ok"))
    steps = list(answer_question(world.store, world.embedder, chat, "q?", rounds=3, config=LOOP))
    assert isinstance(steps[0], Observation) and "must be one of" in (steps[0].error or "")
    assert isinstance(steps[-1], Answer) and steps[-1].text == "ok"


def test_answer_carries_evidence_cited_first_and_is_json(world: World) -> None:
    bread = world.memory_ids["bread"]
    chat = scripted(
        act("search_clip", "who buys bread at the bakery"),
        act("answer", "<character_1> bought a loaf of bread.", thought=f"[m{bread}] says so."),
    )
    answer = ask(world.store, world.embedder, chat, "What did <character_1> buy?", config=LOOP)
    assert answer.evidence[0].memory_id == bread and answer.evidence[0].cited
    first = answer.evidence[0]
    assert (first.clip.video_id, first.clip.index, first.start_s, first.end_s) == ("v1", 1, 30.0, 60.0)
    assert first.entity_ids == (world.faces[world.face_with_character(1)],)
    assert not any(e.cited for e in answer.evidence[1:])
    assert answer.clips[0].index == 1
    assert answer.usage.calls == 2 and answer.usage.total_tokens > 0 and answer.latency_s > 0
    data = json.loads(json.dumps(answer.to_dict()))
    assert data["evidence"][0]["memory_id"] == bread and data["searches"][0]["tool"] == "search_clip"
    assert data["rounds"] == 2 and data["answered"] is True


def test_answer_uses_names_instead_of_tags(world: World) -> None:
    alice = world.character(2)
    chat = scripted(act("answer", f"<character_{alice}> drinks black coffee; <character_1> is unnamed."))
    answer = ask(world.store, world.embedder, chat, "What does Alice drink?")
    assert answer.text.startswith("Alice drinks black coffee; ") and answer.text.endswith(" is unnamed.")
    assert "<character_" not in answer.text  # the unnamed one in words, never a bare tag
    assert answer.raw_text.startswith(f"<character_{alice}>")


def test_before_clip_answer_has_no_evidence_from_later_clips(world: World) -> None:
    late = world.memory_ids["late_bread"]
    chat = scripted(
        act("search_clip", "buys bread, bread and more bread"),
        act("search_clip", "buys bread, bread and more bread"),
        act("search_memory", "bread"),
        act("answer", "bread", thought=f"[m{late}] maybe"),
    )
    answer = ask(world.store, world.embedder, chat, "What was bought?", video_id="v1", before_clip=4)
    indexes = [h.memory.clip_index for s in answer.searches for h in s.hits]
    assert indexes and max(indexes) <= 4
    assert answer.evidence and all(e.clip.index <= 4 for e in answer.evidence)
    assert late not in {e.memory_id for e in answer.evidence}
    assert "CLIP_4" in chat.calls[0][0]["content"]  # the model is told when the question is asked


def test_repeated_query_in_the_loop_brings_new_clips(world: World) -> None:
    chat = scripted(
        act("search_clip", "who buys bread at the bakery"),
        act("search_clip", "who buys bread at the bakery"),
        act("answer", "two people"),
    )
    config = AgentConfig.from_settings(clip_k=1, seed_search=False)
    answer = ask(world.store, world.embedder, chat, "Who bought bread?", config=config)
    first, second = answer.searches
    assert first.clips and second.clips and first.clips[0].clip.index != second.clips[0].clip.index


def test_empty_results_tell_the_model_to_change_angle(world: World) -> None:
    chat = scripted(act("search_memory", "zeppelin quasar"), act("answer", "unknown"))
    steps = list(answer_question(world.store, world.embedder, chat, "q?", rounds=3))
    observation = next(s for s in steps if isinstance(s, Observation))
    assert observation.result is not None and observation.result.empty
    assert "another angle" in observation.text


def test_old_observations_are_trimmed_to_the_budget(world: World) -> None:
    replies = [act("search_clip", q) for q in ("bread", "milk", "cake", "coffee")] + [act("answer", "x")]
    chat = scripted(*replies)
    config = AgentConfig.from_settings(max_context_tokens=950, max_tokens=300, clip_k=2, seed_search=False)
    answer = ask(world.store, world.embedder, chat, "What was bought?", config=config)
    assert answer.answered and len(answer.searches) == 4
    last = chat.calls[-1]
    assert estimate_tokens(last) <= 650
    first_observation, latest_observation = last[3]["content"], last[-1]["content"]
    assert "[trimmed" in first_observation and "CLIP_1" in first_observation
    assert "[trimmed" not in latest_observation and "black coffee" in latest_observation
    # the trimmed memories still count as evidence of what was searched
    assert {h.memory.id for h in answer.searches[0].hits} >= {world.memory_ids["bread"]}


def test_trimmed_memories_may_be_found_again(world: World) -> None:
    replies = [act("search_clip", q) for q in ("bread", "milk", "cake", "bread")] + [act("answer", "x")]
    plenty = AgentConfig.from_settings(max_tokens=300, seed_search=False)
    tight = AgentConfig.from_settings(max_context_tokens=820, max_tokens=300, seed_search=False)
    # with room, the repeated query has nothing relevant left to return
    roomy = ask(world.store, world.embedder, scripted(*replies), "What was bought?", config=plenty)
    assert roomy.searches[0].clips and roomy.searches[-1].empty
    # squeezed, the first result was trimmed to a stub and its clips were released
    squeezed = ask(world.store, world.embedder, scripted(*replies), "What was bought?", config=tight)
    first, last = squeezed.searches[0], squeezed.searches[-1]
    assert [c.clip.index for c in last.clips] == [c.clip.index for c in first.clips]


def test_seed_search_gives_the_first_round_knowledge_and_evidence(world: World) -> None:
    chat = scripted(act("answer", "A loaf of bread."))
    steps = list(answer_question(world.store, world.embedder, chat, "Who buys a loaf of bread?"))
    seed_action, seed_observation = steps[0], steps[1]
    assert seed_action == Action(0, "search_memory", "Who buys a loaf of bread?")
    assert isinstance(seed_observation, Observation) and seed_observation.round == 0
    first_user = chat.calls[0][1]["content"]
    assert f"[m{world.memory_ids['bread']}] <character_1> buys a loaf of bread" in first_user
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.rounds == 1 and len(chat.calls) == 1
    assert answer.evidence[0].memory_id == world.memory_ids["bread"]


def test_baseline_makes_one_retrieval_and_one_call(world: World) -> None:
    chat = scripted(act("answer", "A loaf of bread.", thought="from CLIP_1"))
    steps = list(
        answer_question(world.store, world.embedder, chat, "who buys bread at the bakery", baseline=True)
    )
    assert [type(s) for s in steps] == [Action, Observation, Thought, Answer]
    answer = run_to_answer(steps)
    assert answer.mode == "baseline" and answer.rounds == 1 and len(chat.calls) == 1
    assert answer.evidence and all(e.cited for e in answer.evidence if e.clip.index == 1)
    assert "[m" in chat.calls[0][1]["content"]


def test_bad_arguments_are_config_errors(world: World) -> None:
    chat = scripted()
    with pytest.raises(ConfigError):
        ask(world.store, world.embedder, chat, "   ")
    with pytest.raises(ConfigError):
        ask(world.store, world.embedder, chat, "q", rounds=0)


class _Outgrown:
    """A chat model whose context is full after the first turn (as llama.cpp reports it)."""

    def __init__(self, first: ScriptedChat) -> None:
        self.first, self.name, self.turns = first, "outgrown", 0

    def chat(self, messages: Any, **options: Any) -> Any:
        self.turns += 1
        if self.turns > 1:
            raise ContextOverflowError("Requested tokens (4407) exceed context window of 4096")
        return self.first.chat(messages, **options)


def test_a_conversation_that_outgrows_the_context_ends_with_a_recorded_failure(world: World) -> None:
    chat = _Outgrown(scripted(act("search_clip", "bread")))
    answer = ask(world.store, world.embedder, chat, "What did they buy?", rounds=3, config=LOOP)  # type: ignore[arg-type]
    assert not answer.answered and answer.rounds == 2 and chat.turns == 2
    assert answer.failure is not None and "context" in answer.failure


class _Windowed(ScriptedChat):
    """A scripted model that states a small context window, as a local llama.cpp model does."""

    context_tokens = 1150


def test_the_conversation_is_cut_to_the_model_context_window(world: World) -> None:
    replies = [act("search_clip", q) for q in ("bread", "milk", "cake", "coffee")] + [act("answer", "x")]
    chat = _Windowed(replies=replies)
    config = AgentConfig.from_settings(max_tokens=300, clip_k=2, seed_search=False)  # default budget: 6,000
    answer = ask(world.store, world.embedder, chat, "What was bought?", config=config)
    assert answer.answered and len(answer.searches) == 4
    # 80% of the 1,150-token window less the 300-token reply: the oldest clips are trimmed
    assert all(estimate_tokens(call) <= 620 for call in chat.calls)
    assert "[trimmed" in chat.calls[-1][3]["content"]
    roomy = scripted(*replies)
    ask(world.store, world.embedder, roomy, "What was bought?", config=config)
    assert "[trimmed" not in roomy.calls[-1][3]["content"]
