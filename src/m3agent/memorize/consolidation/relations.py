"""How a new semantic fact relates to an old one: the same fact, a contradiction, or unrelated.

Both texts are first put in a canonical form: entity tags become the tags of
their characters (so ``<face_3>`` and ``<voice_7>`` of one person compare
equal), words are lower-cased. Two detectors then look for contradictions:

1. **Attribute slots.** A fact of the form "X's ATTR is V" (also "X is
   named/called V", "X works as a V", "X is N years old") fills the slot (X, ATTR) with value V. Two positive
   facts filling the same slot with incompatible values contradict ("<voice_7>'s
   name is Ann" vs "... is Bob"); compatible values ("Ann" / "Ann Lee": one's
   words contain the other's) are the same fact. Only single-valued attributes
   count (name, job, age, role, nationality, hometown, spouse, boss, favourite X
   ...): "X's friend is Bob" and "X's friend is Tom" can both be true.
2. **Negation pairs.** Each fact becomes a bag of content words (negators and
   ``text.STOPWORDS`` removed, stemmed by ``text.stem``) and a polarity (odd
   number of negators: negative). Opposite polarity over the same
   subject tags and nearly the same words (Jaccard >= 0.8) is a contradiction:
   "<face_3> likes coffee" vs "<face_3> does not like coffee".

Anything else is left to embedding similarity by the caller. The detector
is deliberately narrow: a missed contradiction only keeps both facts at full
weight, a false one would wrongly weaken a true fact.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from m3agent import tags
from m3agent.text import NAMED_AS, STOPWORDS, stem

_TAG = tags.pattern()
_SUBJECT = rf"(?P<subject>{_TAG}(?:\s*(?:,|and)\s*{_TAG})*)"
_VALUE = r"(?P<value>[^.;!?]+?)"
_END = r"\s*[.!]?\s*$"
_PATTERNS = (
    (re.compile(rf"^{_SUBJECT}(?:'s|’s|') (?P<attr>[a-z][a-z -]{{0,30}}?) (?:is|was|are|were) "
                rf"(?P<neg>not |no longer )?{_VALUE}{_END}"), None),
    (re.compile(rf"^{_SUBJECT} (?:is|was) (?P<neg>not )?{NAMED_AS} {_VALUE}{_END}"), "name"),
    (re.compile(rf"^{_SUBJECT} (?:works|worked) as (?:an? |the )?{_VALUE}{_END}"), "job"),
    (re.compile(rf"^{_SUBJECT} (?:is|was) (?P<value>\d{{1,3}}) years? old{_END}"), "age"),
)
_ATTRIBUTES = {
    "name": "name", "first name": "name", "full name": "name", "real name": "name", "nickname": "nickname",
    "job": "job", "occupation": "job", "profession": "job", "work": "job", "career": "job",
    "age": "age", "role": "role", "position": "role", "title": "role", "job title": "role",
    "nationality": "nationality", "hometown": "home", "home town": "home", "home": "home",
    "birthday": "birthday", "date of birth": "birthday", "birthplace": "origin", "place of birth": "origin",
    "wife": "spouse", "husband": "spouse", "spouse": "spouse", "partner": "spouse",
    "boss": "boss", "manager": "boss", "employer": "employer", "company": "employer",
    "gender": "gender", "native language": "language", "mother tongue": "language",
}
_FAVOURITE = re.compile(r"^favou?rite (.+)$")
_NEGATORS = {"not", "never", "no", "nobody", "nothing", "neither", "nor", "n't", "cannot"}
_CONTRACTIONS = (("can't", "can not"), ("won't", "will not"), ("n't", " not"), ("cannot", "can not"),
                 ("no longer", "not"))
_WORD = re.compile(rf"{_TAG}|[a-z0-9]+")
SAME_WORDS = 0.8


class Relation(enum.Enum):
    SAME = "same"
    CONTRADICTS = "contradicts"
    UNRELATED = "unrelated"


@dataclass(frozen=True, slots=True)
class Slot:
    """An attribute fact: ``subject`` tags (canonical), ``attribute`` name, normalised ``value``."""

    subject: tuple[str, ...]
    attribute: str
    value: str
    negated: bool = False


def canonical(text: str, character_of: Mapping[int, int]) -> str:
    """Lower-cased text with entity tags replaced by their characters' tags, spaces collapsed."""
    return " ".join(tags.to_characters(text, character_of).split()).lower().replace("’", "'")


def slot_of(text: str) -> Slot | None:
    """The attribute slot a canonical fact fills, or ``None``."""
    for pattern, fixed in _PATTERNS:
        match = pattern.match(text)
        if match is None:
            continue
        attribute = fixed or _attribute(match.group("attr"))
        if attribute is None:
            return None
        subject = tuple(sorted(re.findall(_TAG, match.group("subject"))))
        negated = bool(match.groupdict().get("neg"))
        return Slot(subject, attribute, _value(match.group("value")), negated)
    return None


def _attribute(raw: str) -> str | None:
    words = " ".join(raw.split())
    if words in _ATTRIBUTES:
        return _ATTRIBUTES[words]
    favourite = _FAVOURITE.match(words)
    return f"favourite {favourite.group(1)}" if favourite else None


def _value(raw: str) -> str:
    words = raw.strip(" \"'").split()
    while words and words[0] in ("a", "an", "the"):
        words = words[1:]
    return " ".join(words)


def compatible(a: str, b: str) -> bool:
    """Values that can name the same thing: equal, or one's words contained in the other's."""
    wa, wb = set(a.split()), set(b.split())
    return bool(wa and wb) and (wa <= wb or wb <= wa)


def proposition(text: str) -> tuple[frozenset[str], bool]:
    """Content words (tags kept whole) and polarity (``True``: positive) of a canonical fact."""
    for short, long in _CONTRACTIONS:
        text = text.replace(short, long)
    words = _WORD.findall(text)
    negative = sum(w in _NEGATORS for w in words) % 2 == 1
    content = frozenset(stem(w) for w in words if w not in _NEGATORS and w not in STOPWORDS)
    return content, not negative


def relation(new: str, old: str) -> Relation:
    """How canonical fact ``new`` relates to canonical fact ``old`` (see the module docstring)."""
    if _normal(new) == _normal(old):
        return Relation.SAME
    slot_new, slot_old = slot_of(new), slot_of(old)
    if slot_new and slot_old and (slot_new.subject, slot_new.attribute) == (slot_old.subject, slot_old.attribute):
        agree = compatible(slot_new.value, slot_old.value)
        if slot_new.negated == slot_old.negated:
            return Relation.SAME if agree else (Relation.CONTRADICTS if not slot_new.negated else Relation.UNRELATED)
        return Relation.CONTRADICTS if agree else Relation.UNRELATED
    return _negation_relation(new, old)


def _negation_relation(new: str, old: str) -> Relation:
    words_new, positive_new = proposition(new)
    words_old, positive_old = proposition(old)
    if positive_new == positive_old:
        return Relation.UNRELATED
    tags_new = {w for w in words_new if w.startswith("<")}
    if not tags_new or tags_new != {w for w in words_old if w.startswith("<")}:
        return Relation.UNRELATED
    if len(words_new - tags_new) < 1 or len(words_old - tags_new) < 1:
        return Relation.UNRELATED
    overlap = len(words_new & words_old) / len(words_new | words_old)
    return Relation.CONTRADICTS if overlap >= SAME_WORDS else Relation.UNRELATED


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text))
