"""The entity-graph operators as tools of the agent loop, beside ``search_clip`` and ``search_memory``.

- ``who_is_at`` (content: a clock time such as ``1:23``): who is on screen where and who speaks then, and the
  shots just before and right after;
- ``appearances`` (content: a person, ``<character_3>`` or a given name): every interval the person is seen
  or heard, with their measured description;
- ``shots`` (content: a clock time, or empty for the start): the shot there and the ones around it, in order.

The observation is the operators' lines, and its search result holds the stored shot summaries they rest on,
so an answer that cites them cites real memories. The tools are offered only where a video's memory holds
people seen or heard (:func:`m3agent.control.modes.grounded.graph_video`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3agent.control.people.graph_facts import GraphFact, moment_fact, neighbour_facts, person_fact, shot_text
from m3agent.errors import NotFoundError
from m3agent.text import clock_seconds, clock_times

if TYPE_CHECKING:
    from m3agent.control.results import SearchResult
    from m3agent.control.retrieval.rerank import Candidate
    from m3agent.control.run_context import RunContext
    from m3agent.graph.operators import EntityGraph

GRAPH_TOOLS = ("who_is_at", "appearances", "shots")
SHOTS_AROUND = 2  # shots listed on each side of the one asked about


def graph_tool_lines(graph: EntityGraph, video_id: str, tool: str, content: str) -> list[GraphFact]:
    """The lines of ``tool`` for ``content``; a single explanatory line when the content names no time or
    person the graph knows (the model is told what to write instead)."""
    if tool == "appearances":
        try:
            return [person_fact(graph, graph.person(content.strip()))]
        except NotFoundError:
            return [GraphFact(f'No person "{content.strip()}" in this memory: give a tag such as <character_3> '
                              "or a name the memories use.", ())]
    times = clock_times(content)
    if tool == "who_is_at":
        if not times:
            return [GraphFact(f'"{content}" is no clock time: give one such as 1:23.', ())]
        t = clock_seconds(times[0])
        moment = graph.at(video_id, t)
        facts = [moment_fact(graph, moment, t)]
        return facts + (neighbour_facts(graph, moment.shot) if moment.shot is not None else [])
    return _shot_lines(graph, video_id, clock_seconds(times[0]) if times else 0.0)


def _shot_lines(graph: EntityGraph, video_id: str, t: float) -> list[GraphFact]:
    shot = graph.shot_at(video_id, t)
    if shot is None:
        return [GraphFact("No shots are recorded for this video.", ())]
    shots = graph.shots(video_id)
    around = shots[max(0, shot.index - SHOTS_AROUND): shot.index + SHOTS_AROUND + 1]
    return [GraphFact(f"{'This' if s.index == shot.index else 'Then' if s.index > shot.index else 'Before'}: "
                      f"{shot_text(graph, s)}", s.memory_ids) for s in around]


def graph_video(run: RunContext, candidates: list[Candidate]) -> str | None:
    """The video whose people graph the question is read against: the run's, else the best retrieved memory's,
    else the only one; None when the graph is off or nobody was seen or heard there (a text conversation such
    as LoCoMo keeps its prompt)."""
    if not run.config.graph:
        return None
    top = next((c.hit.memory for c in candidates if c.hit is not None), None)
    video_id = run.video_id or (top.video_id if top is not None else _only_video(run))
    if video_id is None or (not run.store.face_sightings(video_id) and not run.store.voice_spans(video_id)):
        return None
    return video_id


def _only_video(run: RunContext) -> str | None:
    videos = run.store.videos()
    return videos[0].video_id if len(videos) == 1 else None


def graph_search_result(run: RunContext, tool: str, memory_ids: list[int], texts: list[str]) -> SearchResult:
    """Graph lines as a search result of ``tool``: the stored shot summaries they rest on are its hits (the
    evidence an answer from them cites)."""
    from m3agent.control.results import ClipHits, Hit, SearchResult

    by_clip: dict[tuple[str, int], list[Hit]] = {}
    for memory_id in dict.fromkeys(memory_ids):
        memory = run.store.get_memory(memory_id)
        by_clip.setdefault((memory.video_id, memory.clip_index), []).append(Hit(memory, memory.text, 1.0))
    clips = tuple(ClipHits(run.searcher.clip_ref(v, i), 1.0, tuple(hits)) for (v, i), hits in by_clip.items())
    return SearchResult(tool, run.question, clips, facts=tuple(texts))
