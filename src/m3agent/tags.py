"""Entity tags in memory text: ``<face_3>``, ``<voice_7>``, ``<character_2>``.

This module owns the tag format: :class:`TagKind` (the entity kinds of
:class:`~m3agent.domain.EntityKind` plus ``character``), one formatter
(:func:`format_tag`, also ``str(Tag)``) and one parser (:func:`tokenize` and
what is built on it; :func:`pattern` lends the same grammar to regexes that
read tags inside longer phrases). Nothing else writes or parses tags by hand.

Text is split into a token stream of plain text and tag tokens; rewriting
works on tokens, never on substrings, so ``face_3`` is never found inside
``face_30`` and ``character_1`` never inside ``character_10``. Bare tags
without angle brackets (``face_3``) are recognised when they stand as a
whole word, and are written back in the canonical ``<kind_N>`` form.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass


class TagKind(enum.StrEnum):
    """What a tag names: an entity (same values as ``EntityKind``) or a character."""

    FACE = "face"
    VOICE = "voice"
    CHARACTER = "character"


ENTITY_KINDS = (TagKind.FACE, TagKind.VOICE)
_KINDS = "|".join(k.value for k in TagKind)
# A tag is a whole token: not preceded or followed by a word character.
_TAG_RE = re.compile(rf"(<?)(?<!\w)({_KINDS})_(\d+)(?!\w)(>?)")
# Spellings models write: <Face 3>, < voice_7 >, [face_3], face3 (see canonical_spelling).
_LOOSE_RE = re.compile(
    rf"[<\[]\s*({_KINDS})\s*[_ -]?\s*(\d+)\s*[>\]]|\b({_KINDS})_?(\d+)\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Tag:
    kind: TagKind
    id: int

    def __str__(self) -> str:
        return f"<{self.kind.value}_{self.id}>"

    @property
    def bare(self) -> str:
        """``kind_N`` without brackets (the key form of reference graphs)."""
        return str(self)[1:-1]


Token = str | Tag


def format_tag(kind: str, entity_id: int) -> str:
    """``<kind_N>``; ``kind`` is a :class:`TagKind` or an ``EntityKind`` (a ``ValueError`` otherwise)."""
    return str(Tag(TagKind(kind), entity_id))


def face(entity_id: int) -> str:
    return format_tag(TagKind.FACE, entity_id)


def voice(entity_id: int) -> str:
    return format_tag(TagKind.VOICE, entity_id)


def character(character_id: int) -> str:
    return format_tag(TagKind.CHARACTER, character_id)


def pattern(kind: TagKind | None = None, group: str | None = None) -> str:
    """Regex source of one canonical ``<kind_N>`` tag (any kind when ``kind`` is None), for
    phrase patterns that contain tags; ``group`` names the group capturing the number."""
    number = rf"(?P<{group}>\d+)" if group else r"\d+"
    kinds = kind.value if kind else f"(?:{_KINDS})"
    return f"<{kinds}_{number}>"


def parse(text: str) -> Tag | None:
    """The tag ``text`` consists of (``<face_3>`` or bare ``face_3``, surrounding spaces allowed), else None."""
    tokens = tokenize(text.strip())
    return tokens[0] if len(tokens) == 1 and isinstance(tokens[0], Tag) else None


def canonical_spelling(text: str) -> str:
    """Rewrite loose tag spellings (``<Face 3>``, ``[voice_7]``, ``face3``) as ``<face_3>``."""

    def fix(match: re.Match[str]) -> str:
        kind, number = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        return format_tag(kind.lower(), int(number))

    return _LOOSE_RE.sub(fix, text)


_CUT_RE = re.compile(rf"<(?:[a-z]{{0,9}}|(?:{_KINDS})_\d*)$")


def without_cut_tag(text: str) -> str:
    """``text`` without a tag cut off at its very end (``"... speaking <charac"``): a reply that reached its length
    limit mid-tag (the grounded answer's 80 characters). What precedes it is kept, trailing separators dropped;
    text that is nothing but the fragment, or ends in a ``<`` that starts no tag kind, is returned as it is."""
    match = _CUT_RE.search(text)
    if match is None or not any(kind.value.startswith(match.group()[1:].split("_")[0]) for kind in TagKind):
        return text
    kept = text[: match.start()].rstrip(" ,;:(")
    return kept or text


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into plain strings and :class:`Tag` tokens, in order.

    Angle brackets belong to a tag only when both are present, so in
    ``"x<face_3"`` the ``<`` stays plain text.
    """
    tokens: list[Token] = []
    pos = 0
    for match in _TAG_RE.finditer(text):
        start, end = _tag_span(match)
        if start > pos:
            tokens.append(text[pos:start])
        tokens.append(Tag(TagKind(match.group(2)), int(match.group(3))))
        pos = end
    if pos < len(text):
        tokens.append(text[pos:])
    return tokens


def _tag_span(match: re.Match[str]) -> tuple[int, int]:
    if match.group(1) and match.group(4):
        return match.start(), match.end()
    return match.start(2), match.end(3)


def render(tokens: list[Token]) -> str:
    return "".join(str(t) for t in tokens)


def find_tags(text: str) -> list[Tag]:
    """All tags in ``text`` in order of appearance (duplicates kept)."""
    return [t for t in tokenize(text) if isinstance(t, Tag)]


def entity_ids(text: str, kinds: tuple[TagKind, ...] = ENTITY_KINDS) -> tuple[int, ...]:
    """Distinct ids of the tags of ``kinds`` in ``text``, in first-seen order."""
    seen: dict[int, None] = {}
    for tag in find_tags(text):
        if tag.kind in kinds:
            seen.setdefault(tag.id, None)
    return tuple(seen)


def rewrite(text: str, replace: Callable[[Tag], Token | None]) -> str:
    """Rewrite each tag with ``replace(tag)``; ``None`` keeps the tag (canonicalised)."""
    out: list[Token] = []
    for token in tokenize(text):
        if isinstance(token, Tag):
            new = replace(token)
            out.append(token if new is None else new)
        else:
            out.append(token)
    return render(out)


def replace_first(text: str, target: Tag, by: Token) -> str:
    """``text`` with the first occurrence of ``target`` replaced by ``by`` (other tags canonicalised)."""
    done = False

    def swap(tag: Tag) -> Token | None:
        nonlocal done
        if done or tag != target:
            return None
        done = True
        return by

    return rewrite(text, swap)


def to_characters(text: str, character_of: Mapping[int, int]) -> str:
    """Rewrite ``<face_i>``/``<voice_j>`` to ``<character_k>`` using ``character_of[entity_id]``.

    Entities without a character keep their own tag.
    """

    def swap(tag: Tag) -> Token | None:
        if tag.kind in ENTITY_KINDS and tag.id in character_of:
            return Tag(TagKind.CHARACTER, character_of[tag.id])
        return None

    return rewrite(text, swap)


def to_names(text: str, names: Mapping[Tag, str]) -> str:
    """Replace tags that have a known name with ``Name`` (tags without a name are kept)."""

    def swap(tag: Tag) -> Token | None:
        return names.get(tag)

    return rewrite(text, swap)


def renumber(text: str, mapping: Mapping[tuple[str, int], tuple[str, int]]) -> str:
    """Map tags ``(kind, id) -> (kind, id)`` (e.g. importing foreign ids into this store)."""

    def swap(tag: Tag) -> Token | None:
        target = mapping.get((tag.kind, tag.id))
        return Tag(TagKind(target[0]), target[1]) if target else None

    return rewrite(text, swap)
