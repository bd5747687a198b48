"""Answering name <-> character questions from names, not from similarity alone.

"What is the name of <character_2>?" is answered from the character's given
name and from memories that state a name for it; "Which character is
Alice?" from the characters whose given or stated name is Alice. Each
answer is a short derived *fact* plus the memories that support it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from m3agent import tags
from m3agent.control.retrieval.query import Intent, ParsedQuery, name_of_targets
from m3agent.control.retrieval.ranking import hybrid_rank
from m3agent.domain import Memory, SearchFilter

if TYPE_CHECKING:
    from m3agent.control.people.characters import CharacterIndex
    from m3agent.embed import Embedder
    from m3agent.store.protocol import MemoryStore


class MemorySearcher(Protocol):
    """What mapping needs of :class:`m3agent.control.retrieval.search.MemorySearcher` (which calls it; no cycle)."""

    store: MemoryStore
    embedder: Embedder
    index: CharacterIndex
    pool: int

    def base_filter(self) -> SearchFilter: ...

    def visible(self, memory: Memory) -> bool: ...

_NAME_PROBE = "name is called named introduces himself herself as"
Mapped = tuple[list[str], list[Memory]]


def answer_mapping(searcher: MemorySearcher, parsed: ParsedQuery, k: int) -> Mapped:
    """``(facts, supporting memories)`` for a NAME_OF or CHARACTER_OF query."""
    if parsed.intent is Intent.NAME_OF:
        targets = name_of_targets(parsed.raw) or parsed.characters
        return _names_of(searcher, targets, k)
    return _characters_of(searcher, parsed)


def _names_of(searcher: MemorySearcher, characters: tuple[int, ...], k: int) -> Mapped:
    index = searcher.index
    facts: list[str] = []
    support: list[Memory] = []
    for cid in characters:
        tag = tags.character(cid)
        if cid in index.given_names:
            facts.append(f"{tag}'s name is {index.given_names[cid]} (given name).")
        statements = [s for s in index.statements if s.character == cid]
        for name in index.stated_names(cid):
            count = sum(1 for s in statements if s.name == name)
            facts.append(f"Memories state that {tag} is called {name} ({count}x).")
        support += [s.memory for s in statements]
        if not statements:
            support += _probe_names(searcher, cid, k)
        if cid not in index.given_names and not statements:
            facts.append(f"No name is known for {tag}; these are memories about {tag}.")
    return facts, _unique(support)


def _probe_names(searcher: MemorySearcher, character: int, k: int) -> list[Memory]:
    """Memories of ``character`` closest to name statements (speech may mention a name)."""
    entity_ids = searcher.index.entities_of.get(character, ())
    if not entity_ids:
        return []
    flt = replace(searcher.base_filter(), entity_ids=entity_ids)
    store, embedder = searcher.store, searcher.embedder
    ranked = hybrid_rank(store, embedder, [_NAME_PROBE], _NAME_PROBE, flt, pool=searcher.pool)
    return [r.memory for r in ranked if searcher.visible(r.memory)][:k]


def _characters_of(searcher: MemorySearcher, parsed: ParsedQuery) -> Mapped:
    index = searcher.index
    facts: list[str] = []
    support: list[Memory] = []
    for name in parsed.names:
        found = index.characters_named(name)
        for cid in found:
            source = "given name" if cid in index.given_names else "stated in memories"
            facts.append(f"{name} is {tags.character(cid)} ({source}).")
            support += [s.memory for s in index.statements if s.character == cid]
        if not found:
            facts.append(f"No character is known by the name {name}.")
    if not parsed.names:
        facts.append("No known name appears in the query; known names: " + _known(searcher) + ".")
    return facts, _unique(support)


def _known(searcher: MemorySearcher) -> str:
    index = searcher.index
    pairs = []
    for name in sorted(index.known_names()):
        ids = ", ".join(tags.character(c) for c in index.characters_named(name))
        pairs.append(f"{name} = {ids}")
    return "; ".join(pairs) or "none"


def _unique(memories: list[Memory]) -> list[Memory]:
    seen: dict[int, Memory] = {}
    for memory in memories:
        seen.setdefault(memory.id, memory)
    return list(seen.values())
