"""The query plan: the packaged model reads a question once, under a grammar, into a typed plan.

A plan names the operation asked (``ask``: same person? seen again? what comes after? how many? ...), its
``direction`` (before / after) and ``sense`` (seen / heard), and up to two references to people or moments
(``person``, ``other``: a kind, a place in the picture, a clock time, the first / last scene, a quote). The
operators of :mod:`m3agent.graph` then do the lookups (:mod:`m3agent.control.graph_answers`): the model
reads the question, the graph decides the answer.

What the model writes is checked against the question before it is used: a clock time the question does not
hold, or a quote whose words it does not hold, is dropped (a small model copies its examples' times).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from m3agent.control.replies import Ask, PlanRef, PlanReply
from m3agent.errors import M3AgentError, MalformedReplyError
from m3agent.graph.references import Reference
from m3agent.llm.prompts import load_prompt_set
from m3agent.text import CLOCK, clock_seconds, words

if TYPE_CHECKING:
    from m3agent.control.runtime import RunContext

PLAN_PROMPT = "control_plan"
PLAN_MAX_TOKENS = 160
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')


class Plan:
    """A checked plan: the operation, direction, sense and the references as :class:`Reference` values."""

    __slots__ = ("ask", "direction", "other", "person", "raw", "sense")

    def __init__(self, reply: PlanReply, question: str, raw: str = "") -> None:
        self.ask: Ask = reply.ask
        self.direction = reply.direction
        self.sense = reply.sense
        person = reference(reply.person, question)
        other = reference(reply.other, question) if reply.other is not None else None
        other = other if other is not None and (other.kind != "none" or other.anchored) else None
        person, self.other = _moment_of_the_person(person, other)
        person = _with_the_only_time(person, self.other, question)
        person = _with_the_only_quote(person, self.other, question) if self.ask not in _NO_QUOTE else person
        self.person, self.other = _wearing(person, self.other, question)
        self.raw = raw

    def describe(self) -> str:
        """One line for the run's trace: ``seen_again after heard: voice @0:44``."""
        refs = " / ".join(_ref_text(r) for r in (self.person, self.other) if r is not None)
        return f"{self.ask} {self.direction} {self.sense}: {refs}"


def write_plan(run: RunContext) -> Plan | None:
    """The model's plan for ``run.question`` (one call under the plan grammar); None without a chat model or
    when the call or its reply fails (the caller answers as if no plan was made)."""
    if run.chat is None:
        return None
    prompts = load_prompt_set(PLAN_PROMPT)
    messages = [{"role": "system", "content": prompts.render("system")},
                {"role": "user", "content": prompts.render("user", question=run.question)}]
    try:
        reply = run.call(messages, prompts.schema, max_tokens=PLAN_MAX_TOKENS)
        return Plan(PlanReply.read(reply), run.question, reply.text)
    except (M3AgentError, MalformedReplyError, ValueError, RuntimeError, OSError):
        return None


def reference(ref: PlanRef, question: str) -> Reference:
    """``ref`` as a :class:`Reference`, keeping only a time and a quote the question really holds."""
    times = re.findall(CLOCK, question)
    time_s = clock_seconds(ref.time) if ref.time.strip() in times else None
    quote = ref.quote if _quoted_in(ref.quote, question) else ""
    scene = ref.scene if re.search(rf"\b{ref.scene}\b", question, re.IGNORECASE) else "any"
    return Reference(ref.kind, ref.place, time_s, scene, quote)


def _quoted_in(quote: str, question: str) -> bool:
    """Whether the question puts ``quote``'s words in quotation marks (a small model also "quotes" its
    description of a person or the whole question)."""
    quoted = words(quote)
    spans = [m.group(1) or m.group(2) for m in _QUOTED.finditer(question)]
    held = {w for span in spans for w in words(span)}
    return bool(quoted) and sum(w in held for w in quoted) >= 0.8 * len(quoted)


def _moment_of_the_person(person: Reference, other: Reference | None) -> tuple[Reference, Reference | None]:
    """A second reference that is only a moment (kind none: a time or a scene, no quote) anchors an unanchored
    person: "the man on the left in the first scene" written as a man on the left and, apart, the first scene."""
    if other is None or other.kind != "none" or other.quote or person.kind == "none" or person.anchored:
        return person, other
    return replace(person, time_s=other.time_s, scene=other.scene), None


def _with_the_only_time(person: Reference, other: Reference | None, question: str) -> Reference:
    """``person`` with the question's clock time when the question holds exactly one and no reference took it
    (the model left it out, or wrote it where the check dropped it)."""
    times = re.findall(CLOCK, question)
    if len(times) != 1 or person.time_s is not None or (other is not None and other.time_s is not None):
        return person
    if person.quote or person.scene != "any":
        return person
    return replace(person, time_s=clock_seconds(times[0]))


_NO_QUOTE = frozenset({"recall", "count_people", "count_so_far", "count_scenes"})
"""Operations whose person a quotation does not pick out (what was said is the answer, or nobody is meant)."""


def _with_the_only_quote(person: Reference, other: Reference | None, question: str) -> Reference:
    """``person`` with the question's quotation when it holds exactly one and no reference took it: a small model
    often leaves the quote out ("who asks "why didn't you do it"" planned as a speaker of the first scene), and
    the quote is what picks out the speaker."""
    spans = [m.group(1) or m.group(2) for m in _QUOTED.finditer(question)]
    if len(spans) != 1 or person.quote or (other is not None and other.quote):
        return person
    if person.kind == "none" and (person.time_s is not None or person.scene != "any"):
        return person  # a moment already named by its time or scene
    return replace(person, quote=spans[0][:80])


_GLASSES = re.compile(r"\b(?:eye)?glasses\b|\bspectacles\b", re.IGNORECASE)
_WEARER_KINDS = frozenset({"man", "woman", "person", "speaker"})
_OCCURRENCE = re.compile(r"\b(first|second|third|last)\s+time\b", re.IGNORECASE)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "last": -1}


def _wearing(person: Reference, other: Reference | None, question: str) -> tuple[Reference, Reference | None]:
    """The references with ``wears`` set from the question: "the woman with glasses" names glasses, which the
    plan schema does not carry (the model is not asked; the words are unambiguous). They go to the first reference
    that is a person who can wear them (not a photo, a voice or a bare moment), with the time on screen the
    question counts ("appears for the second time") when it names no moment."""
    if not _GLASSES.search(question):
        return person, other
    counted = _OCCURRENCE.search(question)
    occurrence = _ORDINALS[counted.group(1).lower()] if counted else 1
    if person.kind in _WEARER_KINDS:
        return replace(person, wears="glasses", occurrence=occurrence), other
    if other is not None and other.kind in _WEARER_KINDS:
        return person, replace(other, wears="glasses", occurrence=occurrence)
    return person, other


def _ref_text(ref: Reference) -> str:
    parts = [ref.kind, ref.place if ref.place != "any" else ""]
    parts += [f"@{ref.time_s:g}s" if ref.time_s is not None else "", f"{ref.scene} scene" if ref.scene != "any" else ""]
    parts += [f'"{ref.quote}"' if ref.quote else "", f"with {ref.wears}" if ref.wears != "any" else "",
              f"time {ref.occurrence}" if ref.occurrence != 1 else ""]
    return " ".join(p for p in parts if p)
