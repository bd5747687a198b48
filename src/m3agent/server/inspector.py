"""The web inspector: server-rendered pages (Jinja2) with a little JavaScript, assets inside the package.

Pages: ``/`` videos, ``/videos/{id}`` a timeline of clips (memories, faces,
voices) under a player, ``/characters`` and ``/characters/{id}`` (crops,
snippets, facts, appearances; rename, merge, split), ``/ask`` (streamed
rounds, searches and cited evidence that jump the player to the clip),
and ``/login`` when the server has a token. Edits call the REST API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from m3agent import __version__, tags, views
from m3agent.domain import EntityKind
from m3agent.server import graph_service, service
from m3agent.server.context import ServerContext
from m3agent.server.deps import Ctx
from m3agent.server.security import TOKEN_COOKIE

HERE = Path(__file__).parent
router = APIRouter(include_in_schema=False)


def install(app: FastAPI, max_body_size: int | None = None) -> None:
    """Mount the pages (their bodies, the login form, limited to ``max_body_size`` bytes) and ``/static``."""
    app.include_router(router, max_body_size=max_body_size)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")


def _templates() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    env.filters["clock"] = _time_or_unknown
    env.globals.update(character_tag=tags.character, voice_tag=tags.voice)
    return env


_ENV: list[Any] = []


def render(request: Request, name: str, **data: Any) -> HTMLResponse:
    """Template ``name`` filled with ``data`` (autoescaped); the environment is built on first use."""
    if not _ENV:
        _ENV.append(_templates())
    html = _ENV[0].get_template(name).render(request=request, version=__version__, **data)
    return HTMLResponse(html)


def _time_or_unknown(seconds: float | None) -> str:
    from m3agent.text import clock

    return "?" if seconds is None else clock(seconds)


@router.get("/", response_class=HTMLResponse)
async def videos_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """The videos and the latest jobs: the inspector's start page."""
    def load() -> dict[str, Any]:
        with ctx.stores.read() as store:
            return {"videos": [service.video_out(ctx, store, v) for v in store.videos()],
                    "jobs": ctx.require_jobs().all()[:10]}

    return render(request, "videos.html", **await run_in_threadpool(load))


@router.get("/videos/{video_id}", response_class=HTMLResponse)
async def video_page(request: Request, ctx: Ctx, video_id: str) -> HTMLResponse:
    """A video's timeline of clips (memories, faces, voices) under its player."""
    return render(request, "video.html", **await run_in_threadpool(_video_data, ctx, video_id))


def _video_data(ctx: ServerContext, video_id: str) -> dict[str, Any]:
    detail = service.video_detail(ctx, video_id)
    with ctx.stores.read() as store:
        _, names = views.character_names(store, video_id)
        clips = [views.clip_report(store, video_id, clip.index) for clip in detail.clips]
    return {"video": detail, "clips": clips, "names": names}


@router.get("/characters", response_class=HTMLResponse)
async def characters_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Every character with a face crop, to see who the memory knows."""
    def load() -> dict[str, Any]:
        with ctx.stores.read() as store:
            rows = []
            for character in service.characters(store):
                faces = [e for e in character.entities if store.get_entity(e).kind == EntityKind.FACE]
                rows.append({"character": character, "face": faces[0] if faces else None})
            return {"characters": rows}

    return render(request, "characters.html", **await run_in_threadpool(load))


@router.get("/characters/{character_id}", response_class=HTMLResponse)
async def character_page(request: Request, ctx: Ctx, character_id: int) -> HTMLResponse:
    """One character's crops, snippets, facts, appearances and the people seen or heard with them, with the forms
    to rename, merge and split."""
    def load() -> dict[str, Any]:
        detail = service.character_detail(ctx, character_id)
        members = [service.entity_detail(ctx, e.id) for e in detail.members]
        with ctx.stores.read() as store:
            others = {kind.value: [e for e in store.entities(kind) if e.id not in detail.entities]
                      for kind in EntityKind}
            durations = {v.video_id: v.duration_s for v in store.videos()}
        company = graph_service.together(ctx, character_id).company
        return {"c": detail, "members": members, "others": others, "durations": durations, "company": company}

    return render(request, "character.html", **await run_in_threadpool(load))


@router.get("/ask", response_class=HTMLResponse)
async def ask_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """The question form; the answer streams in from ``POST /api/ask/stream``."""
    def load() -> dict[str, Any]:
        with ctx.stores.read() as store:
            return {"videos": [v.video_id for v in store.videos()]}

    return render(request, "ask.html", **await run_in_threadpool(load))


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
        page = render(request, "login.html", failed=True)
        page.status_code = 401
        return page
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
    return response
