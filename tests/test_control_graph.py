"""Grounded mode with the people graph: anchors from the question's reading, facts from the operators, an answer that
cites the shot summaries the facts rest on and leaks no internal id."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m3agent.control import AgentConfig, Answer, answer_question
from m3agent.control.people.graph_facts import graph_facts
from m3agent.control.steps import Provenance
from m3agent.graph.operators import EntityGraph
from test_control_select import scripted
from test_graph_operators import build

GROUNDED = AgentConfig.from_settings(mode="grounded")
_INTERNAL = re.compile(r"CLIP_\d|\[m\d+\]|<(?:face|voice)_\d+>")


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[tuple[Any, Any, dict[str, int]]]:
    from m3agent.embed import create_embedder
    from m3agent.store import open_store

    embedder = create_embedder("hash")
    store = open_store(str(tmp_path / "scene.db"))
    store.set_embedding_model(embedder.name, embedder.dim)
    ids = build(store, lambda text: embedder.embed([text])[0])
    yield store, embedder, ids
    store.close()


def test_facts_say_who_is_where_and_every_appearance(scene: tuple[Any, Any, dict[str, int]]) -> None:
    store, _, ids = scene
    graph = EntityGraph(store)
    a = graph.person_of_entity(ids["a"]).tag
    b = graph.person_of_entity(ids["b"]).tag
    texts = [f.text for f in graph_facts(graph, "v1", "Is the person on the left at 0:03 seen again later?")]
    assert texts[0].startswith(f"At 0:03 (shot 0:00–0:12): 2 people on screen: {a} (left), {b} (right, in the "
                               "background)")
    assert f"{a} appears 2 times: 0:01–0:10 (seen and heard), 0:40–0:45 (seen and heard)." in texts
    assert f"{b} appears only once in the whole video: 0:01–0:05 (seen)." in texts
    assert "Nothing comes before the shot 0:00–0:12: it opens the video." in texts
    assert any(t.startswith("Right after, shot 0:12–0:48: objects: chair") for t in texts)
    assert graph_facts(graph, "v1", "What did they say about the budget?") == []


def test_a_graph_answer_cites_the_shot_summaries_and_leaks_no_id(scene: tuple[Any, Any, dict[str, int]]) -> None:
    store, embedder, ids = scene
    graph = EntityGraph(store)
    person = graph.person_of_entity(ids["a"])

    def reply(messages: Any) -> str:
        content = messages[-1]["content"]
        assert "[g1] At 0:03" in content and "CLIP_" not in content
        return json.dumps({"answer": f"Yes, {person.tag} is seen again at 0:40–0:45.", "used": ["g1", "g2"]})

    unreadable_plan = "not a plan"  # the plan fails: the graph's facts go to the model, as without a plan
    steps = list(answer_question(store, embedder, scripted(unreadable_plan, reply), "Is the person on the left at "
                                 "0:03 seen again later?", video_id="v1", config=GROUNDED))
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.text.startswith("Yes")
    assert answer.provenance is Provenance.GRAPH_FACTS and answer.to_dict()["provenance"] == "graph facts"
    assert not _INTERNAL.search(answer.text)
    cited = {(e.start_s, e.end_s) for e in answer.evidence if e.cited}
    assert (0.0, 12.0) in cited and (30.0, 48.0) in cited  # the shots of both appearances
    assert any(s.tool == "entity_graph" for s in answer.searches)


def test_clip_and_memory_ids_never_reach_the_answer(scene: tuple[Any, Any, dict[str, int]]) -> None:
    store, embedder, _ = scene

    def reply(messages: Any) -> str:
        shown = re.findall(r"^\[(m\d+)\]", messages[-1]["content"], re.MULTILINE)
        return json.dumps({"answer": f"In CLIP_1 [{shown[0]}], breaking news", "used": shown[:1]})

    recall = {"ask": "recall", "direction": "any", "sense": "any",
              **{k: {"kind": "none", "place": "any", "time": "", "scene": "any", "quote": ""}
                 for k in ("person", "other")}}
    answer = list(answer_question(store, embedder, scripted(json.dumps(recall), reply), "What news is on screen?",
                                  video_id="v1", config=GROUNDED))[-1]
    assert isinstance(answer, Answer)
    assert answer.text == "In the part at 0:30–1:00, breaking news"


def test_the_graph_can_be_switched_off(scene: tuple[Any, Any, dict[str, int]]) -> None:
    store, embedder, _ = scene
    seen: list[str] = []

    def reply(messages: Any) -> str:
        seen.append(messages[-1]["content"])
        return json.dumps({"answer": "not in memory", "used": []})

    off = AgentConfig.from_settings(mode="grounded", graph=False)
    answer = list(answer_question(store, embedder, scripted(reply), "Who is on the left at 0:03?", video_id="v1",
                                  config=off))[-1]
    assert isinstance(answer, Answer) and all(s.tool != "entity_graph" for s in answer.searches)
    assert not any("[g1]" in content for content in seen)
    list(answer_question(store, embedder, scripted(reply, reply), "Who is on the left at 0:03?", video_id="v1",
                         config=GROUNDED))  # the first reply is no plan: the graph's facts are shown instead
    assert "[g1] At 0:03" in seen[-1]


def test_a_memory_where_nobody_was_seen_or_heard_gets_no_graph_facts(tmp_path: Path) -> None:
    from test_control_select import opened_meeting

    with opened_meeting(tmp_path) as meeting:
        chat = scripted(lambda messages: json.dumps({"answer": "not in memory", "used": []}))
        answer = list(answer_question(meeting.store, meeting.embedder, chat, "What was said right after 0:10?",
                                      config=GROUNDED))[-1]
    assert isinstance(answer, Answer) and all(s.tool != "entity_graph" for s in answer.searches)
    assert len(chat.calls) == 1 and "query plan" not in chat.calls[0][0]["content"]  # no plan: LoCoMo's prompt
