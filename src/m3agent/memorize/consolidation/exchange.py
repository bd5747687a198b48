"""What the consolidation model is shown and what it may reply (which of its facts are kept: :mod:`.fact_checks`).

The model sees the unit's new episodic memories that could state a fact
(:mod:`.fact_cues`: speech cut to its sentences that may state one, and
descriptions), labelled ``m1``, ``m2`` ... in time order, and the known
semantic facts of the same people (unlabelled: they are context, never a
source). The fixed instructions and the worked examples come first and are
the same for every call, so a local model keeps their evaluated state and
reads only the memories of each unit.

Its reply (``prompts/memorize_consolidate.json``) lists facts as fields, not
free sentences: the person (a tag of the shown memories, or ``none`` for the
place), the kind and a short value; its sources are the shown memories that
hold the value (:func:`.fact_checks._holding`, or the labels the model gives, optionally),
and its confidence follows from who said it (:data:`OWN_WORDS`). Under a
grammar ``person`` and any ``sources`` are enums of exactly what was shown; a
reply from an endpoint that names anything else is caught here. The sentence is written from the fields by
:data:`TEMPLATES` (``<voice_4>'s name is Jack.``), so equal facts read alike and
the write rules see a name or a role as an attribute slot (reinforced by the
same value, contradicted by another).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from m3agent import tags
from m3agent.llm.prompts import Content, Reply
from m3agent.memorize.consolidation.cues import (
    KIND_CUES,
    NAMED_PLACE,
    addressed_names,
    addresses_someone,
    first_person,
    readable,
    sentences,
    stating_sentences,
)
from m3agent.memorize.speech_line import quoted, read_speech
from m3agent.text import self_names

if TYPE_CHECKING:
    from m3agent.domain import Memory

PROMPT = "memorize_consolidate"
MAX_SHOWN = 16
MAX_KNOWN = 12
MAX_MEMORY_CHARS = 200
OWN_WORDS, OTHERS_WORDS = 0.8, 0.6
"""A fact's confidence: stated by the person in their own words (or by a description), or only by others (a
name they are called, a title, a place). The model reports none: its own guess of its certainty cost four
tokens a fact and told nothing the sources do not."""
ABOUT_THE_SPEAKER = frozenset({"role", "relation", "likes", "habit"})
"""Fact kinds that describe their person; one they only say of "you" is about their listener."""


TEMPLATES = {
    "name": "{person}'s name is {value}.",
    "role": "{person}'s role is {value}.",
    "relation": "{person} is {value}.",
    "likes": "{person} likes {value}.",
    "habit": "{person} often {value}.",
    "place": "The place: {value}.",
}
NOBODY = "none"


class ConsolidatedFact(Reply):
    """One fact of a ``memorize_consolidate`` reply."""

    person: str
    kind: Literal["name", "role", "relation", "likes", "habit", "place"]
    value: Content
    sources: tuple[str, ...] = Field(default=(), max_length=4)
    """Labels of the memories that show it; none given: every shown memory holding the value
    (:func:`.fact_checks._holding`)."""


class ConsolidationReply(Reply):
    """``memorize_consolidate``: at most three facts (none: nothing lasting was shown)."""

    facts: tuple[ConsolidatedFact, ...] = Field(max_length=3)


@dataclass(frozen=True)
class Shown:
    """The memories one call shows: the new episodic ones by label, and the known facts; :attr:`offer` is what
    their words could state (computed once: the pre-check, the reply grammar and the checks all read it)."""

    memories: dict[str, Memory]
    known: tuple[Memory, ...]
    whole: bool = False  # memories shown whole (the pre-check off), not cut to the sentences that may state

    @functools.cached_property
    def offer(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """:func:`offered` of these memories."""
        return offered(self)

    @property
    def entity_ids(self) -> set[int]:
        return {e for m in (*self.memories.values(), *self.known) for e in m.entity_ids}

    @property
    def tags(self) -> list[str]:
        """The entity tags written in the shown memories, in first-seen order."""
        seen: dict[str, None] = {}
        for memory in (*self.memories.values(), *self.known):
            for tag in tags.find_tags(memory.text):
                if tag.kind in tags.ENTITY_KINDS and tag.id in memory.entity_ids:
                    seen.setdefault(str(tag), None)
        return list(seen)


@dataclass(frozen=True, slots=True)
class Draft:
    """A checked fact, before embedding and the write rules."""

    text: str
    entity_ids: tuple[int, ...]
    sources: tuple[Memory, ...]
    confidence: float


def shown_memories(new: list[Memory], known: list[Memory], *, whole: bool = False) -> Shown:
    """At most :data:`MAX_SHOWN` new memories that could state a fact, in time order and labelled ``m1``,
    ``m2`` ... (short labels: fewer tokens to read and to write), and the :data:`MAX_KNOWN` weightiest known
    facts. A short prompt keeps a small model on task and fast.

    Shown: speech with a sentence that may state a fact, or a description (:func:`.fact_cues.fact_bearing`;
    never who is on screen, shots, sounds or on-screen text), and after a sentence speaking to someone by name
    the next speaker's words, the likeliest answer of the person named ("Thanks, Jack." - "Glad you liked it."). With
    ``whole`` (the pre-check off) every readable memory, whole."""
    ordered = sorted((m for m in new if readable(m)), key=lambda m: (m.clip_index, m.start_s, m.id))
    kept = ordered if whole else _stating_and_replies(ordered)
    strongest = sorted(known, key=lambda m: (-m.weight, m.id))[:MAX_KNOWN]
    return Shown({f"m{i}": m for i, m in enumerate(kept[:MAX_SHOWN], 1)},
                 tuple(sorted(strongest, key=lambda m: m.id)), whole)


def _stating_and_replies(ordered: list[Memory]) -> list[Memory]:
    kept: dict[int, Memory] = {}
    for i, memory in enumerate(ordered):
        stating = stating_sentences(memory)
        if not stating:
            continue
        kept.setdefault(i, memory)
        speaker = speaker_of(memory)
        if speaker is not None and any(addresses_someone(s) for s in stating):
            reply = _reply_index(ordered, i, speaker)
            if reply is not None:
                kept.setdefault(reply, ordered[reply])
    return [kept[i] for i in sorted(kept)]


PEOPLE_KINDS = ("name", "role", "relation", "likes", "habit")


def offered(shown: Shown) -> dict[str, dict[str, tuple[str, ...]]]:
    """Per person (a tag, or ``none`` for the place), the kinds of fact the shown words could state, each with
    the values it may take (empty: any words).

    A speaker's own first-person sentence offers the kinds whose cue it carries ("I was a senator": role) and
    a name they give themselves; a sentence speaking to someone by name offers that name to the next speaker
    ("Hey Mel!": Mel, for whoever answers); a place someone says they are in ("I'm in DC") offers a place; a
    description offers every kind of whom it names. The checks keep nothing else, so the reply grammar offers
    nothing else (no tokens spent on facts that would be dropped, no name given to the wrong one of two
    people greeting each other), and a unit with nothing offered costs no call. Shown ``whole``: everything."""
    if shown.whole:
        return {**{tag: dict.fromkeys(PEOPLE_KINDS, ()) for tag in shown.tags}, NOBODY: {"place": ()}}
    offer: dict[str, dict[str, set[str]]] = {}
    memories = list(shown.memories.values())
    for i, memory in enumerate(memories):
        speaker = speaker_of(memory)
        if speaker is None:  # a description: no cheap rule judges free text
            for tag in tags.find_tags(memory.text):
                if tag.kind in tags.ENTITY_KINDS and tag.id in memory.entity_ids:
                    offer.setdefault(str(tag), {}).update({k: set() for k in PEOPLE_KINDS})
            offer.setdefault(NOBODY, {})["place"] = set()
            continue
        listener = _next_speaker(memories, i, speaker)
        for sentence in stating_sentences(memory):
            _offer_sentence(offer, sentence, speaker, listener)
    order = (*PEOPLE_KINDS, "place")
    return {person: {k: tuple(sorted(kinds[k])) for k in order if k in kinds} for person, kinds in offer.items()
            if kinds}


def _offer_sentence(offer: dict[str, dict[str, set[str]]], sentence: str, speaker: str, listener: str | None) -> None:
    lowered = sentence.lower()
    if first_person(lowered):
        for kind, cue in KIND_CUES.items():
            if cue.search(lowered):
                offer.setdefault(speaker, {}).setdefault(kind, set())
        if names := self_names(sentence):
            offer.setdefault(speaker, {}).setdefault("name", set()).update(names)
    if listener is not None and (names := addressed_names(sentence)):
        offer.setdefault(listener, {}).setdefault("name", set()).update(names)
    if NAMED_PLACE.search(sentence) and first_person(lowered):  # "I'm in DC", not "it began in New Jersey"
        offer.setdefault(NOBODY, {}).setdefault("place", set())


def _reply_index(memories: list[Memory], index: int, speaker: str) -> int | None:
    """The index of the first speech after ``index`` by someone other than ``speaker`` (who answers them)."""
    return next((j for j in range(index + 1, len(memories)) if speaker_of(memories[j]) not in (None, speaker)), None)


def _next_speaker(memories: list[Memory], index: int, speaker: str) -> str | None:
    reply = _reply_index(memories, index, speaker)
    return None if reply is None else speaker_of(memories[reply])


def reply_schema(template: dict[str, Any], shown: Shown) -> dict[str, Any]:
    """The reply schema offering only what :func:`offered` finds: per person their kinds (a name only among the
    names offered), ``sources`` (optional) a shown label; at most as many facts as there are offered kinds."""
    schema = copy.deepcopy(template)
    facts = schema["properties"]["facts"]
    item = facts.pop("items")
    item["properties"]["sources"]["items"]["enum"] = list(shown.memories)
    offer = shown.offer
    choices = []
    for person, kinds in offer.items():
        free = [kind for kind, values in kinds.items() if not values]
        if free:
            choices.append(_choice(item, person, free))
        choices += [_choice(item, person, [kind], values) for kind, values in kinds.items() if values]
    facts["items"] = {"anyOf": choices} if choices else item
    facts["maxItems"] = min(facts.get("maxItems", 3), sum(len(k) for k in offer.values()))
    return schema


def _choice(item: dict[str, Any], person: str, kinds: list[str], values: tuple[str, ...] = ()) -> dict[str, Any]:
    choice = copy.deepcopy(item)
    choice["properties"]["person"] = {"const": person}
    choice["properties"]["kind"] = {"type": "string", "enum": kinds}
    if values:
        choice["properties"]["value"] = {"type": "string", "enum": list(values)}
    return choice


def loose_schema(template: dict[str, Any]) -> dict[str, Any]:
    """The reply schema without the enums of what was shown: a reply that only names unshown ids or tags
    is read with it, so its other facts survive and the bad ones are dropped by :func:`checked`."""
    schema = copy.deepcopy(template)
    item = schema["properties"]["facts"]["items"]["properties"]
    del item["sources"]["items"]["enum"], item["person"]["enum"]
    return schema


def prompt_fields(shown: Shown) -> dict[str, str]:
    """The ``$facts`` and ``$memories`` of the user section."""
    lines = [f"[{label}] {shortened(_line(m, shown.whole))}" for label, m in shown.memories.items()]
    facts = [f"- {shortened(m.text)}" for m in shown.known] or ["(none yet)"]
    return {"facts": "\n".join(facts), "memories": "\n".join(lines)}


def _line(memory: Memory, whole: bool = False) -> str:
    """A memory as the prompt shows it: speech without its clock and, unless ``whole``, cut to the sentences
    that may state a fact (a reply shown for who was named: its first sentence), else its text."""
    line = read_speech(memory.text)
    if line is None:
        return memory.text
    parts = sentences(line.quote)
    stating = [] if whole else stating_sentences(memory) or parts[:1]
    shown = line.quote if whole or len(stating) == len(parts) else " … ".join(stating)
    return quoted(line.tag, shown)


def speaker_of(memory: Memory) -> str | None:
    """The tag of who speaks in a speech memory (``At 0:05 <voice_3> says: "..."``, ``<voice_1> said: ...``)."""
    line = read_speech(memory.text)
    return line.tag if line is not None else None


def shortened(text: str) -> str:
    """``text`` on one line, cut to :data:`MAX_MEMORY_CHARS` (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_MEMORY_CHARS else flat[: MAX_MEMORY_CHARS - 1] + "…"
