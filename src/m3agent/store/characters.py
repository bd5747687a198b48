"""Group entities into characters by accepted face-voice links, with stable ids.

Evidence is a log of (face, voice, confidence) in recording order; the latest
record of a pair wins, and a pair is accepted when that record's confidence
is at least the store's ``link_confidence`` (the setting
``perception.link_accept_confidence``; 0 revokes). Groups are the connected
components (union-find). Each entity owns a base character id that is never
reused; a group is named by the smallest base id of its members, so an
entity keeps its character id until its group merges with one holding a
smaller id, and merged characters keep the smaller id. The same rule applied
to the evidence of clips ``<= before_clip`` gives past groupings without
renumbering anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from m3agent.domain import Character


def default_link_confidence() -> float:
    """The default of ``perception.link_accept_confidence``, for a store opened without settings."""
    from m3agent.settings import PerceptionSettings

    return float(PerceptionSettings.model_fields["link_accept_confidence"].default)


class UnionFind:
    """Disjoint sets over integers with path halving and union by size."""

    def __init__(self, items: Iterable[int] = ()) -> None:
        self._parent: dict[int, int] = {}
        self._size: dict[int, int] = {}
        for item in items:
            self.add(item)

    def add(self, item: int) -> None:
        if item not in self._parent:
            self._parent[item] = item
            self._size[item] = 1

    def find(self, item: int) -> int:
        self.add(item)
        parent = self._parent
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self._size[ra] < self._size[rb]:
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._size[ra] += self._size[rb]

    def groups(self) -> list[list[int]]:
        """Members of every set, each sorted, sets ordered by smallest member."""
        by_root: dict[int, list[int]] = {}
        for item in self._parent:
            by_root.setdefault(self.find(item), []).append(item)
        return sorted((sorted(g) for g in by_root.values()), key=lambda g: g[0])


def accepted_pairs(evidence: Iterable[tuple[int, int, float]], accept: float) -> list[tuple[int, int]]:
    """(face, voice) pairs whose latest evidence (last in iteration order) has confidence >= ``accept``."""
    latest: dict[tuple[int, int], float] = {}
    for face, voice, confidence in evidence:
        latest[(face, voice)] = confidence
    return sorted(pair for pair, conf in latest.items() if conf >= accept)


def group_characters(
    entity_ids: Iterable[int],
    evidence: Iterable[tuple[int, int, float]],
    base_ids: Mapping[int, int],
    names: Mapping[int, str] | None,
    accept: float,
) -> list[Character]:
    """Characters over ``entity_ids`` (plus evidence endpoints that have a base id).

    ``evidence`` is (face, voice, confidence) in recording order; ``base_ids`` maps each
    entity to its own base character id; ``names`` gives entity names, the first non-empty
    in entity-id order names the character; links from ``accept`` on join entities.
    """
    uf = UnionFind(e for e in entity_ids if e in base_ids)
    for a, b in accepted_pairs(evidence, accept):
        if a in base_ids and b in base_ids:
            uf.union(a, b)
    names = names or {}
    characters = []
    for members in uf.groups():
        char_id = min(base_ids[e] for e in members)
        name = next((names[e] for e in members if names.get(e)), "")
        characters.append(Character(id=char_id, entity_ids=tuple(members), name=name))
    characters.sort(key=lambda c: c.id)
    return characters
