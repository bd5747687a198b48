"""Which facts of a consolidation reply are kept (:func:`checked`), and why the others are dropped.

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

import re
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.memorize.consolidation.cues import (
    FIRST_PERSON,
    KIND_CUES,
    SECOND_PERSON,
    SENTENCE,
    first_person,
    may_state,
    sentences,
    speech_quote,
)
from m3agent.memorize.consolidation.exchange import (
    ABOUT_THE_SPEAKER,
    NOBODY,
    OTHERS_WORDS,
    OWN_WORDS,
    TEMPLATES,
    ConsolidatedFact,
    ConsolidationReply,
    Draft,
    Shown,
    shortened,
    speaker_of,
)
from m3agent.text import SHORT_WORDS, STOPWORDS, self_names, stem

if TYPE_CHECKING:
    from m3agent.domain import Memory

_WORD = re.compile(r"[a-z0-9']+")


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
    own = any(speaker_of(m) in (None, str(person)) for m in sources) if person is not None else False
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
        said_here = [s for m, s in holding if speaker_of(m) is None or first_person(s.lower())]  # "I'm in DC"
        return "" if any(re.search(at, s.lower()) for s in said_here) else f"no one says they are in {value!r}"
    cue = KIND_CUES.get(kind)
    if cue is None:
        return ""
    if kind == "role" and any(re.search(rf"(?i:\b{re.escape(value)})\s+[A-Z][a-z]", s) for s in sentences):
        return ""  # addressed by the title: "Good morning, doctor Lee"
    stated = [s for m, s in holding if _near_cue(kind, cue, s.lower(), value) and _states_it(m, s, person)]
    if stated:
        return ""
    quoted = shortened(sentences[0].strip()) if sentences else ""
    return f"no source sentence states it as {person or 'its'} {kind} (\"{quoted}\")"


CUE_REACH = 4
"""Words after a role's or liking's cue where the value's last word must stand ("I was a senator with a
Republican president" states a senator, not a president), and around a habit's where one of its words must
("I drink it every morning")."""


DEMONSTRATIVES = frozenset({"this", "that", "these", "those"})
"""A liking of something pointed at ("I did like that rock", "I love this one") names it only for those who were
there: stored as "likes rock" it would say something else, so a liking's cue followed by one states none."""


def _near_cue(kind: str, cue: re.Pattern[str], lowered: str, value: str) -> bool:
    """Whether ``value`` stands by a ``cue`` of ``lowered`` (see :data:`CUE_REACH`)."""
    head = [stem(w) for w in _WORD.findall(tags.rewrite(value.lower(), lambda _tag: " ")) if w not in STOPWORDS]
    if kind == "relation" or not head:
        return cue.search(lowered) is not None  # a relation's cue is its own word ("my wife")
    raw = _WORD.findall(lowered)
    words = [stem(w) for w in raw]
    for match in cue.finditer(lowered):
        at = len(_WORD.findall(lowered[: match.start()]))
        after = at + len(_WORD.findall(match.group()))
        if kind == "likes" and after < len(raw) and raw[after] in DEMONSTRATIVES:
            continue
        low = max(0, at - CUE_REACH) if kind == "habit" else at
        window = set(words[low : after + CUE_REACH])
        if (window & set(head)) if kind == "habit" else head[-1] in window:
            return True
    return False


def _states_it(memory: Memory, sentence: str, person: tags.Tag | None) -> bool:
    """Whether ``sentence`` of ``memory`` may state a fact of ``person``: a sentence of a description that
    names them; in speech, only the person's own sentence in the first person."""
    speaker = speaker_of(memory)
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
    own = [m for m in holding if speaker_of(m) == str(person)]
    if not holding or len(own) < len(holding):
        return ""
    sentences = [sentence for m in own for sentence in SENTENCE.split(_quoted(m.text))
                 if wanted & _content(sentence.lower())]
    if sentences and all(_second_person(sentence) for sentence in sentences):
        said = shortened(sentences[0].strip())
        return f"{person} says it of the person they speak to (\"{said}\"), not of themselves"
    return ""


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
    own = [m for m in with_name if person is not None and speaker_of(m) == str(person)]
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
