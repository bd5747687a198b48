"""Facts from the entity graph for one question: what is at the times it names, who those people are, what comes
before and after.

Retrieval ranks text; questions about people and order ("was the voice heard at 0:44 heard before?", "what
comes right after the first scene?") need the graph instead. The question's anchors come from its reading
(:mod:`m3agent.control.reading`: clock times, the first or last scene, "so far"); a question with none but an
order word ("after", "before", "next") is anchored on the memory retrieval found best. For each anchor the
operators of :mod:`m3agent.graph.operators` give a few short lines:

- the moment: who is on screen (left / centre / right, background), who speaks and what;
- each person present: every interval they are seen or heard in the whole memory (or "only here");
- the shots just before and right after;
- for "so far" / "up to": how many different people were seen and heard up to the time.

Each fact keeps the stored shot summaries it rests on, so an answer citing it cites real memories. The model
only phrases: same person, heard before, what comes next are read off these lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.control.reading import QuestionReading, Scene, read_question
from m3agent.graph.values import Appearance, Role, ShotView, Sighting, span_text
from m3agent.text import clock

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Moment, Person

MAX_FACTS = 8
MAX_APPEARANCES = 5  # per person line: more are summarised as a count
QUOTE_CHARS = 60
_ROLE_WORDS = {Role.FACE: "seen", Role.VOICE: "heard", Role.BOTH: "seen and heard"}


@dataclass(frozen=True, slots=True)
class GraphFact:
    """A line for the model and the stored memories (shot summaries) it rests on."""

    text: str
    memory_ids: tuple[int, ...]


def graph_facts(graph: EntityGraph, video_id: str, question: QuestionReading | str,
                fallback: tuple[float, float] | None = None) -> list[GraphFact]:
    """The facts for ``question`` about ``video_id``; ``fallback`` (the best retrieved memory's span) anchors a
    question that names no time or scene but asks about order. Empty when nothing anchors the question."""
    found = read_question(question) if isinstance(question, str) else question
    shots = graph.shots(video_id)
    instants = list(found.times)
    if found.scene is Scene.FIRST and shots:
        instants.append((shots[0].start_s + shots[0].end_s) / 2)
    if found.scene is Scene.LAST and shots:
        instants.append((shots[-1].start_s + shots[-1].end_s) / 2)
    if not instants and found.order and fallback is not None:
        instants.append((fallback[0] + fallback[1]) / 2)
    moments: list[GraphFact] = []
    counts: list[GraphFact] = []
    neighbours: list[GraphFact] = []
    people: dict[int, Person] = {}
    for t in instants:
        moment = graph.at(video_id, t)
        moments.append(moment_fact(graph, moment, t))
        people.update({s.person.character_id: s.person for s in moment.on_screen})
        people.update({u.person.character_id: u.person for u in moment.speaking})
        if found.so_far:
            counts.append(_count_fact(graph, video_id, t))
        if moment.shot is not None:
            neighbours += neighbour_facts(graph, moment.shot)
    facts = moments + [person_fact(graph, p) for p in people.values()] + counts + neighbours
    return _unique(facts)[:MAX_FACTS]


def moment_fact(graph: EntityGraph, moment: Moment, t: float) -> GraphFact:
    seen = ", ".join(_placed(s) for s in moment.on_screen) or "nobody"
    heard = "; ".join(f'{u.person.label} says "{quote(u.text)}"' for u in moment.speaking) or "nobody speaks"
    shot = moment.shot
    where = f" (shot {span_text(shot.start_s, shot.end_s)}{_kind(shot)})" if shot is not None else ""
    count = f"{len(moment.on_screen)} {'person' if len(moment.on_screen) == 1 else 'people'} on screen: "
    text = f"At {clock(t)}{where}: {count if moment.on_screen else 'on screen: '}{seen}; heard: {heard}."
    return GraphFact(text, shot.memory_ids if shot is not None else ())


def person_fact(graph: EntityGraph, person: Person) -> GraphFact:
    profile = graph.profile(person)
    appearances = list(profile.appearances)
    listed = ", ".join(_appearance(a) for a in appearances[:MAX_APPEARANCES])
    more = f" and {len(appearances) - MAX_APPEARANCES} more times" if len(appearances) > MAX_APPEARANCES else ""
    described = profile.describe()
    who = f"{person.label} ({described})" if described else person.label
    if len(appearances) == 1:
        text = f"{who} appears only once in the whole video: {listed}."
    else:
        text = f"{who} appears {len(appearances)} times: {listed}{more}."
    backing = tuple(m for a in appearances[:MAX_APPEARANCES] for m in _shot_memories(graph, a))
    return GraphFact(text, tuple(dict.fromkeys(backing)))


def neighbour_facts(graph: EntityGraph, shot: ShotView) -> list[GraphFact]:
    out = []
    before, after = graph.previous_shot(shot), graph.next_shot(shot)
    if before is not None:
        out.append(GraphFact(f"Just before, {shot_text(graph, before)}", before.memory_ids))
    else:
        out.append(GraphFact(f"Nothing comes before the shot {span_text(shot.start_s, shot.end_s)}: it opens "
                             "the video.", shot.memory_ids))
    if after is not None:
        out.append(GraphFact(f"Right after, {shot_text(graph, after)}", after.memory_ids))
    return out


def _count_fact(graph: EntityGraph, video_id: str, t: float) -> GraphFact:
    count = graph.count_people(video_id, 0.0, t)
    seen = ", ".join(p.label for p in count.seen) or "nobody"
    text = (f"From the start up to {clock(t)}: {len(count.seen)} different people seen ({seen}), "
            f"{len(count.heard)} different voices heard.")
    backing = tuple(m for s in graph.shots(video_id) if s.start_s <= t for m in s.memory_ids)
    return GraphFact(text, backing[:4])


def shot_text(graph: EntityGraph, shot: ShotView) -> str:
    character_of = {e: p.character_id for p in graph.people() for e in p.entity_ids}
    body = tags.to_characters(shot.summary, character_of)
    return f"shot {span_text(shot.start_s, shot.end_s)}{_kind(shot)}: {body or 'nothing recorded'}."


def _kind(shot: ShotView) -> str:
    """``, a still picture`` / ``, live video`` when the shot's kind was measured and decided."""
    return {"still": ", a still picture", "live": ", live video"}.get(shot.kind or "", "")


def _placed(sighting: Sighting) -> str:
    depth = ", in the background" if sighting.depth == "background" else ""
    return f"{sighting.person.label} ({sighting.horizontal}{depth})"


def _appearance(a: Appearance) -> str:
    return f"{span_text(a.start_s, a.end_s)} ({_ROLE_WORDS[a.role]})"


def _shot_memories(graph: EntityGraph, a: Appearance) -> tuple[int, ...]:
    return tuple(m for s in graph.shots(a.video_id) if s.start_s <= a.end_s and s.end_s >= a.start_s
                 for m in s.memory_ids)


def quote(text: str, chars: int = QUOTE_CHARS) -> str:
    """``text`` on one line, cut to ``chars`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def _unique(facts: list[GraphFact]) -> list[GraphFact]:
    seen: set[str] = set()
    out = []
    for fact in facts:
        if fact.text not in seen:
            seen.add(fact.text)
            out.append(fact)
    return out
