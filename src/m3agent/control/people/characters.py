"""Who is who at question time: entity -> character, character <-> names.

Built once per question from the store, truncated to ``before_clip`` so no
later identity evidence leaks in. Names come from two sources:
*given* names (set by the user on an entity or character: authoritative,
used to rewrite text) and *stated* names (read from semantic memories such
as "<face_5>'s name is Lily": evidence, used to recognise names in queries
and to answer name<->character questions).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.control.results import ClipCache
from m3agent.domain import Character, Entity, Memory, MemoryKind, SearchFilter
from m3agent.text import STATED_HINTS, may_state_a_name, stated_names

if TYPE_CHECKING:
    from m3agent.store.protocol import MemoryStore


@dataclass(frozen=True, slots=True)
class NameStatement:
    """A memory stating that ``character`` is called ``name``."""

    character: int
    name: str
    memory: Memory


@dataclass(frozen=True)
class CharacterIndex:
    """Entity/character/name lookups for one question (immutable)."""

    character_of: Mapping[int, int]
    entities_of: Mapping[int, tuple[int, ...]]
    given_names: Mapping[int, str] = field(default_factory=dict)
    statements: tuple[NameStatement, ...] = ()
    entity_tags: Mapping[int, str] = field(default_factory=dict)

    def rewrite(self, text: str) -> str:
        """Memory text with ``<face_i>``/``<voice_j>`` as ``<character_k>`` (token-exact)."""
        return tags.to_characters(text, self.character_of)

    def with_names(self, text: str) -> str:
        """``rewrite`` and then given names in place of their character tags."""
        named = {tags.Tag(tags.TagKind.CHARACTER, cid): name for cid, name in self.given_names.items()}
        return tags.to_names(self.rewrite(text), named)

    def stated_names(self, character: int) -> list[str]:
        """Names memories state for ``character``, most frequently stated first."""
        counts: dict[str, int] = defaultdict(int)
        for statement in self.statements:
            if statement.character == character:
                counts[statement.name] += 1
        return sorted(counts, key=lambda n: (-counts[n], n))

    def name_of(self, character: int) -> str | None:
        """The given name, else the most often stated one, else ``None``."""
        if character in self.given_names:
            return self.given_names[character]
        stated = self.stated_names(character)
        return stated[0] if stated else None

    def characters_named(self, name: str) -> tuple[int, ...]:
        """Characters whose given or stated name (or its first word) equals ``name`` (any case)."""
        wanted = name.casefold()
        found = {cid for cid, given in self.given_names.items() if _matches(given, wanted)}
        found |= {s.character for s in self.statements if _matches(s.name, wanted)}
        return tuple(sorted(found))

    def known_names(self) -> list[str]:
        """Every given and stated name, longest first (so "Anna Lee" wins over "Anna")."""
        names = set(self.given_names.values()) | {s.name for s in self.statements}
        return sorted(names, key=lambda n: (-len(n), n))

    def character_of_tag(self, tag: tags.Tag) -> int | None:
        if tag.kind == tags.TagKind.CHARACTER:
            return tag.id if tag.id in self.entities_of else None
        return self.character_of.get(tag.id)


def build_index(
    store: MemoryStore, *, video_id: str | None = None, before_clip: int | None = None,
    candidates: Sequence[Memory] | None = None,
) -> CharacterIndex:
    """Read characters, entity names and name statements visible at ``before_clip``. Only the semantic
    memories whose text may state a name are read whole: those of the scope, or ``candidates`` (those of the
    whole memory, read by :func:`name_candidates` in the same state) restricted to the scope."""
    characters = store.characters(before_clip=before_clip, video_id=video_id)
    entities = store.entities()
    character_of = {eid: c.id for c in characters for eid in c.entity_ids}
    entities_of = {c.id: tuple(c.entity_ids) for c in characters}
    given = _given_names(entities, characters, character_of)
    entity_tags = {e.id: e.tag for e in entities}
    if candidates is None:
        candidates = name_candidates(store, video_id, before_clip)
    else:
        candidates = [m for m in candidates if _in_scope(m, video_id, before_clip)]
    partial = CharacterIndex(character_of, entities_of, given, (), entity_tags)
    statements = tuple(find_name_statements(candidates, partial))
    return CharacterIndex(character_of, entities_of, given, statements, entity_tags)


def name_candidates(store: MemoryStore, video_id: str | None = None, before_clip: int | None = None) -> list[Memory]:
    """The scope's semantic memories whose text may state a name, in (video, clip, id) order."""
    flt = SearchFilter(
        video_ids=(video_id,) if video_id else None, before_clip=before_clip, kinds=(MemoryKind.SEMANTIC,)
    )
    return store.memories_containing(STATED_HINTS, flt)


def _in_scope(memory: Memory, video_id: str | None, before_clip: int | None) -> bool:
    """Whether ``memory`` passes the filter :func:`name_candidates` reads the scope with."""
    return (not video_id or memory.video_id == video_id) and (before_clip is None or memory.clip_index <= before_clip)


def find_name_statements(memories: Iterable[Memory], index: CharacterIndex) -> list[NameStatement]:
    """Name statements in ``memories`` (text read after rewriting tags to characters)."""
    found = []
    for memory in memories:
        if not may_state_a_name(memory.text):  # most memories: skip the rewrite and the patterns
            continue
        for tag, name in stated_names(index.rewrite(memory.text)):
            if tag.kind == tags.TagKind.CHARACTER:
                found.append(NameStatement(tag.id, name, memory))
    return found


def _given_names(
    entities: Iterable[Entity], characters: Iterable[Character], character_of: Mapping[int, int]
) -> dict[int, str]:
    """Character names set by the user, else the first named entity of the character."""
    given: dict[int, str] = {}
    for entity in entities:
        cid = character_of.get(entity.id)
        if cid is not None and entity.name and cid not in given:
            given[cid] = entity.name
    given.update({c.id: c.name for c in characters if c.name})
    return given


def _matches(name: str, wanted: str) -> bool:
    folded = name.casefold()
    return folded == wanted or folded.split()[0] == wanted


class IndexCache:
    """Character indexes by scope (video, before_clip), each reused while the memory's change stamp holds.
    Building the whole memory's index keeps its name candidates (:func:`name_candidates`) for the stamp, and
    scopes built at that stamp take theirs from them instead of reading their own. Thread-safe: a scope asked
    for by several threads at once is built once."""

    def __init__(self, capacity: int = 64) -> None:
        import threading

        self._capacity = capacity
        self._lock = threading.Lock()
        self._items: dict[tuple[str | None, int | None], tuple[tuple[object, ...], CharacterIndex]] = {}
        self._clips: tuple[tuple[object, ...] | None, ClipCache] = (None, ClipCache())
        self._candidates: tuple[tuple[object, ...] | None, list[Memory]] = (None, [])

    def clips(self, stamp: tuple[object, ...] | None) -> ClipCache:
        """The clip spans read at this stamp (a fresh, unshared one when ``stamp`` is None)."""
        if stamp is None:
            return ClipCache()
        with self._lock:
            if self._clips[0] != stamp:
                self._clips = (stamp, ClipCache())
            return self._clips[1]

    def get(self, store: MemoryStore, video_id: str | None, before_clip: int | None,
            stamp: tuple[object, ...] | None) -> CharacterIndex:
        """The index of the scope; ``stamp`` None (a memory whose changes cannot be seen) builds it anew."""
        if stamp is None:
            return build_index(store, video_id=video_id, before_clip=before_clip)
        key = (video_id, before_clip)
        with self._lock:
            cached = self._items.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            if key == (None, None):
                self._candidates = (stamp, name_candidates(store))
            candidates = self._candidates[1] if self._candidates[0] == stamp else None
            index = build_index(store, video_id=video_id, before_clip=before_clip, candidates=candidates)
            if len(self._items) >= self._capacity:
                self._items.clear()
            self._items[key] = (stamp, index)
            return index
