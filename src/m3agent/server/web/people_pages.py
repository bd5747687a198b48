"""The inspector's People page (``/people``): every person with a face crop or a voice to play, the name or a
measured description, how often and where they appear, first and last seen; filtered by video, named or not
and words, one page at a time. ``/people/{id}`` is the person's page, which is the character page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from m3agent.server import graph_service
from m3agent.server.deps import Ctx
from m3agent.server.web.pages import page

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Appearance, Person, Profile
    from m3agent.server.context import ServerContext

router = APIRouter(include_in_schema=False)
PER_PAGE = 48
MAX_WORDS = 200
NAMED = ("", "named", "unnamed")


@dataclass(frozen=True)
class PeopleQuery:
    """The People page's filters: one video (empty: all), named or unnamed (empty: both), words, the page."""

    video: str = ""
    named: str = ""
    words: str = ""
    page: int = 1

    @property
    def filtered(self) -> bool:
        return bool(self.video or self.named or self.words)

    def link(self, page: int) -> dict[str, Any]:
        """The query string of ``page`` under the same filters."""
        return {"video": self.video, "named": self.named, "q": self.words, "page": page}


@router.get("/people", response_class=HTMLResponse)
async def people_page(request: Request, ctx: Ctx, video: str = "", named: str = "", q: str = "",
                      page_: Annotated[str, Query(alias="page")] = "") -> HTMLResponse:
    """Every person of the memory, filtered and paged (a bad filter or page shows everyone's first page)."""
    number = int(page_) if page_[:9].isascii() and page_[:9].isdigit() else 1
    query = PeopleQuery(video[:500], named if named in NAMED else "", q[:MAX_WORDS].strip(), max(1, number))
    return await page(request, "people.html", lambda: people_data(ctx, query))


@router.get("/people/{character_id}", response_class=RedirectResponse)
async def person_page(character_id: str) -> RedirectResponse:
    """A person's page is their character page (measured description, appearances, seen with, edits)."""
    from urllib.parse import quote

    return RedirectResponse(f"/characters/{quote(character_id[:40], safe='')}", status_code=303)


def people_data(ctx: ServerContext, query: PeopleQuery) -> dict[str, Any]:
    """The page's rows (each a :func:`person_row`), the videos to filter by, and the paging."""
    with graph_service.reading(ctx) as graph:
        rows = [person_row(graph, p) for p in graph.people()]
        videos = [v.video_id for v in graph.store.videos()]
    rows.sort(key=lambda r: (-r["count"], r["id"]))
    shown = [r for r in rows if _matches(r, query)]
    pages = max(1, -(-len(shown) // PER_PAGE))
    number = min(query.page, pages)
    return {"people": shown[(number - 1) * PER_PAGE:number * PER_PAGE], "total": len(rows), "matched": len(shown),
            "page": number, "pages": pages, "query": query, "videos": videos}


def person_row(graph: EntityGraph, person: Person) -> dict[str, Any]:
    """A person as the People page shows them: crop or voice, name or description, appearances and videos."""
    profile = graph.profile(person)
    found = profile.appearances
    return {"id": person.character_id, "tag": person.tag, "name": person.name,
            "description": description(graph, person, profile),
            "face": person.face_ids[0] if person.face_ids else None,
            "voice": person.voice_ids[0] if person.voice_ids else None,
            "count": len(found), "videos": list(dict.fromkeys(a.video_id for a in found)),
            "first": _seen(profile.first), "last": _seen(profile.last)}


def description(graph: EntityGraph, person: Person, profile: Profile) -> str:
    """The measured phrase ("a low voice; usually on the left; appears male"), else how answers describe them
    ("the man on the left", "an unseen speaker"); empty when nothing tells them apart."""
    from m3agent.control.people.words import UNDESCRIBED, described

    words = profile.describe() or described(graph, person)
    return "" if words == UNDESCRIBED else words


def _seen(appearance: Appearance | None) -> dict[str, Any] | None:
    if appearance is None:
        return None
    return {"video_id": appearance.video_id, "start_s": appearance.start_s, "span": appearance.to_dict()["span"]}


def _matches(row: dict[str, Any], query: PeopleQuery) -> bool:
    if query.video and query.video not in row["videos"]:
        return False
    if query.named and (query.named == "named") != bool(row["name"]):
        return False
    text = f"{row['name']} {row['description']} {row['tag']}".lower()
    return all(word in text for word in query.words.lower().split())
