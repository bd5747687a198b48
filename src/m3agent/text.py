"""Text helpers shared by memorising and answering: one definition each.

- :func:`clock` writes video times (``1:05``, ``1:02:05``); :data:`CLOCK` and
  :func:`clock_seconds` read them back (memories, the writer's ``[1:32]``
  markers and questions all use this one format).
- :data:`STOPWORDS` are the function words dropped before words are compared
  (BM25 keywords, fact propositions, topic grounding). The list is the one
  the LoCoMo retrieval and reranker figures were measured with; a wider one
  (with "can", "would", "all", "some", "new" ...) cost a reranker pick.
- :func:`words` splits text into the lower-cased words every comparison uses;
  :func:`stem` is the crude English stem of one.
- :func:`self_names` ("my name is Ann") and :func:`stated_names`
  ("<face_3>'s name is Ann", "<voice_2> is called Bob") extract names.
"""

from __future__ import annotations

import re

from m3agent import tags

SPACELESS_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "km", "my", "yue", "bo"})
"""Languages written without spaces between words: their words are joined with no separator."""
CLOCK = r"(?:\d+:)?\d{1,2}:\d{2}(?:\.\d+)?"
"""Regex source of one clock time (``m:ss``, ``h:mm:ss``, optional fraction); no groups."""

_STOPWORD_TEXT = """a an and are as at be by did do does for from had has have he her his how i in is it
its of on or she that the their them they this to was were what when where which who whom whose why will
with you your"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

SHORT_WORDS = frozenset({
    "am", "an", "as", "at", "be", "by", "do", "go", "he", "hi", "if", "in", "is", "it", "me", "my", "no", "of",
    "oh", "ok", "on", "or", "so", "to", "up", "us", "we", "ya", "ye", "yo",
})
"""Two-letter words that carry no content; any other two-letter token (DC, UK, TV, LA) is a content word
where a check counts them (consolidation's grounding check)."""

NAMED_AS = r"(?:named|called|addressed as|referred to as|known as)"
"""The verbs of "X is called Y" (shared with the fact-slot grammar of ``memorize.facts``)."""

_NAME = r"[\"'“‘]?(?P<name>[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?)"
_SUBJECT = f"(?P<tag>{tags.pattern()})"
_STATED = tuple(
    re.compile(p)
    for p in (
        _SUBJECT + r"(?:'s|’s) (?:first |full |real )?name is " + _NAME,
        r"[Tt]he name of " + _SUBJECT + r" is " + _NAME,
        _SUBJECT + r",? (?:is|was|gets|got) " + NAMED_AS + " " + _NAME,
        _SUBJECT + r" (?:goes by|answers to) (?:the name )?" + _NAME,
        _SUBJECT + r" introduces (?:himself|herself|themselves|themself) as " + _NAME,
        _SUBJECT + r",? (?:named|called) " + _NAME,
    )
)
_SELF = re.compile(r"\b(?i:my name is|my name's|i am|i'm|this is|call me)\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)")
# Capitalised words that follow "I'm" / "is called" without being names; titles and forms of address too
# ("<face_2>'s name is Mr. President" made a person called "Mr").
_NOT_NAME_TEXT = """I The A An Not So Very Just Here Going Sure Sorry Glad Happy Good Fine Okay Ok Really Also Still
Actually Back Done He She They It This That His Her Their Mr Mrs Ms Miss Mister Dr Sir Madam Ma'am President
Senator Governor Congressman Congresswoman Secretary Judge Professor Officer Captain"""
_NOT_NAMES = frozenset(_NOT_NAME_TEXT.split())


def clock(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on (whole seconds; negative reads as 0)."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def clock_seconds(text: str) -> float:
    """Seconds of a :data:`CLOCK` time (``"1:05"`` -> 65.0); ``ValueError`` for anything else."""
    if not re.fullmatch(CLOCK, text.strip()):
        raise ValueError(f"{text!r} is not a clock time like 1:05 or 1:02:05")
    seconds = 0.0
    for part in text.strip().split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


_WORD = re.compile(r"[a-z0-9']+")
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_TIME_OF_DAY = re.compile(r"^\s*\d{1,2}[:.]\d{2}\s*[ap]\.?m\.?\s+on\s+", re.IGNORECASE)
_SPACE_BEFORE_STOP = re.compile(r"\s+([?.!,;])")


def words(text: str) -> list[str]:
    """The lower-cased words of ``text`` (letters, digits and apostrophes), in order."""
    return _WORD.findall(text.lower())


def tokens(text: str) -> list[str]:
    """The words of ``text`` in any script, as written (case kept; an inner apostrophe kept: "Caroline's")."""
    return _TOKEN.findall(text)


def clock_times(text: str) -> list[str]:
    """The :data:`CLOCK` times written in ``text``, in order (``"at 0:44 and 1:02:05"`` -> two)."""
    return re.findall(CLOCK, text)


def whole_words(phrase: str, possessive: bool = False) -> re.Pattern[str]:
    """A case-insensitive pattern of ``phrase`` as whole words, any spacing between them; with ``possessive``, a
    following ``'s`` belongs to the match. The one way control finds a name or a span in a text."""
    body = r"\s+".join(re.escape(w) for w in phrase.split())
    return re.compile(r"(?<!\w)" + body + (r"(?:['’]s)?" if possessive else "") + r"(?!\w)", re.IGNORECASE)


def tidy(text: str) -> str:
    """``text`` on one line, single-spaced, with no space before a stop (what is left after cutting a phrase)."""
    return _SPACE_BEFORE_STOP.sub(r"\1", " ".join(text.split()))


def day_of(date: str) -> str:
    """The day of a dated clip: ``1:56 pm on 8 May, 2023`` -> ``8 May, 2023`` (other dates as they are)."""
    return _TIME_OF_DAY.sub("", date, count=1)


def stem(word: str) -> str:
    """A crude English stem: "drinks"/"drinking"/"drinked" -> "drink", "cities" -> "city", "rapping"/"stopped"
    -> "rap"/"stop"; lower-cased, a trailing "'s" dropped, tags unchanged. Stems only need to agree with each
    other, not be words."""
    if word.startswith("<"):
        return word
    word = word.lower().removesuffix("'s").removesuffix("’s")
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix, keep in (("ing", 3), ("ed", 3), ("s", 3)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep and not word.endswith("ss"):
            base = word[: -len(suffix)]
            return base if suffix == "s" else _undoubled(base)
    return word


def _undoubled(base: str) -> str:
    """``rapp`` -> ``rap``: the consonant an "-ing"/"-ed" doubled, dropped again; a doubled l, s, z or f is the
    word's own ("calling", "passed", "buzzing", "stuffed"), and so is one whose base would keep two letters
    ("added": "add")."""
    if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "aeioulszf":
        return base[:-1]
    return base


def self_names(text: str) -> list[str]:
    """Names a speaker gives for themselves ("my name is Ann Lee", "I'm Bob"), in order."""
    return [m.group("name") for m in _SELF.finditer(text) if _is_name(m.group("name"))]


STATED_HINTS = ("name", "called", "addressed as", "referred to as", "known as", "goes by", "answers to",
                 "introduces")
"""Every :data:`_STATED` pattern contains one of these (case as written): a text without any states no name."""


def may_state_a_name(text: str) -> bool:
    """False only when :func:`stated_names` finds nothing in ``text`` (or in it with its tags rewritten): a
    cheap test before the patterns, which cost more than reading the memory."""
    return any(hint in text for hint in STATED_HINTS)


def stated_names(text: str) -> list[tuple[tags.Tag, str]]:
    """``(tag, name)`` for each statement that the tagged person is called ``name``
    ("<face_3>'s name is Ann", "<voice_2> is called Bob Lee"), pattern by pattern."""
    found = []
    for pattern in _STATED:
        for match in pattern.finditer(text):
            tag, name = tags.parse(match.group("tag")), match.group("name").strip("'’")
            if tag is not None and _is_name(name):
                found.append((tag, name))
    return found


def _is_name(name: str) -> bool:
    return name.split()[0] not in _NOT_NAMES
