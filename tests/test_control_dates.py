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
