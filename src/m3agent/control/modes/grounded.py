"""The grounded mode: one retrieval, then a small model writes a short answer and the memories it used.

Made for the packaged local models (Qwen2.5 0.5B/1.5B): they cannot plan
searches reliably, but given a few numbered memories they can write a short
answer, count, and say who, when a grammar keeps the reply to
``{"used": [ids], "answer": "..."}`` (``prompts/control_grounded.json``).
The ``used`` items are an enum of exactly the ids shown, so a local model
cannot cite anything else; a reply from an endpoint that names other ids is
refused. ``cited`` on the Answer's evidence means *used*: only the memories
the model listed, never everything retrieved.

Retrieval is the select mode's: ``search_memory`` with the question (hybrid
ranking, character/name mapping, time filters, ``before_clip``), reranked
without a model (:mod:`m3agent.control.retrieval.rerank`), best ``select_k`` shown.

Who answers is one ordered chain over one candidates value (:class:`Ground`), :data:`ANSWERERS`: the lines said
in the question's window or after its quotation, quoted (:mod:`m3agent.control.people.spoken`), the graph's decision of
the question's plan, the model phrasing the graph's facts, an abstention when nothing was found, an
abstention when only other people's memories hold the question's details (:mod:`m3agent.control.people.attribution`),
and the model over the retrieved memories. Each answers, abstains or passes; the Answer records which as its
:class:`~m3agent.control.steps.Provenance`. An empty ``used`` (or an answer saying so) is the abstention
:data:`NOT_IN_MEMORY`. A failed call, a reply that breaks the schema, ids that were not shown, or an answer with
no cited memory fall back to the reranker's first candidate, quoted, with the reason as an Observation.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.control.modes.select import RERANK, SELECT_TOOL
from m3agent.control.people.attribution import foreign_words
from m3agent.control.people.graph_facts import GraphFact, graph_facts
from m3agent.control.people.graph_tools import graph_search_result, graph_video
from m3agent.control.people.plan import Plan, write_plan
from m3agent.control.reading import Asks, QuestionReading
from m3agent.control.replies import GroundedReply
from m3agent.control.results import SearchResult
from m3agent.control.retrieval.ranking import keyword_text
from m3agent.control.retrieval.render import clip_label, render_result
from m3agent.control.retrieval.rerank import Candidate, rank_candidates, stems
from m3agent.control.steps import Action, Answer, Observation, Provenance, Step, Thought
from m3agent.dates import parse_day, resolve_answer
from m3agent.errors import M3AgentError, MalformedReplyError, NotFoundError
from m3agent.graph.fits import fits_eyewear, fits_gender
from m3agent.graph.operators import EntityGraph
from m3agent.graph.references import Reference, window_of
from m3agent.llm.prompts import load_prompt_set
from m3agent.memorize.speech_line import read_speech
from m3agent.text import clock, day_of
from m3agent.text import tokens as text_tokens
from m3agent.text import words as text_words

if TYPE_CHECKING:
    from m3agent.control.people.graph_answers import GraphAnswer
    from m3agent.control.run_context import RunContext

GROUNDED_PROMPT = "control_grounded"
GRAPH_PROMPT = "control_grounded_graph"
"""The prompt when the question is anchored in the people graph (:mod:`m3agent.control.people.graph_facts`)."""
GRAPH_TOOL = "entity_graph"
SPOKEN_TOOL = "speech lines"
"""The answerer quoting the lines said in the question's window (:mod:`m3agent.control.people.spoken`)."""
PLAN_THOUGHT = "Query plan: "
"""How the Thought naming the query plan starts (``Query plan: seen_again after heard: voice @44s``)."""
GRAPH_MEMORIES = 4
"""Retrieved memories shown beside the graph's facts (the facts carry the answer; fewer memories keep the prompt
near the plain mode's length)."""
ATTRIBUTION = "attribution check"
"""The chooser of an abstention decided before any model call (:mod:`m3agent.control.people.attribution`)."""
NOT_IN_MEMORY = "The memory does not say."
GROUNDED_MAX_TOKENS = 64
MAX_MEMORY_CHARS = 220
"""Memories are cut to this many characters: six of them keep the prompt near 400 tokens."""
_ABSTAIN_RE = re.compile(
    r"^\W*(not in (the )?memory|unknown|none|n/?a|no (answer|information|memory)|(it is )?not (mentioned|stated|said)"
    r"|the memor(y|ies) (does|do) not say|i (do not|don't) know)\W*$",
    re.IGNORECASE,
)
_BACKEND_ERRORS = (M3AgentError, ValueError, RuntimeError, OSError)


@dataclass(frozen=True, slots=True)
class Grounded:
    """What an answerer decided: an answer with the candidates it used (or the graph's shot memories it rests on,
    ``cited``), or an abstention; ``provenance`` says which answerer, ``model`` the model that wrote it."""

    text: str
    used: tuple[Candidate, ...]
    provenance: Provenance
    model: str = ""
    raw: str = ""
    note: str = ""
    abstained: bool = False
    cited: tuple[int, ...] = ()
    graph_lines: frozenset[str] = frozenset()
    """The graph's facts shown to the model (a used one is cited through the shot memories it rests on)."""
    steps: tuple[Step, ...] = ()
    """Steps the answerer took before its answer (the graph's Action and Observation)."""


@dataclass(frozen=True, slots=True)
class Ground:
    """The one candidates value every answerer of the chain reads: the retrieval, its reranked memories, the video
    the question is about, the people graph of the store and the question's plan (None without a video or model)."""

    result: SearchResult
    candidates: tuple[Candidate, ...]
    video_id: str | None
    graph: EntityGraph | None
    plan: Plan | None

    @property
    def recall(self) -> bool:
        """The plan asks what was said or shown (retrieval answers; the graph only orders the memories)."""
        return self.plan is not None and self.plan.ask == "recall"


Answerer = Callable[["RunContext", Ground], "Grounded | None"]
"""One link of the chain: an answer, an abstention, or None to pass the question to the next link."""


def grounded_steps(run: RunContext) -> Iterator[Step]:
    """Action + Observation of the retrieval, the plan, then the first answerer of :data:`ANSWERERS` that does not
    pass: its steps, a Thought naming what it used, and the Answer."""
    yield Action(1, SELECT_TOOL, run.question)
    result = run.search(SELECT_TOOL, run.question, k=retrieved(run))
    knowledge = "No memories found." if result.empty else render_result(result, with_video=run.video_id is None)
    yield Observation(1, knowledge, result)
    ground = _ground_of(run, result)
    if ground.plan is not None and ground.graph is not None:
        yield Thought(1, f"{PLAN_THOUGHT}{ground.plan.describe()}")
    outcome = next(o for answerer in ANSWERERS if (o := answerer(run, ground)) is not None)
    yield from outcome.steps
    if outcome.note:
        yield Observation(1, outcome.note, error=outcome.note)
    yield Thought(1, _explain(outcome))
    yield _finish(run, outcome)


MOMENT_RETRIEVAL = 4
"""A question about one instant retrieves this many times ``select_k`` memories of its time range: its words may
match nothing at the instant, and the reranker then finds the memories there by time
(:mod:`m3agent.control.retrieval.rerank`)."""


def retrieved(run: RunContext) -> int:
    """How many memories the grounded retrieval asks for."""
    share = MOMENT_RETRIEVAL if run.reading.moment is not None else 2
    return max(run.config.search_k, share * run.config.select_k)


def _ground_of(run: RunContext, result: SearchResult) -> Ground:
    candidates = rank_candidates(result, run.question, run.config.select_k)
    video_id = graph_video(run, candidates)
    graph = run.entity_graph() if video_id is not None else None  # one snapshot for the plan and the facts
    plan = write_plan(run) if video_id is not None else None
    return Ground(result, tuple(candidates), video_id, graph, plan)


def graph_decision(run: RunContext, ground: Ground) -> Grounded | None:
    """The graph's operators carry out the plan (:mod:`m3agent.control.people.graph_answers`); pass when there is
    no plan, it asks to recall, or the graph cannot decide it."""
    from m3agent.control.people.graph_answers import graph_answer

    if ground.plan is None or ground.graph is None or ground.video_id is None or ground.recall:
        return None
    decided = graph_answer(ground.graph, ground.video_id, ground.plan)
    if decided is None:
        return None
    plan = ground.plan
    return _graph_grounded(run, decided, plan.describe(), f"{run.chat.name if run.chat else RERANK} plan",
                           plan.raw or decided.text)


def _graph_grounded(run: RunContext, decided: GraphAnswer, action: str, why: str, raw: str) -> Grounded:
    """A graph answer as the chain's outcome: its shot memories recorded as a search and cited, the graph's
    Action and Observation as its steps."""
    result = graph_search_result(run, GRAPH_TOOL, list(decided.memory_ids), [decided.text])
    run.searches.append(result)
    steps = (Action(1, GRAPH_TOOL, action), Observation(1, decided.text, result))
    return Grounded(decided.text, (), Provenance.GRAPH, f"{GRAPH_TOOL} ({why})", raw, cited=decided.memory_ids,
                    steps=steps)


def graph_facts_answer(run: RunContext, ground: Ground) -> Grounded | None:
    """The model phrases the graph's facts about the moments the question names (a few memories beside them);
    pass when the question is a recall or nothing anchors it."""
    if ground.recall:
        return None
    facts = graph_facts_for(ground.graph, list(ground.candidates), ground.video_id, run.reading)
    if not facts:
        return None
    backing = [m for f in facts for m in f.memory_ids]
    result = graph_search_result(run, GRAPH_TOOL, backing, [f.text for f in facts])
    run.searches.append(result)
    steps = (Action(1, GRAPH_TOOL, run.question), Observation(1, "\n".join(f.text for f in facts), result))
    shown = [Candidate(f.text, None, math.inf) for f in facts] + list(ground.candidates[:GRAPH_MEMORIES])
    outcome = _ground(run, shown, Provenance.GRAPH_FACTS)
    used = {c.text for c in outcome.used if c.hit is None}
    cited = tuple(m for f in facts if f.text in used for m in f.memory_ids)
    return replace(outcome, cited=cited, graph_lines=frozenset(f.text for f in facts), steps=steps)


def words_said(run: RunContext, ground: Ground) -> Grounded | None:
    """The lines said at the question's moment or in its described scene, quoted (:mod:`m3agent.control.people.spoken`);
    pass when the question does not ask for words said, names no window, or nothing was said in it."""
    from m3agent.control.people.spoken import spoken

    if ground.video_id is None or ground.graph is None:
        return None
    said = spoken(run.store, ground.graph, ground.video_id, run.reading, ground.plan, run.before_clip)
    if said is None:
        return None
    ids = [m.id for m in said.lines if m.id is not None]
    result = graph_search_result(run, SPOKEN_TOOL, ids, [])
    run.searches.append(result)
    steps = (Action(1, SPOKEN_TOOL, run.question), Observation(1, said.text, result))
    return Grounded(said.text, (), Provenance.SPOKEN, SPOKEN_TOOL, cited=tuple(ids), steps=steps)


def nothing_found(run: RunContext, ground: Ground) -> Grounded | None:
    """Abstain when no memory matched the question."""
    if ground.candidates:
        return None
    return Grounded(NOT_IN_MEMORY, (), Provenance.NOTHING_FOUND, RERANK, abstained=True,
                    note="no memory matches the question")


def attribution(run: RunContext, ground: Ground) -> Grounded | None:
    """Abstain when the question pins on one person details only other people's memories hold
    (:mod:`m3agent.control.people.attribution`)."""
    foreign = foreign_words(run.searcher, run.question)
    if not foreign:
        return None
    words = ", ".join(f'"{w}"' for w in foreign)
    return Grounded(NOT_IN_MEMORY, (), Provenance.ATTRIBUTION, ATTRIBUTION, abstained=True,
                    note=f"only memories of other people mention {words}: the memory does not say this of the "
                         "person asked about")


def model_answer(run: RunContext, ground: Ground) -> Grounded:
    """The model answers from the retrieved memories (a recall question's described person's first, each person
    said in words); it never passes (it falls back to the reranker's first memory)."""
    candidates = list(ground.candidates)
    people = ground.graph if ground.recall else None
    if people is not None and ground.video_id is not None and ground.plan is not None:
        from m3agent.control.people.spoken import described_scenes

        wider = rank_candidates(ground.result, run.question, 2 * run.config.select_k)
        scenes = [(s.start_s, s.end_s) for s in described_scenes(people, ground.video_id, run.reading, ground.plan)]
        candidates = described_first(people, ground.video_id, ground.plan.person, wider,
                                     scenes)[: run.config.select_k]  # fmt: skip
    outcome = _ground(run, candidates, Provenance.MODEL, people=people)
    return (_moment_described(run, ground) if outcome.abstained else None) or outcome


def _moment_described(run: RunContext, ground: Ground) -> Grounded | None:
    """When the model found no answer to what happens or is shown at one instant ("what is happening at 0:49?"),
    the graph's account of the shot there; None for any other question or when the graph has no shot there."""
    from m3agent.control.people.graph_answers import moment_scene

    reading = run.reading
    if reading.moment is None or reading.asks not in (Asks.WHAT, Asks.OTHER) or reading.asks_words:
        return None
    if ground.graph is None or ground.video_id is None or ground.plan is None:
        return None
    decided = moment_scene(ground.graph, ground.video_id, ground.plan, reading.moment)
    if decided is None:
        return None
    return _graph_grounded(run, decided, f"scene at {clock(reading.moment)}", "the shot at the question's time",
                           decided.text)


ANSWERERS: tuple[Answerer, ...] = (words_said, graph_decision, graph_facts_answer, nothing_found, attribution,
                                   model_answer)
"""The grounded chain, in order: the first answerer that does not pass decides."""


def described_first(graph: EntityGraph, video_id: str, person: Reference, candidates: list[Candidate],
                    scenes: Sequence[tuple[float, float]] = ()) -> list[Candidate]:
    """``candidates`` with the memories of the person a recall question describes first: inside the moment it
    names ("in the first scene", "at 0:44"; else inside any of ``scenes``, the scenes the question describes by
    their content: "in the debate"), then said by someone who fits "the man" / "the woman" (measured apparent
    gender, else voice register) and "with glasses" (measured eyewear). Only the order changes: a description
    the graph cannot check (an unmeasured person, a memory nobody speaks in) keeps its place, so a wrong
    measurement costs rank, not recall."""
    window = window_of(graph, video_id, person)
    windows = [window] if window is not None else list(scenes)
    gendered = person.kind in ("man", "woman")
    if not windows and not gendered and person.wears == "any":
        return candidates

    def misfit(candidate: Candidate) -> tuple[bool, bool]:
        memory = candidate.hit.memory if candidate.hit is not None else None
        outside = bool(windows) and (memory is None or memory.video_id != video_id or not any(
            memory.end_s > start and memory.start_s < end for start, end in windows))
        speaker = _speaker(candidate.text)
        return outside, speaker is not None and not _fits(graph, speaker, person)

    return sorted(candidates, key=misfit)  # stable: the reranker's order within each group


def _speaker(text: str) -> str | None:
    """The character tag of who speaks in a speech memory's ``text``; None for another memory or a voice that is
    no character."""
    line = read_speech(text)
    tag = tags.parse(line.tag) if line is not None else None
    return str(tag) if tag is not None and tag.kind is tags.TagKind.CHARACTER else None


def _fits(graph: EntityGraph, tag: str, person: Reference) -> bool:
    """Whether the speaker ``tag`` fits the described person's kind and eyewear (an unknown tag fits)."""
    try:
        speaker = graph.person(tag)
    except NotFoundError:
        return True
    return fits_gender(graph, speaker, person.kind) and fits_eyewear(graph, speaker, person.wears)


def labels(candidates: list[Candidate], fact: str = "f") -> list[str]:
    """The id each candidate is shown with, by its place in the list: ``m<n>`` for a memory, ``f<n>`` for a derived
    fact (``g<n>`` for a fact of the people graph). Short ids, not the store's (``m4942``): each digit is a token
    the model reads in every line and writes again in ``used``."""
    return [f"m{i}" if c.memory_id is not None else f"{fact}{i}" for i, c in enumerate(candidates, 1)]


def graph_facts_for(graph: EntityGraph | None, candidates: list[Candidate], video_id: str | None,
                    question: QuestionReading) -> list[GraphFact]:
    """The people-graph facts for the question (none when it names no time, scene or order, or there is no
    video to anchor it in)."""
    if graph is None or video_id is None:
        return []
    top = next((c.hit.memory for c in candidates if c.hit is not None), None)
    fallback = (top.start_s, top.end_s) if top is not None and top.video_id == video_id else None
    return graph_facts(graph, video_id, question, fallback)


def grounded_schema(template: dict[str, Any], shown: list[str]) -> dict[str, Any]:
    """The reply schema whose ``used`` items may only be the ``shown`` ids."""
    schema = copy.deepcopy(template)
    schema["properties"]["used"]["items"]["enum"] = list(shown)
    return schema


def is_abstention(text: str) -> bool:
    """True when ``text`` says the memories do not hold the answer."""
    return bool(_ABSTAIN_RE.match(text.strip()))


def _ground(run: RunContext, candidates: list[Candidate], provenance: Provenance,
            people: EntityGraph | None = None) -> Grounded:
    """The model's grounded answer over ``candidates`` (graph facts first for :attr:`Provenance.GRAPH_FACTS`); with
    ``people``, each person's first mention in the lines says what they look or sound like."""
    if run.chat is None:
        return _fallback(candidates, "", "no chat model; the reranker chose")
    graph = provenance is Provenance.GRAPH_FACTS
    shown = labels(candidates, "g" if graph else "f")
    prompts = load_prompt_set(GRAPH_PROMPT if graph else GROUNDED_PROMPT)
    messages = [  # the system text is fixed, so llama.cpp reuses its cached prefix from the last question
        {"role": "system", "content": prompts.render("system")},
        {"role": "user", "content": prompts.render(
            "user", memories=_memory_lines(run, candidates, shown, people), question=run.question,
            time_context=run.time_context(),
        )},
    ]  # fmt: skip
    try:
        reply = run.call(messages, grounded_schema(prompts.schema, shown), max_tokens=GROUNDED_MAX_TOKENS)
    except _BACKEND_ERRORS as exc:
        return _fallback(candidates, "", f"the model call failed ({exc}); the reranker chose")
    try:
        parsed = GroundedReply.read(reply)
    except MalformedReplyError as exc:
        return _fallback(candidates, reply.text, f"the model's reply was unusable ({exc.message}); the reranker chose")
    if restates(run.question, parsed.answer):
        return Grounded(NOT_IN_MEMORY, (), provenance, run.chat.name, reply.text, abstained=True,
                        note="the model restated the question instead of answering it")
    judged = _judge(Grounded("", (), provenance, run.chat.name, reply.text), parsed, candidates, shown)
    if not judged.used:
        return judged
    text = who_answer(run.reading, judged.text, judged.used)
    return replace(judged, text=dated_answer(run, text, judged.used))


ECHO_SHARE = 0.7
"""An answer made only of the question's words, at least this share of them, restates the question."""


def restates(question: str, answer: str) -> bool:
    """True when ``answer`` only repeats ``question`` (the 1.5B did, when none of the memories shown held the
    answer: "What question does the man in the debate ask the woman?" answered with itself). A short answer in
    the question's words ("the woman", for "the man or the woman?") is an answer."""
    asked, said = text_words(question), text_words(answer)
    return len(said) >= 4 and set(said) <= set(asked) and len(said) >= ECHO_SHARE * len(asked)


def who_answer(question: QuestionReading, answer: str, cited: tuple[Candidate, ...]) -> str:
    """A who-question is answered by a person. When the answer names nobody (no character tag, no
    capitalised word the question lacks) and the cited memories have one speaker, an unnamed character,
    that speaker is the answer (small models tend to answer "who is in DC?" with "DC")."""
    if question.asks is not Asks.WHO or tags.find_tags(answer):
        return answer
    if any(word[0].isupper() and not question.holds(word) for word in text_tokens(answer)):
        return answer
    speakers = {s for c in cited if (s := _speaker(c.text)) is not None}
    return speakers.pop() if len(speakers) == 1 else answer


def dated_answer(run: RunContext, answer: str, cited: tuple[Candidate, ...]) -> str:
    """A when-question about what was said on a dated day is answered by the date meant: "yesterday" in a memory
    of 8 May, 2023 is 7 May, 2023 (:func:`m3agent.dates.resolve_answer`, against the first cited dated memory)."""
    if run.reading.asks is not Asks.WHEN:
        return answer
    for candidate in cited:
        if candidate.hit is None:
            continue
        memory = candidate.hit.memory
        said_on = parse_day(run.searcher.clip_ref(memory.video_id, memory.clip_index).date or "")
        if said_on is not None:
            return resolve_answer(answer, candidate.text, said_on)
    return answer


def _judge(by: Grounded, reply: GroundedReply, candidates: list[Candidate], shown: list[str]) -> Grounded:
    """Accept the reply (written as ``by``) only when every id it names was shown and a real answer cites one."""
    unknown = [i for i in reply.used if i not in shown]
    if unknown:
        return _fallback(candidates, by.raw, f"the model named memory ids that were not shown ({', '.join(unknown)}); "
                                             "the reranker chose")  # fmt: skip
    if reply.answer.strip(" .").lower() in shown:  # "m4": an id is no answer, and no reader knows it
        return _fallback(candidates, by.raw, "the model answered with a memory id; the reranker chose")
    if is_abstention(reply.answer) or (not reply.used and is_abstention(reply.answer.split(".")[0])):
        return replace(by, text=NOT_IN_MEMORY, abstained=True)
    if not reply.used:
        return _fallback(candidates, by.raw, "the model answered without naming a memory; the reranker chose")
    used = [candidates[shown.index(i)] for i in dict.fromkeys(reply.used)]
    return replace(by, text=reply.answer, used=needed(used, candidates, reply.answer))


MAX_REPAIRED = 2
"""When none of the memories a model named holds the answer, at most this many shown ones that do are cited."""


def needed(used: list[Candidate], shown: list[Candidate], answer: str) -> tuple[Candidate, ...]:
    """The memories the answer rests on, for ``cited``.

    Those of ``used`` that share a content word or a person tag with the answer (small models tend to
    list every id shown); when none does but shown memories do, those of them closest to the question (a model that
    answered right but named the wrong id); else all of ``used`` (a count or a yes/no names no word).
    """
    wanted = _words(answer)
    backing = [c for c in used if wanted & _words(c.text)]
    if backing:
        return tuple(backing + _backing_people(answer, backing, shown))
    elsewhere = sorted((c for c in shown if wanted & _words(c.text)), key=lambda c: -c.overlap)
    return tuple(elsewhere[:MAX_REPAIRED] or used)


def _backing_people(answer: str, backing: list[Candidate], shown: list[Candidate]) -> list[Candidate]:
    """For each person the answer names whom no backing memory names, the shown memory closest to the question
    that does ("<character_1>, <character_2>" cites a memory of each, even when the model listed only one)."""
    named = {str(tag) for c in backing for tag in tags.find_tags(c.text)}
    added: list[Candidate] = []
    for tag in dict.fromkeys(str(t) for t in tags.find_tags(answer)):
        if tag in named:
            continue
        found = sorted((c for c in shown if c not in backing and tag in c.text), key=lambda c: -c.overlap)
        if found:
            added.append(found[0])
            named.update(str(t) for t in tags.find_tags(found[0].text))
    return added


def _words(text: str) -> set[str]:
    return stems(keyword_text(text)) | {str(tag) for tag in tags.find_tags(text)}


def _fallback(candidates: list[Candidate], raw: str, note: str) -> Grounded:
    return Grounded(candidates[0].text, (candidates[0],), Provenance.RERANKER, RERANK, raw, note)


def _memory_lines(run: RunContext, candidates: list[Candidate], shown: list[str],
                  people: EntityGraph | None = None) -> str:
    """One line per candidate: ``[m12] [1:32-1:40]: text`` for a memory of a video (its own span: no clip id a
    model could copy into its answer), ``[m12] (8 May, 2023): text`` for a dated conversation (its day only: the
    clip id, its span and the time of day cost about 20 prompt tokens a line and answer nothing LoCoMo asks);
    facts as they are."""
    lines = []
    for label, candidate in zip(shown, candidates, strict=True):
        where = ""
        if candidate.hit is not None:
            memory = candidate.hit.memory
            clip = run.searcher.clip_ref(memory.video_id, memory.clip_index)
            if clip.date:
                where = f"({day_of(clip.date)}):"
            elif clip.start_s >= 0:
                where = f"[{clock(memory.start_s)}-{clock(memory.end_s)}]:"
            else:
                where = clip_label(clip)
        lines.append(f"[{label}] {where} {_short(candidate.text)}".replace("]  ", "] "))
    if people is not None:
        from m3agent.control.people.words import describe_people

        lines = describe_people(people, lines)
    return "\n".join(lines)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_MEMORY_CHARS else flat[: MAX_MEMORY_CHARS - 1] + "…"


def _explain(outcome: Grounded) -> str:
    if outcome.provenance is Provenance.GRAPH:
        return f"entity graph answered the plan from {len(outcome.cited)} shot memories."
    if outcome.provenance is Provenance.SPOKEN:
        return f"quoted the {len(outcome.cited)} speech memories said in the question's window."
    if outcome.abstained:
        return f"{outcome.model}: none of the retrieved memories answers the question."
    ids = ", ".join(c.label for c in outcome.used)
    if outcome.provenance is Provenance.RERANKER:
        return f"The reranker's first candidate {ids} is quoted."
    return f"{outcome.model} answered from {ids}."


_RULED = frozenset({Provenance.GRAPH, Provenance.SPOKEN, Provenance.RERANKER, Provenance.ATTRIBUTION,
                    Provenance.NOTHING_FOUND})
"""Answers no model wrote: the Answer's ``model`` names the rule."""


def _finish(run: RunContext, outcome: Grounded) -> Answer:
    """The Answer: cited are the memories used and the shot memories behind the graph's lines used; an answer
    resting on a name fact (not a memory, not a graph line) keeps its character tags."""
    cited = {c.memory_id for c in outcome.used if c.memory_id is not None} | set(outcome.cited)
    rewrite = all(c.hit is not None or c.text in outcome.graph_lines for c in outcome.used)
    answer = run.finish(outcome.text, 1, outcome.raw or outcome.text, None, cited=cited, rewrite=rewrite)
    if outcome.abstained:
        answer = replace(answer, evidence=(), clips=())
    model = outcome.model if outcome.provenance in _RULED else answer.model
    return replace(answer, max_rounds=1, model=model, provenance=outcome.provenance)
