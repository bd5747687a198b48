"""What the consolidation model is shown, what it may reply, and which of its facts are kept.

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
hold the value (:func:`_holding`, or the labels the model gives, optionally),
and its confidence follows from who said it (:data:`OWN_WORDS`). Under a
grammar ``person`` and any ``sources`` are enums of exactly what was shown; a
reply from an endpoint that names anything else is caught here. The sentence is written from the fields by
:data:`TEMPLATES` (``<voice_4>'s name is Jack.``), so equal facts read alike and
the write rules see a name or a role as an attribute slot (reinforced by the
same value, contradicted by another).

A fact is kept only when (otherwise it is dropped with a note saying why):

- every source is a shown label (ids that were not shown are never stored);
- its person and any tag in its value are entities of the shown memories, and
  only a ``place`` fact is about nobody;
- its value shares a content word with its sources and does not quote them, in
  a sentence that may state a fact (:func:`.fact_cues.may_state`: what the
  pre-check shows);
- a name occurs in its sources, and not only in the person's own words unless
  they introduce themselves ("names from how others address them": a speaker
  saying "thanks, Jack" is not Jack);
- a role, liking, habit, relation or place stands in a source sentence that says
  so (:func:`_cue_problem`): "I was a senator" by the person, "I love", "every
  morning", "my wife", "in DC"; said in speech, a role, liking, habit or relation
  must be in the person's own first-person words (or a title before their name).
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from m3agent import tags
from m3agent.llm.replies import Content, Reply
from m3agent.memorize.fact_cues import (
    FIRST_PERSON,
    KIND_CUES,
    NAMED_PLACE,
    SECOND_PERSON,
    SENTENCE,
    SPEECH,
    addressed_names,
    addresses_someone,
    first_person,
    may_state,
    readable,
    sentences,
    speech_quote,
    stating_sentences,
)
from m3agent.text import SHORT_WORDS, STOPWORDS, self_names, stem

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
_WORD = re.compile(r"[a-z0-9']+")
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
    """Labels of the memories that show it; none given: every shown memory holding the value (:func:`_holding`)."""


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
        speaker = _speaker(memory)
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
        speaker = _speaker(memory)
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
    return next((j for j in range(index + 1, len(memories)) if _speaker(memories[j]) not in (None, speaker)), None)


def _next_speaker(memories: list[Memory], index: int, speaker: str) -> str | None:
    reply = _reply_index(memories, index, speaker)
    return None if reply is None else _speaker(memories[reply])


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
    lines = [f"[{label}] {_short(_line(m, shown.whole))}" for label, m in shown.memories.items()]
    facts = [f"- {_short(m.text)}" for m in shown.known] or ["(none yet)"]
    return {"facts": "\n".join(facts), "memories": "\n".join(lines)}


def _line(memory: Memory, whole: bool = False) -> str:
    """A memory as the prompt shows it: speech without its clock and, unless ``whole``, cut to the sentences
    that may state a fact (a reply shown for who was named: its first sentence), else its text."""
    match = SPEECH.match(memory.text)
    if not match:
        return memory.text
    quote = speech_quote(memory) or ""
    parts = sentences(quote)
    stating = [] if whole else stating_sentences(memory) or parts[:1]
    shown = quote if whole or len(stating) == len(parts) else " … ".join(stating)
    return f'{match.group("tag")} says: "{shown}"'


def checked(reply: ConsolidationReply, shown: Shown) -> tuple[list[Draft], list[str]]:
    """The facts of ``reply`` that pass the checks of the module docstring, and a note per dropped fact."""
    drafts: list[Draft] = []
    notes: list[str] = []
    for item in reply.facts:
        if _is_empty(item.value):  # "none" / "unknown": the model saying it has no fact, not a fact to check
            continue
        draft, problem = _check(item, shown)
        if draft is None:
            notes.append(f"dropped {item.person} {item.kind} {item.value!r}: {problem}")
        else:
            drafts.append(draft)
    return drafts, notes


_EMPTY_VALUES = frozenset({"", NOBODY, "unknown", "n/a", "na", "null", "nothing", "not shown", "not known"})


def _is_empty(value: str) -> bool:
    return " ".join(value.lower().split()).strip(" .'\"") in _EMPTY_VALUES


def _check(item: ConsolidatedFact, shown: Shown) -> tuple[Draft | None, str]:
    unknown = [s for s in item.sources if s not in shown.memories]
    if unknown:
        return None, f"it names memory ids that were not shown ({', '.join(unknown)})"
    value = " ".join(tags.canonical_spelling(item.value).split()).rstrip(".")
    sources = tuple(shown.memories[s] for s in dict.fromkeys(item.sources)) or _holding(item.kind, value, shown)
    if not sources:
        return None, f"no shown memory holds {value!r}"
    person = tags.parse(item.person)
    if (person is None) != (item.kind == "place") or (person is None and item.person.strip() != NOBODY):
        return None, "only a place fact is about nobody" if person is None else "a place fact is about nobody"
    named = [*([person] if person else []), *tags.find_tags(value)]
    stray = [str(t) for t in named if t.kind not in tags.ENTITY_KINDS or t.id not in shown.entity_ids]
    if stray:
        return None, f"it names {', '.join(stray)}, who is in none of the shown memories"
    problem = _grounding_problem(item.kind, person, value, sources)
    if problem:
        return None, problem
    kinds = shown.offer.get(str(person) if person else NOBODY, {})  # a reply under no grammar
    if item.kind not in kinds or (kinds[item.kind] and value not in kinds[item.kind]):
        return None, f"none of the shown words could state this {item.kind} of {person or 'the place'}"
    text = TEMPLATES[item.kind].format(person=person, value=value)
    text = text[0].upper() + text[1:]
    return Draft(text, tags.entity_ids(text), sources, _confidence(person, sources)), ""


def _holding(kind: str, value: str, shown: Shown) -> tuple[Memory, ...]:
    """The shown memories a value stands in: a name's words all, another value's content words any. The model
    names no sources (seven tokens a fact it would write, and pick less well than this)."""
    lowered = value.lower()
    if kind == "name":
        return tuple(m for m in shown.memories.values() if _contains_words(m.text.lower(), lowered))
    wanted = _content(lowered)
    return tuple(m for m in shown.memories.values() if wanted & _content(m.text.lower()))


def _confidence(person: tags.Tag | None, sources: tuple[Memory, ...]) -> float:
    own = any(_speaker(m) in (None, str(person)) for m in sources) if person is not None else False
    return OWN_WORDS if own else OTHERS_WORDS


def _grounding_problem(kind: str, person: tags.Tag | None, value: str, sources: tuple[Memory, ...]) -> str:
    said = " ".join(m.text.lower() for m in sources)
    lowered = value.lower()
    if len(_normal(lowered).split()) > 3 and _normal(lowered) in _normal(said):
        return "it copies an observation instead of stating a lasting fact"
    if kind == "name":
        return _name_problem(person, value, sources) or _unstated(lowered, sources)
    if not _content(lowered) & _content(said):
        return "it shares no word with its sources"
    if kind in ABOUT_THE_SPEAKER and person is not None:
        problem = _listener_problem(person, value, sources)
        if problem:
            return problem
    return _cue_problem(kind, person, value, sources) or _unstated(lowered, sources)


def _unstated(value: str, sources: tuple[Memory, ...]) -> str:
    """A value that only stands in spoken sentences which could state no fact (:func:`.fact_cues.may_state`:
    no first-person cue, no one spoken to by name). The pre-check skips and hides exactly those sentences, so it loses
    no fact these checks would keep."""
    wanted = _content(value)
    for memory in sources:
        quote = speech_quote(memory)
        if quote is None or any(may_state(s) and wanted & _content(s.lower()) for s in sentences(quote)):
            return ""
    return "no source sentence that holds it could state a fact (no first-person cue, no one spoken to by name)"


def _cue_problem(kind: str, person: tags.Tag | None, value: str, sources: tuple[Memory, ...]) -> str:
    """A role, liking, habit, relation or place whose value stands in no source sentence that says so.

    "New member orientation" names no role, "how to use X" is no liking, "an episode of Guitar Rings" is no
    place: the value's words must sit in a sentence with the kind's cue (:data:`KIND_CUES`; a place after
    "in", "at", "from", "to" or "near"). Said in speech, a role, liking, habit or relation of a person must
    be in their own first-person sentence ("I was a senator" makes its speaker one, not whoever the model
    named), or, for a role, come before a name in anyone's ("Good morning, doctor Lee")."""
    wanted = _content(value.lower())
    holding = [(m, sentence) for m in sources for sentence in SENTENCE.split(_quoted(m.text))
               if wanted & _content(sentence.lower())]
    sentences = [sentence for _, sentence in holding]
    if kind == "place":
        words = _WORD.findall(value.lower())
        at = rf"\b(?:in|at|from|to|into|near|around)\s+(?:the\s+)?{re.escape(words[0] if words else value)}\b"
        said_here = [s for m, s in holding if _speaker(m) is None or first_person(s.lower())]  # "I'm in DC"
        return "" if any(re.search(at, s.lower()) for s in said_here) else f"no one says they are in {value!r}"
    cue = KIND_CUES.get(kind)
    if cue is None:
        return ""
    if kind == "role" and any(re.search(rf"(?i:\b{re.escape(value)})\s+[A-Z][a-z]", s) for s in sentences):
        return ""  # addressed by the title: "Good morning, doctor Lee"
    stated = [s for m, s in holding if _near_cue(kind, cue, s.lower(), value) and _states_it(m, s, person)]
    if stated:
        return ""
    quoted = _short(sentences[0].strip()) if sentences else ""
    return f"no source sentence states it as {person or 'its'} {kind} (\"{quoted}\")"


CUE_REACH = 4
"""Words after a role's or liking's cue where the value's last word must stand ("I was a senator with a
Republican president" states a senator, not a president), and around a habit's where one of its words must
("I drink it every morning")."""


def _near_cue(kind: str, cue: re.Pattern[str], lowered: str, value: str) -> bool:
    """Whether ``value`` stands by a ``cue`` of ``lowered`` (see :data:`CUE_REACH`)."""
    head = [stem(w) for w in _WORD.findall(tags.rewrite(value.lower(), lambda _tag: " ")) if w not in STOPWORDS]
    if kind == "relation" or not head:
        return cue.search(lowered) is not None  # a relation's cue is its own word ("my wife")
    words = [stem(w) for w in _WORD.findall(lowered)]
    for match in cue.finditer(lowered):
        at = len(_WORD.findall(lowered[: match.start()]))
        low = max(0, at - CUE_REACH) if kind == "habit" else at
        window = set(words[low : at + len(_WORD.findall(match.group())) + CUE_REACH])
        if (window & set(head)) if kind == "habit" else head[-1] in window:
            return True
    return False


def _states_it(memory: Memory, sentence: str, person: tags.Tag | None) -> bool:
    """Whether ``sentence`` of ``memory`` may state a fact of ``person``: a sentence of a description that
    names them; in speech, only the person's own sentence in the first person."""
    speaker = _speaker(memory)
    if person is None:
        return True
    if speaker is None:
        return str(person) in sentence
    return speaker == str(person) and bool(set(_WORD.findall(sentence.lower())) & FIRST_PERSON)


def _listener_problem(person: tags.Tag, value: str, sources: tuple[Memory, ...]) -> str:
    """A fact about ``person`` that rests only on their own sentences saying it of "you" (the listener).

    "If you were an effective senator" said by P makes the listener a senator, not P; "when I was a senator"
    makes P one. Sources by someone else, or not speech, are not judged (whom they address is unknown)."""
    wanted = _content(value.lower())
    holding = [m for m in sources if wanted & _content(m.text.lower())]
    own = [m for m in holding if _speaker(m) == str(person)]
    if not holding or len(own) < len(holding):
        return ""
    sentences = [sentence for m in own for sentence in SENTENCE.split(_quoted(m.text))
                 if wanted & _content(sentence.lower())]
    if sentences and all(_second_person(sentence) for sentence in sentences):
        return f"{person} says it of the person they speak to (\"{_short(sentences[0].strip())}\"), not of themselves"
    return ""


def _speaker(memory: Memory) -> str | None:
    """The tag of who speaks in a speech memory (``At 0:05 <voice_3> says: "..."``, ``<voice_1> said: ...``)."""
    match = SPEECH.match(memory.text)
    return match.group("tag") if match else None


def _quoted(text: str) -> str:
    start = text.find('"')
    return text[start + 1 :].rstrip('"') if start >= 0 else text


def _second_person(sentence: str) -> bool:
    words = set(_WORD.findall(sentence.lower()))
    return bool(words & SECOND_PERSON) and not words & FIRST_PERSON


def _name_problem(person: tags.Tag | None, name: str, sources: tuple[Memory, ...]) -> str:
    """A name must occur in the sources, and in words of someone else than ``person`` unless they give it."""
    with_name = [m for m in sources if _contains_words(m.text.lower(), name.lower())]
    if not with_name:
        return f"the name {name!r} occurs in none of its sources"
    own = [m for m in with_name if person is not None and _speaker(m) == str(person)]
    if len(own) == len(with_name) and not any(_gives_name(m.text, name) for m in own):
        return f"the name {name!r} is said by {person} to someone else"
    return ""


def _gives_name(text: str, name: str) -> bool:
    return any(_contains_words(found.lower(), name.lower()) or _contains_words(name.lower(), found.lower())
               for found in self_names(text))


def _content(text: str) -> set[str]:
    plain = tags.rewrite(text, lambda _tag: " ")
    return {stem(w) for w in _WORD.findall(plain) if w not in STOPWORDS and (len(w) > 2 or w not in SHORT_WORDS)}


def _contains_words(text: str, phrase: str) -> bool:
    words = set(_WORD.findall(text))
    wanted = _WORD.findall(phrase)
    return bool(wanted) and all(w in words for w in wanted)


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text))


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_MEMORY_CHARS else flat[: MAX_MEMORY_CHARS - 1] + "…"
