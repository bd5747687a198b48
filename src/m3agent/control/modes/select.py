"""The select mode: one retrieval, then the model only picks which memory answers.

Small local models cannot plan searches or write answers, but under a
grammar they can return one of a few allowed values. This mode retrieves
with the question (``search_memory``: hybrid ranking, character/name
mapping, time filters, ``before_clip``), reranks the memories without a
model (:mod:`m3agent.control.retrieval.rerank`) and shows the best ``select_k`` of them,
numbered in that order, to the model. The reply schema
(``prompts/control_select.json``) is completed here: ``choice`` is an enum of
``"1".."N"`` and ``"none"``, so the grammar of the llama.cpp backend forces
a valid choice. The answer is the chosen memory (tags rewritten to names).

The reply also has ``answer``, the few words that answer. With
``select_span`` it replaces the whole memory when it occurs verbatim in the
chosen memory and adds a word the question lacks. It is off by default:
SmolLM2's spans were wrong in all 7 of 80 LoCoMo answers that used them,
but asking for one keeps its choice steadier (30/80 right vs 26/80 without).

Without a model, or when the model call fails or its reply is unusable, the
reranker's first candidate is chosen; the steps say so. "none" ends the run
unanswered.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from m3agent.control.replies import NO_CHOICE, SelectReply
from m3agent.control.retrieval.ranking import keyword_text
from m3agent.control.retrieval.render import render_result
from m3agent.control.retrieval.rerank import Candidate, rank_candidates, stems
from m3agent.control.steps import Action, Answer, Observation, Step, Thought
from m3agent.errors import M3AgentError, MalformedReplyError
from m3agent.llm.prompts import load_prompt_set
from m3agent.text import whole_words

if TYPE_CHECKING:
    from m3agent.control.run_context import RunContext

SELECT_PROMPT = "control_select"
SELECT_TOOL = "search_memory"
RERANK = "rerank"
"""The chooser's name when no model chose (the Answer's ``model``)."""
MAX_CANDIDATE_CHARS = 400
SELECT_MAX_TOKENS = 96
_SAYING = frozenset({"say", "said", "tell", "told", "share"})
"""Words of the memory's frame ("Anna said: ..."), not of an answer."""
_BACKEND_ERRORS = (M3AgentError, ValueError, RuntimeError, OSError)
"""What a failing chat backend raises (llama.cpp raises ValueError when the prompt is too long)."""


@dataclass(frozen=True, slots=True)
class Choice:
    """The outcome of selection. ``candidate`` is None when the model said no memory answers."""

    candidate: Candidate | None
    number: int
    chooser: str
    span: str | None = None
    raw: str = ""
    note: str = ""


def select_steps(run: RunContext) -> Iterator[Step]:
    """Action + Observation of the retrieval, Thought naming the choice, then the Answer."""
    yield Action(1, SELECT_TOOL, run.question)
    result = run.search(SELECT_TOOL, run.question, k=max(run.config.search_k, 2 * run.config.select_k))
    knowledge = "No memories found." if result.empty else render_result(result, with_video=run.video_id is None)
    yield Observation(1, knowledge, result)
    candidates = rank_candidates(result, run.question, run.config.select_k)
    if not candidates:
        yield _finish(run, None, "", failure="no memory matches the question")
        return
    choice = _choose(run, candidates)
    if choice.note:
        yield Observation(1, choice.note, error=choice.note)
    yield Thought(1, _explain(choice, len(candidates)))
    yield _finish(run, choice, choice.span or (choice.candidate.text if choice.candidate else ""))


def _choose(run: RunContext, candidates: list[Candidate]) -> Choice:
    """The model's pick, or the reranker's first candidate when there is no usable model reply."""
    if run.chat is None:
        return Choice(candidates[0], 1, RERANK)
    prompts = load_prompt_set(SELECT_PROMPT)
    schema = select_schema(prompts.schema, len(candidates))
    lines = "\n".join(f"{i}. {_short(c.text)}" for i, c in enumerate(candidates, 1))
    messages = [
        {"role": "system", "content": prompts.render("system")},
        {"role": "user", "content": prompts.render("user", candidates=lines, question=run.question)},
    ]
    try:
        reply = run.call(messages, schema, max_tokens=SELECT_MAX_TOKENS)
    except _BACKEND_ERRORS as exc:
        return Choice(candidates[0], 1, RERANK, note=f"the model call failed ({exc}); the reranker chose")
    try:
        parsed = SelectReply.read(reply)
    except MalformedReplyError as exc:
        note = f"the model's reply was unusable ({exc.message}); the reranker chose"
        return Choice(candidates[0], 1, RERANK, raw=reply.text, note=note)
    if parsed.number is None:
        return Choice(None, 0, run.chat.name, raw=reply.text)
    candidate = candidates[parsed.number - 1]
    grounded = grounded_span(parsed.answer, candidate.text, run.question) if run.config.select_span else None
    return Choice(candidate, parsed.number, run.chat.name, grounded, reply.text)


def select_schema(template: dict[str, Any], count: int) -> dict[str, Any]:
    """The reply schema for ``count`` candidates: ``choice`` in ``"1".."count"`` or ``"none"``."""
    schema = copy.deepcopy(template)
    schema["properties"]["choice"]["enum"] = [str(i) for i in range(1, count + 1)] + [NO_CHOICE]
    return schema


def grounded_span(span: str, memory: str, question: str) -> str | None:
    """``span`` as written in ``memory`` when it occurs there (case and spacing aside) and adds
    a content word the question does not have; ``None`` otherwise (the caller quotes the memory)."""
    words = span.strip().strip("\"'“”‘’.,;:!? ").split()
    if not words:
        return None
    match = whole_words(" ".join(words)).search(memory)
    if match is None:
        return None
    found = match.group(0)
    if not stems(keyword_text(found)) - stems(keyword_text(question)) - _SAYING:
        return None
    return found


def _explain(choice: Choice, count: int) -> str:
    if choice.candidate is None:
        return f"{choice.chooser}: none of the {count} retrieved memories answers the question."
    by = "the reranker" if choice.chooser == RERANK else choice.chooser
    quoted = f"; the answer quotes {choice.span!r}" if choice.span else ""
    return f"Candidate {choice.number} of {count}, {choice.candidate.label}, answers (chosen by {by}){quoted}."


def _finish(run: RunContext, choice: Choice | None, content: str, failure: str | None = None) -> Answer:
    if choice is not None and choice.candidate is None:
        failure = f"{choice.chooser} judged that none of the retrieved memories answers the question"
    candidate = choice.candidate if choice else None
    cited = {candidate.memory_id} if candidate and candidate.memory_id is not None else set()
    raw = choice.raw if choice and choice.raw else content
    rewrite = candidate is None or candidate.hit is not None  # a derived fact keeps its tags
    answer = run.finish(content, 1, raw, failure, cited=cited, rewrite=rewrite)
    return replace(answer, max_rounds=1, model=choice.chooser if choice else answer.model)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_CANDIDATE_CHARS else flat[: MAX_CANDIDATE_CHARS - 1] + "…"
