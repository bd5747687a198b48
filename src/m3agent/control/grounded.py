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
without a model (:mod:`m3agent.control.rerank`), best ``select_k`` shown.

Outcomes: an empty ``used`` (or an answer saying so) is the abstention
:data:`NOT_IN_MEMORY`, as is a question that pins on one person details only
other people's memories hold (:mod:`m3agent.control.attribution`, checked
before the model is called). A failed call, a reply that breaks the schema, ids
that were not shown, or an answer with no cited memory fall back to the
reranker's first candidate, quoted, with the reason as an Observation.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.control.attribution import foreign_words
from m3agent.control.graph_facts import GraphFact, graph_facts
from m3agent.control.graph_tools import graph_search_result, graph_video
from m3agent.control.plan import Plan, write_plan
from m3agent.control.ranking import keyword_text
from m3agent.control.render import clip_label, render_result
from m3agent.control.replies import GroundedReply
from m3agent.control.rerank import Candidate, rank_candidates, stems
from m3agent.control.select import RERANK, SELECT_TOOL
from m3agent.control.steps import Action, Answer, Observation, Step, Thought
from m3agent.errors import M3AgentError, MalformedReplyError, NotFoundError
from m3agent.graph.operators import EntityGraph
from m3agent.graph.references import Reference, fits_eyewear, fits_gender, window_of
from m3agent.llm.prompts import load_prompt_set
from m3agent.text import clock
from m3agent.text import words as text_words

if TYPE_CHECKING:
    from m3agent.control.graph_answers import GraphAnswer
    from m3agent.control.runtime import RunContext

GROUNDED_PROMPT = "control_grounded"
GRAPH_PROMPT = "control_grounded_graph"
"""The prompt when the question is anchored in the people graph (:mod:`m3agent.control.graph_facts`)."""
GRAPH_TOOL = "entity_graph"
PLAN_THOUGHT = "Query plan: "
"""How the Thought naming the query plan starts (``Query plan: seen_again after heard: voice @44s``)."""
GRAPH_MEMORIES = 4
"""Retrieved memories shown beside the graph's facts (the facts carry the answer; fewer memories keep the prompt
near the plain mode's length)."""
ATTRIBUTION = "attribution check"
"""The chooser of an abstention decided before any model call (:mod:`m3agent.control.attribution`)."""
NOT_IN_MEMORY = "The memory does not say."
GROUNDED_MAX_TOKENS = 64
MAX_MEMORY_CHARS = 220
"""Memories are cut to this many characters: six of them keep the prompt near 400 tokens."""
_ABSTAIN_RE = re.compile(
    r"^\W*(not in (the )?memory|unknown|none|n/?a|no (answer|information|memory)|(it is )?not (mentioned|stated|said)"
    r"|the memor(y|ies) (does|do) not say|i (do not|don't) know)\W*$",
    re.IGNORECASE,
)
_WHO_RE = re.compile(r"^\W*who\b", re.IGNORECASE)
_TIME_OF_DAY_RE = re.compile(r"^\s*\d{1,2}[:.]\d{2}\s*[ap]\.?m\.?\s+on\s+", re.IGNORECASE)
_SPEAKER_RE = re.compile(rf"^(?:At [\d:.]+ )?({tags.pattern(tags.TagKind.CHARACTER)}) (?:says|said)\b")
_CAPITALISED_RE = re.compile(r"\b[A-Z][\w'-]*")
_BACKEND_ERRORS = (M3AgentError, ValueError, RuntimeError, OSError)


@dataclass(frozen=True, slots=True)
class Grounded:
    """What the model's reply amounts to: an answer with the candidates it used, an abstention, or a fallback."""

    text: str
    used: tuple[Candidate, ...]
    chooser: str
    raw: str = ""
    note: str = ""
    abstained: bool = False


def grounded_steps(run: RunContext) -> Iterator[Step]:
    """Action + Observation of the retrieval, Thought naming the memories used, then the Answer."""
    yield Action(1, SELECT_TOOL, run.question)
    result = run.search(SELECT_TOOL, run.question, k=max(run.config.search_k, 2 * run.config.select_k))
    knowledge = "No memories found." if result.empty else render_result(result, with_video=run.video_id is None)
    yield Observation(1, knowledge, result)
    candidates = rank_candidates(result, run.question, run.config.select_k)
    video_id = graph_video(run, candidates)
    graph = run.entity_graph() if video_id is not None else None  # one snapshot for the plan and the facts
    plan = write_plan(run) if video_id is not None else None
    if plan is not None and graph is not None:
        yield Thought(1, f"{PLAN_THOUGHT}{plan.describe()}")
        decided = _decided(run, graph, video_id or "", plan)
        if decided is not None:
            yield from decided
            return
    if plan is not None and graph is not None and plan.ask == "recall":
        wider = rank_candidates(result, run.question, 2 * run.config.select_k)
        candidates = described_first(graph, video_id or "", plan.person, wider)[: run.config.select_k]
    facts = graph_facts_for(graph, candidates, video_id, run.question) if plan is None or plan.ask != "recall" \
        else []
    if facts:
        yield Action(1, GRAPH_TOOL, run.question)
        backing = [m for f in facts for m in f.memory_ids]
        graph_result = graph_search_result(run, GRAPH_TOOL, backing, [f.text for f in facts])
        run.searches.append(graph_result)
        yield Observation(1, "\n".join(f.text for f in facts), graph_result)
        candidates = [Candidate(f.text, None, math.inf) for f in facts] + candidates[:GRAPH_MEMORIES]
    if not candidates:
        outcome = Grounded(NOT_IN_MEMORY, (), RERANK, abstained=True, note="no memory matches the question")
    elif not facts and (foreign := foreign_words(run.searcher, run.question)):
        words = ", ".join(f'"{w}"' for w in foreign)
        outcome = Grounded(NOT_IN_MEMORY, (), ATTRIBUTION, abstained=True,
                           note=f"only memories of other people mention {words}: the memory does not say this "
                                "of the person asked about")
    else:
        people = graph if plan is not None and plan.ask == "recall" else None
        outcome = _ground(run, candidates, graph=bool(facts), people=people)
    if outcome.note:
        yield Observation(1, outcome.note, error=outcome.note)
    yield Thought(1, _explain(outcome))
    yield _finish(run, outcome, facts)


def described_first(graph: EntityGraph, video_id: str, person: Reference, candidates: list[Candidate]
                    ) -> list[Candidate]:
    """``candidates`` with the memories of the person a recall question describes first: inside the moment it
    names ("in the first scene", "at 0:44"), then said by someone who fits "the man" / "the woman" (measured
    apparent gender, else voice register) and "with glasses" (measured eyewear). Only the order changes: a
    description the graph cannot check (an unmeasured person, a memory nobody speaks in) keeps its place, so a
    wrong measurement costs rank, not recall."""
    window = window_of(graph, video_id, person)
    gendered = person.kind in ("man", "woman")
    if window is None and not gendered and person.wears == "any":
        return candidates

    def misfit(candidate: Candidate) -> tuple[bool, bool]:
        memory = candidate.hit.memory if candidate.hit is not None else None
        outside = window is not None and (memory is None or memory.video_id != video_id
                                          or memory.end_s <= window[0] or memory.start_s >= window[1])
        speaker = _SPEAKER_RE.match(candidate.text)
        return outside, speaker is not None and not _fits(graph, speaker.group(1), person)

    return sorted(candidates, key=misfit)  # stable: the reranker's order within each group


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
                    question: str) -> list[GraphFact]:
    """The people-graph facts for the question (none when it names no time, scene or order, or there is no
    video to anchor it in)."""
    if graph is None or video_id is None:
        return []
    top = next((c.hit.memory for c in candidates if c.hit is not None), None)
    fallback = (top.start_s, top.end_s) if top is not None and top.video_id == video_id else None
    return graph_facts(graph, video_id, question, fallback)


def _decided(run: RunContext, graph: EntityGraph, video_id: str, plan: Plan) -> Iterator[Step] | None:
    """The steps of an answer the graph decides for ``plan`` (None when it cannot: the caller retrieves)."""
    from m3agent.control.graph_answers import graph_answer

    if plan.ask == "recall":
        return None
    decided = graph_answer(graph, video_id, plan)
    if decided is None:
        return None
    return _graph_steps(run, plan, decided)


def _graph_steps(run: RunContext, plan: Plan, decided: GraphAnswer) -> Iterator[Step]:
    yield Action(1, GRAPH_TOOL, plan.describe())
    result = graph_search_result(run, GRAPH_TOOL, list(decided.memory_ids), [decided.text])
    run.searches.append(result)
    yield Observation(1, decided.text, result)
    yield Thought(1, f"entity graph answered {plan.ask} from {len(decided.memory_ids)} shot memories.")
    answer = run.finish(decided.text, 1, plan.raw or decided.text, None, cited=set(decided.memory_ids))
    yield replace(answer, max_rounds=1, model=f"{GRAPH_TOOL} ({run.chat.name if run.chat else RERANK} plan)")


def grounded_schema(template: dict[str, Any], shown: list[str]) -> dict[str, Any]:
    """The reply schema whose ``used`` items may only be the ``shown`` ids."""
    schema = copy.deepcopy(template)
    schema["properties"]["used"]["items"]["enum"] = list(shown)
    return schema


def is_abstention(text: str) -> bool:
    """True when ``text`` says the memories do not hold the answer."""
    return bool(_ABSTAIN_RE.match(text.strip()))


def _ground(run: RunContext, candidates: list[Candidate], graph: bool = False,
            people: EntityGraph | None = None) -> Grounded:
    """The model's grounded answer over ``candidates``; with ``people``, each person's first mention in the lines
    says what they look or sound like."""
    if run.chat is None:
        return _fallback(candidates, "", "no chat model; the reranker chose")
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
        return Grounded(NOT_IN_MEMORY, (), run.chat.name, reply.text, abstained=True,
                        note="the model restated the question instead of answering it")
    judged = _judge(run.chat.name, parsed, candidates, shown, reply.text)
    return replace(judged, text=who_answer(run.question, judged.text, judged.used)) if judged.used else judged


ECHO_SHARE = 0.7
"""An answer made only of the question's words, at least this share of them, restates the question."""


def restates(question: str, answer: str) -> bool:
    """True when ``answer`` only repeats ``question`` (the 1.5B did, when none of the memories shown held the
    answer: "What question does the man in the debate ask the woman?" answered with itself). A short answer in
    the question's words ("the woman", for "the man or the woman?") is an answer."""
    asked, said = text_words(question), text_words(answer)
    return len(said) >= 4 and set(said) <= set(asked) and len(said) >= ECHO_SHARE * len(asked)


def who_answer(question: str, answer: str, cited: tuple[Candidate, ...]) -> str:
    """A who-question is answered by a person. When the answer names nobody (no character tag, no
    capitalised word the question lacks) and the cited memories have one speaker, an unnamed character,
    that speaker is the answer (small models tend to answer "who is in DC?" with "DC")."""
    if not _WHO_RE.match(question) or tags.find_tags(answer):
        return answer
    if any(word not in question for word in _CAPITALISED_RE.findall(answer)):
        return answer
    speakers = {m.group(1) for c in cited if (m := _SPEAKER_RE.match(c.text))}
    return speakers.pop() if len(speakers) == 1 else answer


def _judge(name: str, reply: GroundedReply, candidates: list[Candidate], shown: list[str], raw: str) -> Grounded:
    """Accept the reply only when every id it names was shown and a real answer cites at least one."""
    unknown = [i for i in reply.used if i not in shown]
    if unknown:
        return _fallback(candidates, raw, f"the model named memory ids that were not shown ({', '.join(unknown)}); "
                                          "the reranker chose")  # fmt: skip
    if is_abstention(reply.answer) or (not reply.used and is_abstention(reply.answer.split(".")[0])):
        return Grounded(NOT_IN_MEMORY, (), name, raw, abstained=True)
    if not reply.used:
        return _fallback(candidates, raw, "the model answered without naming a memory; the reranker chose")
    used = [candidates[shown.index(i)] for i in dict.fromkeys(reply.used)]
    return Grounded(reply.answer, needed(used, candidates, reply.answer), name, raw)


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
    return Grounded(candidates[0].text, (candidates[0],), RERANK, raw, note)


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
        from m3agent.control.people_words import describe_people

        lines = describe_people(people, lines)
    return "\n".join(lines)


def day_of(date: str) -> str:
    """The day of a clip's date: ``1:56 pm on 8 May, 2023`` -> ``8 May, 2023`` (other dates as they are)."""
    return _TIME_OF_DAY_RE.sub("", date, count=1)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_MEMORY_CHARS else flat[: MAX_MEMORY_CHARS - 1] + "…"


def _explain(outcome: Grounded) -> str:
    if outcome.abstained:
        return f"{outcome.chooser}: none of the retrieved memories answers the question."
    ids = ", ".join(c.label for c in outcome.used)
    if outcome.chooser == RERANK:
        return f"The reranker's first candidate {ids} is quoted."
    return f"{outcome.chooser} answered from {ids}."


def _finish(run: RunContext, outcome: Grounded, facts: list[GraphFact] | None = None) -> Answer:
    cited = {c.memory_id for c in outcome.used if c.memory_id is not None}
    backing = {f.text: f.memory_ids for f in facts or ()}
    cited |= {m for c in outcome.used if c.hit is None for m in backing.get(c.text, ())}
    rewrite = all(c.hit is not None or c.text in backing for c in outcome.used)  # a name fact keeps its tags
    answer = run.finish(outcome.text, 1, outcome.raw or outcome.text, None, cited=cited, rewrite=rewrite)
    if outcome.abstained:
        answer = replace(answer, evidence=(), clips=())
    ruled = outcome.chooser in (RERANK, ATTRIBUTION)  # no model wrote this answer
    return replace(answer, max_rounds=1, model=outcome.chooser if ruled else answer.model)
