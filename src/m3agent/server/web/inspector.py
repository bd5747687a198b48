"""The web inspector: server-rendered pages (Jinja2) with a little JavaScript, assets inside the package.

Pages: ``/`` videos, ingest (upload or allowed-folder path) and jobs with live
progress and cancel; ``/videos/{id}`` a player with who is on screen now beside it (or a notice
when the browser cannot play the file; opened while its video is ingested, it follows the job and shows each
clip as it is committed), the swimlanes under it (people seen
and speaking, shots still or live, text and sounds; they follow the playhead
and seek on a click: :mod:`m3agent.server.web.swimlanes`) and a paged timeline of
clips (memories filtered by kind and words, faces, voice lines with their own
snippets; a memory or evidence link that seeks keeps the player in view and
marks the memory); ``/people`` (:mod:`m3agent.server.web.people_pages`); ``/characters``
(with the merge history, each side shown as the person with a crop or ▶, and undo:
:mod:`m3agent.server.web.merge_rows`) and ``/characters/{id}`` (crops, snippets,
facts, measured description, appearances, seen with; rename, merge with a
side-by-side check, split, link a voice to a face; the id of a person a merge folded into another says into
whom, with a link and undo); ``/ask`` (streamed rounds,
searches and cited evidence that jump the player to the clip, people named
instead of tagged; recent answers kept in the browser); and
``/login`` when the server has a token. Edits call the REST API from
``static/app.js`` (no inline script or style, so a strict CSP holds); errors
show in the page as ``{error, message, hint}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from m3agent import tags, views
from m3agent.domain import Entity, EntityKind
from m3agent.errors import NotFoundError
from m3agent.server import graph_service, service
from m3agent.server.context import ServerContext
from m3agent.server.deps import Ctx
from m3agent.server.security import TOKEN_COOKIE
from m3agent.server.web.merge_rows import merge_rows, survivor
from m3agent.server.web.pages import HERE, page, render
from m3agent.server.web.playback import unplayable_codecs
from m3agent.server.web.swimlanes import Swimlanes, swimlanes
from m3agent.server.web.timeline import FILTER_KINDS, TimelineQuery, timeline_page
from m3agent.store.protocol import MemoryStore

router = APIRouter(include_in_schema=False)
T = TypeVar("T")
MAX_WORDS = 200  # longest search within a video


def install(app: FastAPI, max_body_size: int | None = None) -> None:
    """Mount the pages (their bodies, the login form, limited to ``max_body_size`` bytes) and ``/static``."""
    from m3agent.server.web import people_pages

    app.include_router(router, max_body_size=max_body_size)
    app.include_router(people_pages.router, max_body_size=max_body_size)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")


@router.get("/", response_class=HTMLResponse)
async def videos_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """The videos, the ingest forms (upload, allowed-folder path) and the latest jobs: the start page."""
    def load() -> dict[str, Any]:
        with ctx.stores.read() as store:
            return {"videos": [service.video_out(ctx, store, v) for v in store.videos()],
                    "jobs": ctx.require_jobs().all()[:10], "server": ctx.settings.server}

    return await page(request, "videos.html", load)


@router.get("/videos/{video_id}", response_class=HTMLResponse)
async def video_page(request: Request, ctx: Ctx, video_id: str, kind: str = "", q: str = "",
                     page_: Annotated[str, Query(alias="page")] = "", t: str = "") -> HTMLResponse:
    """A video's timeline under its player, one page of clips at a time, filtered by kind and by words (a
    bad page number or time shows the first page rather than an error)."""
    query = TimelineQuery(kind=_kind(kind), words=q[:MAX_WORDS], page=_number(page_[:9], int),
                          at_s=_number(t[:20], float))
    return await page(request, "video.html", lambda: _video_data(ctx, video_id, query))


def _kind(text: str) -> str:
    """A kind the timeline filters by (``episodic``, ``semantic``, ``text`` for on-screen text); empty: all."""
    return text if text in FILTER_KINDS else ""


def _number(text: str, kind: Callable[[str], T]) -> T | None:
    """``text`` as a number, None when it is empty or not one (a bad page or time just shows the first page)."""
    try:
        return kind(text) if text else None
    except ValueError:
        return None


def _video_data(ctx: ServerContext, video_id: str, query: TimelineQuery) -> dict[str, Any]:
    detail = service.video_detail(ctx, video_id)
    with ctx.stores.read() as store:
        timeline = timeline_page(store, video_id, query, ctx.settings.server.inspector_clips_per_page)
    with ctx.stores.read() as store:
        path = service.media_file(ctx, store.get_video(video_id))
    return {"video": detail, "timeline": timeline, "query": query, "kinds": FILTER_KINDS,
            "served": path is not None, "unplayable": unplayable_codecs(path) if path is not None else (),
            "lanes": _lanes(ctx, video_id), "job": ctx.require_jobs().active_job_of(video_id)}


def _lanes(ctx: ServerContext, video_id: str) -> Swimlanes | None:
    """The video's swimlanes (people, shots, text and sounds) from the graph the API serves."""
    with graph_service.reading(ctx) as graph:
        stored = graph.store.get_video(video_id)
        return swimlanes(graph, video_id, graph_service.video_end(graph.store, stored))


@router.get("/characters", response_class=HTMLResponse)
async def characters_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Every character with a face crop, to see who the memory knows, and the merge history with undo."""
    def load() -> dict[str, Any]:
        with ctx.stores.read() as store:
            rows = []
            for character in service.characters(store):
                faces = [e for e in character.entities if store.get_entity(e).kind == EntityKind.FACE]
                rows.append({"character": character, "face": faces[0] if faces else None})
            merges = list(reversed(store.entity_merges()))[:50]
        return {"characters": rows, "merges": merge_rows(ctx, merges)}

    return await page(request, "characters.html", load)


@router.get("/characters/{character_id}", response_class=HTMLResponse)
async def character_page(request: Request, ctx: Ctx, character_id: str) -> HTMLResponse:
    """One character's crops, snippets, facts, appearances and the people seen or heard with them, with the forms
    to rename, merge (candidates with their crops or snippets, a warning for people seen together), split and
    link a voice to a face."""
    return await page(request, lambda data: "merged.html" if "merged" in data else "character.html",
                      lambda: _character_or_merged(ctx, _character_id(character_id)))


def _character_or_merged(ctx: ServerContext, character_id: int) -> dict[str, Any]:
    """The character's page data or, when a merge took the id away, where the person went (``merged``)."""
    try:
        return _character_data(ctx, character_id)
    except NotFoundError:
        merged = _merged(ctx, character_id)
        if merged is None:
            raise
        return {"merged": merged}


def _merged(ctx: ServerContext, character_id: int) -> dict[str, Any] | None:
    """The merge in force that folded character ``character_id`` into another, and that character now (its id,
    name and first face); None when no merge explains the missing id."""
    with ctx.stores.read() as store:
        merge = store.merge_of_character(character_id)
        if merge is None:
            return None
        keep = survivor(store.entity_merges(), merge.keep_id)
        character_of, names = views.character_names(store)
        into = character_of.get(keep)
        if into is None:
            return None
        face = next((e for e in _members(store, into) if store.get_entity(e).kind == EntityKind.FACE), None)
    return {"merge": merge, "tag": tags.character(character_id), "into": into, "name": names.get(into, ""),
            "into_tag": tags.character(into), "face": face}


def _members(store: MemoryStore, character_id: int) -> tuple[int, ...]:
    return next((c.entity_ids for c in store.characters() if c.id == character_id), ())


def _character_id(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise NotFoundError(f"no character {text!r}", hint="character ids are numbers: see /characters")
    return int(text)


def _character_data(ctx: ServerContext, character_id: int) -> dict[str, Any]:
    detail = service.character_detail(ctx, character_id)
    members = [service.entity_detail(ctx, e.id) for e in detail.members]
    company = graph_service.together(ctx, character_id).company
    with_us = {c.character_id: ", ".join(f"{s.video_id} {s.span}" for s in c.spans[:5]) for c in company}
    with ctx.stores.read() as store:
        character_of, names = views.character_names(store)
        others = {kind.value: [_candidate(e, character_of, names, with_us) for e in store.entities(kind)
                               if e.id not in detail.entities] for kind in EntityKind}
        durations = {v.video_id: v.duration_s for v in store.videos()}
        merges = [m for m in reversed(store.entity_merges()) if m.keep_id in detail.entities][:50]
    return {"c": detail, "members": members, "others": others, "durations": durations, "company": company,
            "merges": merge_rows(ctx, merges), "name_version": service.name_version(m.name for m in detail.members),
            **_measured(ctx, character_id)}


def _measured(ctx: ServerContext, character_id: int) -> dict[str, Any]:
    """What the graph measured of the character (description, attributes with confidences, first and last seen)
    and each person's first face, for the crops of the people seen with them."""
    from m3agent.server.web.people_pages import person_row

    with graph_service.reading(ctx) as graph:
        person = graph_service.find_person(graph, character_id)
        profile = graph.profile(person)
        faces = {p.character_id: p.face_ids[0] for p in graph.people() if p.face_ids}
        return {"person": person_row(graph, person), "attributes": profile.attributes, "faces": faces}


def _candidate(entity: Entity, character_of: dict[int, int], names: dict[int, str],
               with_us: dict[int, str]) -> dict[str, Any]:
    """An entity this character's could be merged with or linked to: its tag, name and where the two were
    present at once (empty when never)."""
    character = character_of.get(entity.id)
    name = names.get(character, "") if character is not None else ""
    return {"id": entity.id, "tag": entity.tag, "kind": entity.kind.value, "name": entity.name or name,
            "observations": entity.n_observations, "together": with_us.get(character, "") if character else ""}


@router.get("/ask", response_class=HTMLResponse)
async def ask_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """The question form; the answer streams in from ``POST /api/ask/stream``; recent answers stay in the
    browser (localStorage) across reloads."""
    def load() -> dict[str, Any]:
        with ctx.stores.read() as store:
            return {"videos": [v.video_id for v in store.videos()]}

    return await page(request, "ask.html", load)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request) -> HTMLResponse:
    """The token form shown to a browser when the server has a token."""
    return render(request, "login.html", failed=False)


@router.post("/login", response_model=None)
async def login(request: Request, ctx: Ctx, token: Annotated[str, Form()]) -> Response:
    """Check the token and keep it in an HttpOnly, SameSite=Strict cookie for the pages."""
    import secrets

    expected = ctx.settings.server.token
    if expected is None or not secrets.compare_digest(token.encode(), expected.encode()):
        await request.app.state.guesses.failed()
        page = render(request, "login.html", failed=True)
        page.status_code = 401
        return page
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
    return response
