"""The merge history as the inspector shows it: each side of a merge as a person is seen elsewhere in it (the name,
else the People page's description, with a crop or a voice ▶), the tag only as a small link.

An entity a merge in force absorbed is gone: it is shown from what the merge recorded of it (its name then and its
observations, whose crops and snippets are now the kept entity's) and marked merged; its link leads to the
character that holds it now. Nothing is shown that cannot be served (no broken image, no silent ▶).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent import tags, views
from m3agent.domain import EntityKind, EntityMerge
from m3agent.errors import NotFoundError
from m3agent.server import graph_service, service

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Person
    from m3agent.server.context import ServerContext

MAX_TRIED = 200  # observations of an absorbed entity looked at for one with a crop or snippet


@dataclass(frozen=True, slots=True)
class MergeSide:
    """One entity of a merge as a person recognises it: ``name`` (may be empty), ``description`` (the People
    page's), ``media`` the URL of a crop (face) or a snippet (voice) when one can be served, ``href`` the
    character page of who holds it now (None when nobody does), ``merged`` when a merge in force absorbed it."""

    tag: str
    kind: str
    name: str = ""
    description: str = ""
    media: str | None = None
    href: str | None = None
    merged: bool = False

    @property
    def crop(self) -> str | None:
        return self.media if self.kind == EntityKind.FACE else None

    @property
    def audio(self) -> str | None:
        return self.media if self.kind != EntityKind.FACE else None

    @property
    def words(self) -> str:
        """The name, else the description, else what little is known."""
        return self.name or self.description or ("merged" if self.merged else "unnamed")


@dataclass(frozen=True, slots=True)
class MergeRow:
    """A row of the merge history: the record and its two sides."""

    merge: EntityMerge
    keep: MergeSide
    absorbed: MergeSide


def survivor(merges: list[EntityMerge], entity_id: int) -> int:
    """The entity that holds ``entity_id`` now, following merges in force (a kept entity absorbed later)."""
    into = {m.absorbed_id: m.keep_id for m in merges if m.undone_at is None}
    seen = {entity_id}
    while entity_id in into and into[entity_id] not in seen:
        entity_id = into[entity_id]
        seen.add(entity_id)
    return entity_id


def merge_rows(ctx: ServerContext, shown: list[EntityMerge]) -> list[MergeRow]:
    """The rows of ``shown`` (merge records) with each side as a person sees it."""
    if not shown:
        return []
    with graph_service.reading(ctx) as graph:
        return _Sides(graph).rows(shown)


class _Sides:
    """Looks up each side once per request: people's rows, crops and snapshots are cached."""

    def __init__(self, graph: EntityGraph) -> None:
        self.graph = graph
        self.store = graph.store
        self.merges = self.store.entity_merges()
        self.absorber = {m.absorbed_id: m.id for m in self.merges if m.undone_at is None}
        self.person_of = {e: p for p in graph.people() for e in p.entity_ids}
        self.character_of, _ = views.character_names(self.store)
        self.people: dict[int, dict[str, Any]] = {}
        self.sides: dict[int, MergeSide] = {}

    def rows(self, shown: list[EntityMerge]) -> list[MergeRow]:
        return [MergeRow(m, self.side(m.keep_id, m.kind), self.side(m.absorbed_id, m.kind)) for m in shown]

    def side(self, entity_id: int, kind: str) -> MergeSide:
        if entity_id not in self.sides:
            self.sides[entity_id] = self._side(entity_id, kind)
        return self.sides[entity_id]

    def _side(self, entity_id: int, kind: str) -> MergeSide:
        tag = tags.face(entity_id) if kind == EntityKind.FACE else tags.voice(entity_id)
        try:
            entity = self.store.get_entity(entity_id)
        except NotFoundError:
            return self._gone(entity_id, kind, tag)
        person = self.person_of.get(entity_id)
        row = self._person(person) if person is not None else {}
        media = service.entity_media(self.store, entity, 1)
        url = f"/api/entities/{entity_id}/media/0" if media else None
        character = self.character_of.get(entity_id)
        return MergeSide(tag, kind, name=str(row.get("name") or entity.name),
                         description=str(row.get("description", "")), media=url,
                         href=f"/characters/{character}" if character is not None else None)

    def _gone(self, entity_id: int, kind: str, tag: str) -> MergeSide:
        """An entity absorbed by a merge in force, from what that merge recorded; a tag alone when none did."""
        merge_id = self.absorber.get(entity_id)
        recorded = self.store.merged_entity(merge_id) if merge_id is not None else None
        if recorded is None:
            return MergeSide(tag, kind, merged=merge_id is not None)
        tried = recorded.observations[:MAX_TRIED]
        served = self.store.observations_with_media(EntityKind(kind), tried)
        first = next((o for o in tried if o in served), None)
        url = service.observation_media_url(kind, first) if first is not None else None
        character = self.character_of.get(survivor(self.merges, entity_id))
        return MergeSide(tag, kind, name=recorded.name, media=url,
                         href=f"/characters/{character}" if character is not None else None, merged=True)

    def _person(self, person: Person) -> dict[str, Any]:
        """The person as the People page shows them (:func:`~m3agent.server.web.people_pages.person_row`)."""
        from m3agent.server.web.people_pages import person_row

        if person.character_id not in self.people:
            self.people[person.character_id] = person_row(self.graph, person)
        return self.people[person.character_id]

