"""The operations the REST API, the MCP tools and the inspector share, over one :class:`ServerContext`.

Reads take a pooled read-only store; edits open a writable store for the
call. Everything returns plain schema values or m3agent domain values.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from m3agent import views
from m3agent.domain import ClipStatus, EntityKind, MemoryKind
from m3agent.errors import EditConflictError, NotFoundError
from m3agent.server.api import schemas
from m3agent.server.security import inside

if TYPE_CHECKING:
    from m3agent.control.results import SearchResult
    from m3agent.domain import Character, Entity, Video
    from m3agent.server.context import ServerContext
    from m3agent.store.protocol import MemoryStore

T = TypeVar("T")
_RENAMES = threading.Lock()  # a versioned rename checks and writes under it: two requests never interleave

# videos -----------------------------------------------------------------------
def video_out(ctx: ServerContext, store: MemoryStore, video: Video) -> schemas.VideoOut:
    """The video with its ingest progress, and whether its file can be streamed."""
    clips = store.clips(video.video_id)
    return schemas.VideoOut(
        video_id=video.video_id, source=video.source, duration_s=video.duration_s, title=video.title,
        clips_done=sum(1 for _, status, _ in clips if status == ClipStatus.DONE), clips_recorded=len(clips),
        playable=media_file(ctx, video) is not None)


def video_detail(ctx: ServerContext, video_id: str) -> schemas.VideoDetail:
    """The video with its clips (:class:`~m3agent.errors.NotFoundError` when it is not stored)."""
    with ctx.stores.read() as store:
        video = store.get_video(video_id)
        base = video_out(ctx, store, video)
        clips = [schemas.ClipOut(index=c.index, start_s=c.start_s, end_s=c.end_s, status=s, reason=r)
                 for c, s, r in store.clips(video_id)]
        return schemas.VideoDetail(**base.model_dump(), clips=clips, memories=len(store.memories(video_id)))


def media_file(ctx: ServerContext, video: Video) -> Path | None:
    """The video's source file, if the server may serve it: inside the allowed folders or its own uploads."""
    if "://" in video.source:
        return None
    path = Path(video.source)
    folders = [*ctx.settings.server.allowed_folders, ctx.data_dir / "uploads"]
    return path.resolve() if path.is_file() and inside(path, folders) else None


# memories and search -----------------------------------------------------------
def memory_out(store: MemoryStore, memory_id: int) -> schemas.MemoryOut:
    """One memory with its tags rewritten to characters and their names."""
    memory = store.get_memory(memory_id)
    character_of, names = views.character_names(store)
    return schemas.MemoryOut(**views.memory_row(memory, character_of, names))


def search(ctx: ServerContext, request: schemas.SearchRequest) -> SearchResult:
    """The hybrid (vector + keyword) search the agent's tools run, with the request's filters."""
    from m3agent.control import MemorySearcher

    with ctx.stores.read() as store:
        if request.video_id is not None:
            store.get_video(request.video_id)
        index = ctx.character_index(store, request.video_id, request.before_clip)
        searcher = MemorySearcher(store, ctx.embedder(store), video_id=request.video_id,
                                  before_clip=request.before_clip, index=index,
                                  min_similarity=ctx.settings.control.min_similarity, clips=ctx.clip_cache())
        return searcher.search(request.tool, request.query, request.k)


def ask(ctx: ServerContext, request: schemas.AskRequest) -> dict[str, Any]:
    """The final Answer's JSON (``Answer.to_dict()``, typed by :class:`~m3agent.server.api.answer_schemas.AnswerOut`),
    computed by an :class:`~m3agent.server.answers.AnswerRun` within ``server.request_timeout_s``."""
    from m3agent.control.answering import run_to_answer
    from m3agent.server.answers import AnswerRun

    return run_to_answer(AnswerRun(ctx, request).start().steps()).to_dict()


def forget(ctx: ServerContext, request: schemas.ForgetRequest) -> schemas.Forgotten:
    """Delete a video, entity or memory with everything derived from it; a video's upload and finished jobs
    go too."""
    with ctx.write() as store:
        if request.video is not None:
            _refuse_while_ingesting(ctx, request.video)
            source = store.get_video(request.video).source
            store.delete_video(request.video)
            ctx.require_jobs().forget_video(request.video, source)
            return schemas.Forgotten(deleted="video", id=request.video)
        if request.entity is not None:
            store.delete_entity(request.entity)
            return schemas.Forgotten(deleted="entity", id=str(request.entity))
        assert request.memory is not None
        store.delete_memory(request.memory)
        return schemas.Forgotten(deleted="memory", id=str(request.memory))


def _refuse_while_ingesting(ctx: ServerContext, video_id: str) -> None:
    """409 while one of this server's own jobs ingests ``video_id``: the job is to be cancelled first."""
    from m3agent.errors import IntegrityError

    job = ctx.require_jobs().active_job_of(video_id)
    if job is not None:
        raise IntegrityError(f"video {video_id!r} is being ingested by this server's job {job.id} ({job.state.value})",
                             hint=f"cancel the job first (POST /api/jobs/{job.id}/cancel), then forget the video")


# entities and characters ----------------------------------------------------------
def entity_out(entity: Entity, character_of: dict[int, int]) -> schemas.EntityOut:
    """The entity as the API shows it; ``character_of`` maps entity ids to their character's id."""
    return schemas.EntityOut(id=entity.id, tag=entity.tag, kind=entity.kind, name=entity.name,
                             video_id=entity.video_id, first_clip=entity.first_clip, last_clip=entity.last_clip,
                             observations=entity.n_observations, character=character_of.get(entity.id))


def entity_detail(ctx: ServerContext, entity_id: int) -> schemas.EntityDetail:
    """The entity with its observations and how many crops or snippets it has (at most 16)."""
    with ctx.stores.read() as store:
        entity = store.get_entity(entity_id)
        character_of, _ = views.character_names(store)
        media = entity_media(store, entity, 16)
        return schemas.EntityDetail(**entity_out(entity, character_of).model_dump(), media=len(media),
                                    observations_list=observations(store, entity))


def entity_media(store: MemoryStore, entity: Entity, limit: int) -> list[bytes]:
    """Face crops (JPEG) of a face entity, voice snippets (WAV) of a voice entity."""
    if entity.kind == EntityKind.FACE:
        return store.entity_crops(entity.id, limit)
    return store.entity_snippets(entity.id, limit)


def observations(store: MemoryStore, entity: Entity) -> list[schemas.ObservationOut]:
    """Every sighting (face) or segment (voice) of ``entity``, in time order, across videos."""
    rows: list[schemas.ObservationOut] = []
    for video in store.videos():
        if entity.kind == EntityKind.FACE:
            rows += [schemas.ObservationOut(id=f.id, video_id=video.video_id, clip_index=f.clip_index,
                                            start_s=f.time_s, end_s=f.time_s)
                     for f in store.faces(video.video_id) if f.entity_id == entity.id]
        else:
            rows += [schemas.ObservationOut(id=v.id, video_id=video.video_id, clip_index=v.clip_index,
                                            start_s=v.start_s, end_s=v.end_s, text=v.text)
                     for v in store.voices(video.video_id) if v.entity_id == entity.id]
    shown = store.observations_with_media(entity.kind, [r.id for r in rows])
    return [r.model_copy(update={"media_url": observation_media_url(entity.kind, r.id)}) if r.id in shown else r
            for r in rows]


def observation_media_url(kind: EntityKind | str, observation_id: int) -> str:
    """Where one observation's crop (face) or snippet (voice) is served."""
    if kind == EntityKind.FACE:
        return f"/api/faces/{observation_id}/crop"
    return f"/api/voices/{observation_id}/audio"


def characters(store: MemoryStore, video_id: str | None = None) -> list[schemas.CharacterOut]:
    """The characters of the memory, or of one video (:class:`~m3agent.errors.NotFoundError` if not stored)."""
    if video_id is not None:
        store.get_video(video_id)
    return [schemas.CharacterOut(**row) for row in views.list_characters(store, video_id)]


def character_detail(ctx: ServerContext, character_id: int) -> schemas.CharacterDetail:
    """A character with its members, semantic facts, episodic event count and appearances."""
    with ctx.stores.read() as store:
        character = _character(store, character_id)
        character_of, names = views.character_names(store)
        members = [entity_out(store.get_entity(e), character_of) for e in character.entity_ids]
        memories = store.memories_of_entities(character.entity_ids)
        facts = [schemas.MemoryOut(**views.memory_row(m, character_of, names))
                 for m in memories if m.kind == MemoryKind.SEMANTIC]
        return schemas.CharacterDetail(
            id=character.id, tag=character.tag, name=character.name, entities=list(character.entity_ids),
            members=members, facts=facts, events=sum(1 for m in memories if m.kind == MemoryKind.EPISODIC),
            appearances=_appearances(store, set(character.entity_ids)))


def _character(store: MemoryStore, character_id: int) -> Character:
    for character in store.characters():
        if character.id == character_id:
            return character
    raise NotFoundError(f"no character {character_id}", hint="list characters with GET /api/characters")


def _appearances(store: MemoryStore, entity_ids: set[int]) -> list[schemas.Appearance]:
    rows = []
    for video in store.videos():
        seen = {f.clip_index for f in store.faces(video.video_id) if f.entity_id in entity_ids}
        seen |= {v.clip_index for v in store.voices(video.video_id) if v.entity_id in entity_ids}
        rows += [schemas.Appearance(video_id=video.video_id, clip_index=clip.index, start_s=clip.start_s,
                                    end_s=clip.end_s)
                 for clip, _, _ in store.clips(video.video_id) if clip.index in seen]
    return rows


def rename_character(ctx: ServerContext, character_id: int, name: str,
                     if_match: str | None = None) -> schemas.CharacterOut:
    """Give every entity of the character the name (a character is named by its members); see
    :func:`rename_versioned` for ``if_match``."""
    return rename_versioned(ctx, character_id, name, if_match)[0]


def rename_versioned(ctx: ServerContext, character_id: int, name: str,
                     if_match: str | None = None) -> tuple[schemas.CharacterOut, str]:
    """Rename the character and return it with the version (ETag) of its new name. With ``if_match`` (the
    If-Match header: an ETag read before, or ``*``) the rename happens only while that version is current,
    else :class:`~m3agent.errors.EditConflictError` and nothing is written: no rename is lost."""
    with _RENAMES, ctx.write() as store:
        character = _character(store, character_id)
        if if_match is not None and not _matches(if_match, _stored_version(store, character)):
            raise EditConflictError(f"{character.tag} was renamed meanwhile, by someone else or in another tab:"
                                    f" it is now {_named(character.name)}; this rename was not saved",
                                    hint=f"GET /api/characters/{character_id} for the name now and its ETag, then"
                                         " send the rename again with that ETag in If-Match")
        for entity_id in character.entity_ids:
            store.rename_entity(entity_id, name.strip())
        renamed = _character(store, character_id)
        out = schemas.CharacterOut(id=renamed.id, tag=renamed.tag, name=renamed.name,
                                   entities=list(renamed.entity_ids))
        return out, _stored_version(store, renamed)


def name_version(names: Iterable[str]) -> str:
    """The version of a character's name as an ETag (quoted): a digest of its members' names, which every
    rename changes."""
    digest = hashlib.sha256(json.dumps(sorted(set(names))).encode()).hexdigest()[:16]
    return f'"{digest}"'


def _stored_version(store: MemoryStore, character: Character) -> str:
    return name_version(store.get_entity(e).name for e in character.entity_ids)


def _matches(if_match: str, current: str) -> bool:
    """Whether an If-Match header holds for ``current``: ``*``, or a list of ETags with ``current`` among them."""
    listed = [tag.strip() for tag in if_match.split(",")]
    return "*" in listed or current in listed


def _named(name: str) -> str:
    return f"named {name!r}" if name else "unnamed"


def page(items: list[T], offset: int, limit: int) -> schemas.Page[T]:
    """``items[offset : offset + limit]`` with the total: every list endpoint pages the same way."""
    return schemas.Page[T](items=items[offset:offset + limit], total=len(items), offset=offset, limit=limit)

