"""Clip dates: a conversation log records a calendar date per session (LoCoMo's ``session_dates``), and both
the agent loop and the grounded answer show it beside the clip, so "when" questions can be answered with a
date instead of a clip id. Videos without dates read as before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m3agent.control import AgentConfig, Answer, answer_question
from m3agent.control.retrieval.render import clip_label
from m3agent.control.retrieval.search import MemorySearcher
from m3agent.domain import Clip, Memory, MemoryKind, Video
from m3agent.embed import create_embedder
from m3agent.store import open_store
from m3agent.text import day_of
from test_control_select import scripted

SESSIONS = {
    "chat": [("8 May, 2023", "Caroline says: I went to a support group yesterday."),
             ("25 May, 2023", "Melanie says: I ran a charity race for mental health last Saturday.")],
    "film": [(None, "A man opens the shop door.")],
}  # fmt: skip


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Any]:
    store = open_store(str(tmp_path / "dates.db"))
    embedder = create_embedder("hash")
    store.set_embedding_model(embedder.name, embedder.dim)
    for video, sessions in SESSIONS.items():
        dates = {str(i): d for i, (d, _) in enumerate(sessions) if d}
        store.add_video(Video(video, "synthetic", duration_s=30.0 * len(sessions),
                              metadata={"session_dates": dates} if dates else {}))  # fmt: skip
        for index, (_, text) in enumerate(sessions):
            clip = Clip(video, index, index * 30.0, (index + 1) * 30.0)
            with store.clip(clip) as writer:
                writer.add_memory(Memory(MemoryKind.EPISODIC, text, video, index, clip.start_s, clip.end_s,
                                         embedding=embedder.embed([text])[0]))  # fmt: skip
    yield store, embedder
    store.close()


def test_the_searcher_dates_clips_from_the_video_metadata(memory: Any) -> None:
    store, embedder = memory
    searcher = MemorySearcher(store, embedder)
    assert searcher.clip_ref("chat", 1).date == "25 May, 2023"
    assert searcher.clip_ref("chat", 1).to_dict()["date"] == "25 May, 2023"
    assert searcher.clip_ref("film", 0).date is None
    assert "date" not in searcher.clip_ref("film", 0).to_dict(), "no date key where the video has none"
    assert clip_label(searcher.clip_ref("film", 0)) == "CLIP_0 [0:00-0:30]:"
    assert clip_label(searcher.clip_ref("chat", 0), True) == "CLIP_0 of chat [0:00-0:30] (8 May, 2023):"


def test_the_agent_sees_the_date_of_each_clip_it_searched(memory: Any) -> None:
    store, embedder = memory
    reply = {"thought": "[m2] says last Saturday.", "action": "answer", "content": "the Saturday before 25 May, 2023"}
    chat = scripted(reply)
    config = AgentConfig.from_settings(mode="agent")
    steps = list(answer_question(store, embedder, chat, "When did Melanie run a charity race?", config=config))
    assert isinstance(steps[-1], Answer) and steps[-1].answered
    prompt = "\n".join(m["content"] for m in chat.calls[0])
    assert "CLIP_1 of chat [0:30-1:00] (25 May, 2023):" in prompt


def test_the_grounded_answer_shows_the_dates_of_the_memories(memory: Any) -> None:
    store, embedder = memory
    chat = scripted(lambda messages: json.dumps({"used": [], "answer": "not in memory"}))
    config = AgentConfig.from_settings(mode="grounded")
    list(answer_question(store, embedder, chat, "When did Caroline go to a support group?", config=config))
    lines = chat.calls[0][-1]["content"]
    assert "] (8 May, 2023): Caroline says: I went to a support group" in lines
    assert "CLIP_0" not in lines, "a dated line shows its day, not the clip id and span (prompt tokens)"


def test_a_dated_line_shows_the_day_without_the_time_of_day() -> None:
    assert day_of("1:56 pm on 8 May, 2023") == "8 May, 2023"
    assert day_of("10:37 AM on 27 June, 2023") == "27 June, 2023"
    assert day_of("8 May, 2023") == "8 May, 2023"


RESOLVED = [  # answer, the memory it rests on, said on 8 May 2023 -> the answer given
    ("yesterday", "", "7 May, 2023"),
    ("last night", "", "7 May, 2023"),
    ("2 days ago", "", "6 May, 2023"),
    ("three days ago", "", "5 May, 2023"),
    ("last week", "", "the week before 8 May, 2023"),
    ("last weekend", "", "the weekend before 8 May, 2023"),
    ("last Friday", "", "the Friday before 8 May, 2023"),
    ("two weeks ago", "", "2 weeks before 8 May, 2023"),
    ("a few weeks ago", "", "a few weeks before 8 May, 2023"),
    ("last month", "", "April 2023"),
    ("two months ago", "", "March 2023"),
    ("5 months ago", "", "December 2022"),
    ("next month", "", "June 2023"),
    ("last year", "", "2022"),
    ("a year ago", "", "2022"),
    ("this year", "", "2023"),
    ("in the spring last year", "", "in the spring 2022"),
    # the session's day, when the memory says which day it meant
    ("8 May, 2023", "Caroline says: I went to a support group yesterday.", "7 May, 2023"),
    ("On 8 May 2023.", "Jon says: we hiked last weekend.", "the weekend before 8 May, 2023"),
    # left as they are: another date, two relative phrases, no relative phrase, an answer that is more than a day
    ("7 March, 2023", "Caroline says: I went yesterday.", "7 March, 2023"),
    ("8 May, 2023", "Jon says: I went last week and again yesterday.", "8 May, 2023"),
    ("8 May, 2023", "Jon says: I love hiking.", "8 May, 2023"),
    ("8 May, 2023 at the park", "Jon says: I went yesterday.", "8 May, 2023 at the park"),
    ("this Friday", "", "this Friday"),
    ("a support group", "Caroline says: I went to a support group yesterday.", "a support group"),
]


@pytest.mark.parametrize(("answer", "memory_text", "expected"), RESOLVED)
def test_a_date_said_relative_to_its_day_is_resolved(answer: str, memory_text: str, expected: str) -> None:
    from m3agent.dates import parse_day, resolve_answer

    said_on = parse_day("1:56 pm on 8 May, 2023")
    assert said_on is not None
    assert resolve_answer(answer, memory_text, said_on) == expected


def test_a_month_back_crosses_the_year() -> None:
    from m3agent.dates import parse_day, resolve_answer

    said_on = parse_day("9:00 am on 3 January, 2024")
    assert said_on is not None
    assert resolve_answer("last month", "", said_on) == "December 2023"
    assert resolve_answer("yesterday", "", said_on) == "2 January, 2024"


def test_parse_day_reads_the_forms_dated_memories_use() -> None:
    from m3agent.dates import parse_day

    assert str(parse_day("1:56 pm on 8 May, 2023")) == "2023-05-08"
    assert str(parse_day("10:37 AM on 27 june 2023")) == "2023-06-27"
    assert parse_day("31 February, 2023") is None
    assert parse_day("sometime in May") is None


def citing(words: str, answer: str) -> Any:
    """A scripted grounded reply: ``answer``, citing the shown line that holds ``words``."""

    def reply(messages: list[dict[str, str]]) -> str:
        line = next(x for x in messages[-1]["content"].splitlines() if words in x)
        return json.dumps({"used": [line[1 : line.index("]")]], "answer": answer})

    return scripted(reply)


def test_a_when_answer_is_the_day_the_memory_meant(memory: Any) -> None:
    store, embedder = memory
    chat = citing("support group", "8 May, 2023")
    config = AgentConfig.from_settings(mode="grounded")
    steps = list(answer_question(store, embedder, chat, "When did Caroline go to a support group?", config=config))
    assert isinstance(steps[-1], Answer) and steps[-1].text == "7 May, 2023", "said 'yesterday' on 8 May"


def test_a_relative_answer_is_dated_and_other_questions_are_left_alone(memory: Any) -> None:
    store, embedder = memory
    chat = citing("charity race", "last Saturday")
    config = AgentConfig.from_settings(mode="grounded")
    steps = list(answer_question(store, embedder, chat, "When did Melanie run a charity race?", config=config))
    assert isinstance(steps[-1], Answer) and steps[-1].text == "the Saturday before 25 May, 2023"
    chat = citing("charity race", "last Saturday")
    steps = list(answer_question(store, embedder, chat, "What did Melanie do for mental health?", config=config))
    assert isinstance(steps[-1], Answer) and steps[-1].text == "last Saturday", "only a when-question is dated"
