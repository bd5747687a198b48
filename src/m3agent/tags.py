"""Entity tags in memory text: ``<face_3>``, ``<voice_7>``, ``<character_2>``.

Text is split into a token stream of plain text and tag tokens; rewriting
works on tokens, never on substrings, so ``face_3`` is never found inside
``face_30`` and ``character_1`` never inside ``character_10``. Bare tags
without angle brackets (``face_3``) are recognised when they stand as a
whole word, and are written back in the canonical ``<kind_N>`` form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TAG_KINDS = ("face", "voice", "character")

# A tag is a whole token: not preceded or followed by a word character.
_TAG_RE = re.compile(r"(<?)(?<!\w)(face|voice|character)_(\d+)(?!\w)(>?)")


@dataclass(frozen=True, slots=True)
class Tag:
    kind: str
    id: int

    def __str__(self) -> str:
        return f"<{self.kind}_{self.id}>"


Token = str | Tag


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
        tokens.append(Tag(match.group(2), int(match.group(3))))
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


def entity_ids(text: str, kinds: tuple[str, ...] = ("face", "voice")) -> tuple[int, ...]:
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


def to_characters(text: str, character_of: Mapping[int, int]) -> str:
    """Rewrite ``<face_i>``/``<voice_j>`` to ``<character_k>`` using ``character_of[entity_id]``.

    Entities without a character keep their own tag.
    """

    def swap(tag: Tag) -> Token | None:
        if tag.kind in ("face", "voice") and tag.id in character_of:
            return Tag("character", character_of[tag.id])
        return None

    return rewrite(text, swap)


def to_names(text: str, names: Mapping[tuple[str, int], str]) -> str:
    """Replace tags that have a known name with ``Name`` (tags without a name are kept)."""

    def swap(tag: Tag) -> Token | None:
        return names.get((tag.kind, tag.id))

    return rewrite(text, swap)


def renumber(text: str, mapping: Mapping[tuple[str, int], tuple[str, int]]) -> str:
    """Map tags ``(kind, id) -> (kind, id)`` (e.g. importing foreign ids into this store)."""

    def swap(tag: Tag) -> Token | None:
        target = mapping.get((tag.kind, tag.id))
        return Tag(*target) if target else None

    return rewrite(text, swap)
