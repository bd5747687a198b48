"""Answers name people as a person would: a name when known, else how they look or sound and when they are seen
or heard; never a bare tag (unless the question itself used that tag)."""

from __future__ import annotations

from pathlib import Path

from m3agent import tags
from m3agent.control.people.words import in_words
from m3agent.graph.operators import EntityGraph
from m3agent.store import open_store
from server_helpers import build_memory


def bare_tags(text: str) -> list[str]:
    return [str(t) for t in tags.find_tags(text)]


def test_an_answer_never_names_a_person_by_a_bare_tag(tmp_path: Path) -> None:
    built = build_memory(tmp_path / "memory.db")
    with open_store(str(tmp_path / "memory.db")) as store:
        graph = EntityGraph(store)
        person = graph.person_of_entity(built.face)
        stranger = graph.person_of_entity(built.stranger)
        text = f"{person.label} talks to {stranger.label}; <face_999> is not in this memory."
        out = in_words(graph, text, "talk")
        assert bare_tags(out) == [], out
        assert out.startswith("The person (seen 0:02–0:06)")  # seen 0:02–0:04, heard 0:03–0:06 in "talk"
        assert "(seen 0:05 in walk)" in out  # not in the asked video: where it is seen
        assert "someone is not in this memory" in out
        assert in_words(graph, f"Ask {person.label}", "talk", keep=[tags.parse(person.label)]) == \
            f"Ask {person.label}"  # the question's own tag
        store.rename_entity(built.face, "Chef Anna")
        assert in_words(EntityGraph(store), f"{person.label} cooks", "talk") == "Chef Anna cooks"


def test_a_described_tag_gives_way_to_its_time(tmp_path: Path) -> None:
    built = build_memory(tmp_path / "memory.db")
    with open_store(str(tmp_path / "memory.db")) as store:
        graph = EntityGraph(store)
        person = graph.person_of_entity(built.face)
        out = in_words(graph, f"the person on the left ({person.label}) speaks", "talk")
        assert out == "the person on the left (seen 0:02–0:06) speaks"


def test_a_question_scoped_to_one_video_cites_only_that_video(tmp_path: Path) -> None:
    """Graph lines may rest on another video's shots (a person seen in both): the answer still cites only the
    video asked about."""
    from m3agent.control.config import AgentConfig
    from m3agent.control.people.graph_tools import graph_search_result
    from m3agent.control.run_context import RunContext
    from server_helpers import EMBEDDER

    built = build_memory(tmp_path / "memory.db")
    with open_store(str(tmp_path / "memory.db")) as store:
        config = AgentConfig.from_settings().replace(mode="select")
        run = RunContext(store, EMBEDDER, None, "Who is there?", "talk", None, config, None)
        run.searches.append(graph_search_result(run, "entity_graph", built.memories, ["a line"]))
        answer = run.finish("someone cooks", 1, cited=set(built.memories))
        assert answer.evidence and {e.clip.video_id for e in answer.evidence} == {"talk"}
        assert {c.video_id for c in answer.clips} == {"talk"}


def test_a_parenthesis_that_restates_the_description_goes() -> None:
    from m3agent.control.people.words import _without_restated

    text = "The person on screen at 0:11 is <character_1> (right), then <character_1> (the chef)."
    assert _without_restated(text, "<character_1>", "the woman on the right") == \
        "The person on screen at 0:11 is <character_1>, then <character_1> (the chef)."
