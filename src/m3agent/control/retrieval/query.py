"""Reading a search query: who it names, what it asks, which time it covers.

Routing is by intent, not by the substring "character id": a query asking
for the name of a character, or for the character behind a name, is a
*mapping* query answered from names; a query naming people is restricted
to their memories; a time phrase ("in the first ten minutes", "after 5
minutes", "between 2 and 4 minutes", "at 03:10", "CLIP_4") becomes a range.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from m3agent import tags
from m3agent.control.people.characters import CharacterIndex
from m3agent.control.reading import has_phrase, read_question
from m3agent.text import CLOCK, clock_seconds, tidy, whole_words

_WORD_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60, "ninety": 90, "half": 0.5,
}  # fmt: skip
_NUM = r"(\d+(?:\.\d+)?|" + "|".join(sorted(_WORD_NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)"
_QTY = _NUM + r"(?:\s+an?)?\s*" + _UNIT + r"\b"
_CLOCK = f"({CLOCK})"

_TIME_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), kind)
    for p, kind in (
        (r"\b(?:in|during|within|over) the (?:first|opening) " + _QTY, "first"),
        (r"\b(?:in|during|within|over) the (?:last|final) " + _QTY, "last"),
        (r"\bbetween (?:minute |second )?" + _NUM + r"\s*" + _UNIT + r"? and " + _QTY, "between"),
        (r"\bfrom " + _CLOCK + r" (?:to|until|till) " + _CLOCK, "clock_range"),
        (r"\b(?:after|past|later than|beyond) (?:the )?" + _QTY + r"(?: mark)?", "after"),
        (r"\b(?:before|earlier than|prior to|by) (?:the )?" + _QTY + r"(?: mark)?", "before"),
        (r"\b(?:at|around|near) (?:the )?" + _QTY + r"(?: mark)?", "at"),
        (r"\b(?:at|around|near) " + _CLOCK, "clock_at"),
    )
)
_CLIP_RE = re.compile(r"\bclip[_ #]?(\d+)\b", re.IGNORECASE)
_AT_WINDOW_S = 30.0

_CHARACTER = f"({tags.pattern(tags.TagKind.CHARACTER)})"
_NAME_OF_RE = re.compile(  # read on tags.canonical_spelling(query): bare and loose tags count
    rf"\bname (?:of|for) {_CHARACTER}|{_CHARACTER}(?:'s|’s) name\b|\bwho is {_CHARACTER}", re.IGNORECASE
)


class Intent(enum.StrEnum):
    SEARCH = "search"
    NAME_OF = "name_of"  # "What is the name of <character_2>?"
    CHARACTER_OF = "character_of"  # "Which character is Alice?"


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """A query read against a :class:`CharacterIndex`.

    ``text`` is the query without its time phrase (what gets embedded);
    ``characters`` are the characters it names by tag or by name.
    """

    raw: str
    text: str
    intent: Intent
    characters: tuple[int, ...]
    entity_ids: tuple[int, ...]
    names: tuple[str, ...]
    start_s: float | None = None
    end_s: float | None = None
    clips: tuple[int, ...] = ()


def parse_query(query: str, index: CharacterIndex, duration_s: float | None = None) -> ParsedQuery:
    """Parse ``query``; ``duration_s`` (of the video) resolves "in the last N minutes"."""
    text, start, end = extract_time_range(query, duration_s)
    text, clips = _extract_clips(text)
    characters, entity_ids = _tagged(text, index)
    names = _names_in(text, index)
    for name in names:
        for cid in index.characters_named(name):
            if cid not in characters:
                characters += (cid,)
                entity_ids += index.entities_of.get(cid, ())
    intent = _intent(query, names)
    return ParsedQuery(query, text.strip() or query, intent, characters, entity_ids, names, start, end, clips)


def extract_time_range(query: str, duration_s: float | None = None) -> tuple[str, float | None, float | None]:
    """``(query without the phrase, start_s, end_s)`` for the first time phrase; ``None`` = open."""
    for pattern, kind in _TIME_PATTERNS:
        match = pattern.search(query)
        if match is None:
            continue
        span = _range(kind, match.groups(), duration_s)
        if span is not None:
            return tidy(query[: match.start()] + query[match.end() :]), span[0], span[1]
    return query, None, None


Span = tuple[float | None, float | None]


def _range(kind: str, groups: tuple[str | None, ...], duration_s: float | None) -> Span | None:
    if kind in ("clock_range", "clock_at"):
        return _clock_range(kind, groups)
    if kind == "between":
        first_unit = groups[1] or groups[3]
        return (_seconds(groups[0], first_unit), _seconds(groups[2], groups[3]))
    amount = _seconds(groups[0], groups[1])
    if kind == "first" or kind == "before":
        return (0.0, amount)
    if kind == "after":
        return (amount, None)
    if kind == "at":
        return (max(0.0, amount - _AT_WINDOW_S), amount + _AT_WINDOW_S)
    if kind == "last" and duration_s is not None:
        return (max(0.0, duration_s - amount), None)
    return None


def _clock_range(kind: str, groups: tuple[str | None, ...]) -> Span:
    first = clock_seconds(groups[0] or "")
    if kind == "clock_at":
        return (max(0.0, first - _AT_WINDOW_S), first + _AT_WINDOW_S)
    return (first, clock_seconds(groups[1] or ""))


def _seconds(number: str | None, unit: str | None) -> float:
    return _number(number) * _unit_factor(unit)


def _number(text: str | None) -> float:
    word = (text or "0").lower()
    try:
        return float(word)
    except ValueError:
        return float(_WORD_NUMBERS.get(word, 0))


def _unit_factor(unit: str | None) -> float:
    first = (unit or "s").lower()[0]
    return {"h": 3600.0, "m": 60.0}.get(first, 1.0)


def _extract_clips(text: str) -> tuple[str, tuple[int, ...]]:
    clips = tuple(int(m.group(1)) for m in _CLIP_RE.finditer(text))
    return (_CLIP_RE.sub(" ", text).strip() if clips else text), clips


def _tagged(text: str, index: CharacterIndex) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Characters named by tags, and their entity ids (a bare entity tag counts as itself)."""
    characters: dict[int, None] = {}
    entity_ids: dict[int, None] = {}
    for tag in tags.find_tags(text):
        cid = index.character_of_tag(tag)
        if cid is not None:
            characters.setdefault(cid, None)
            entity_ids.update(dict.fromkeys(index.entities_of.get(cid, ())))
        elif tag.kind != tags.TagKind.CHARACTER:
            entity_ids.setdefault(tag.id, None)
    return tuple(characters), tuple(entity_ids)


def _names_in(text: str, index: CharacterIndex) -> tuple[str, ...]:
    """Known names occurring in ``text`` as whole words (case-insensitive), longest first."""
    found: list[str] = []
    remaining = text
    for name in index.known_names():
        for candidate in (name, name.split()[0]):
            pattern = whole_words(candidate)
            if pattern.search(remaining):
                found.append(candidate)
                remaining = pattern.sub(" ", remaining)
                break
    return tuple(found)


def _intent(query: str, names: tuple[str, ...]) -> Intent:
    if _NAME_OF_RE.search(tags.canonical_spelling(query)):
        return Intent.NAME_OF
    reading = read_question(query)
    if reading.asks_character or (names and has_phrase(reading.words, ("who", "is"))):
        return Intent.CHARACTER_OF
    return Intent.SEARCH


def name_of_targets(query: str) -> tuple[int, ...]:
    """Character ids a NAME_OF query asks about."""
    ids = []
    for match in _NAME_OF_RE.finditer(tags.canonical_spelling(query)):
        tag = tags.parse(next(g for g in match.groups() if g is not None))
        if tag is not None:
            ids.append(tag.id)
    return tuple(dict.fromkeys(ids))
