"""``/api/entities``, ``/api/characters``, ``/api/merges``, ``/api/links`` and ``/api/voices``: who is in the
memory; crops, snippets (per voice and per utterance), rename, merge (recorded, undoable), split, and links of a
face to a voice made by hand."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import Response

from m3agent import tags, views
from m3agent.domain import EntityKind
from m3agent.errors import NotFoundError
from m3agent.server import service
from m3agent.server.api import schemas
from m3agent.server.deps import Ctx, Limit, Offset

router = APIRouter(tags=["entities and characters"])
EntityId = Annotated[int, Path(ge=0, le=schemas.MAX_ID, description="the N of <face_N>/<voice_N>")]
MergeId = Annotated[int, Path(ge=0, le=schemas.MAX_ID, description="the id of a recorded merge")]
CharacterId = Annotated[int, Path(ge=0, le=schemas.MAX_ID, description="the N of <character_N>")]
VoiceId = Annotated[int, Path(ge=0, le=schemas.MAX_ID, description="a voice segment's id (GET .../clips/{n})")]
FaceId = Annotated[int, Path(ge=0, le=schemas.MAX_ID, description="a face observation's id (GET /api/entities/{id})")]
MediaIndex = Annotated[int, Path(ge=0, le=15)]
IfMatch = Annotated[str | None, Header(max_length=1000, description="the ETag the client read (or *): rename "
                                       "only if the name is still that version, else 412")]
MEDIA: dict[int | str, dict[str, Any]] = {
    200: {"content": {"image/jpeg": {}, "audio/wav": {}}}, 404: {"model": schemas.Problem}}
WAV: dict[int | str, dict[str, Any]] = {200: {"content": {"audio/wav": {}}}, 404: {"model": schemas.Problem}}
JPEG: dict[int | str, dict[str, Any]] = {200: {"content": {"image/jpeg": {}}}, 404: {"model": schemas.Problem}}


@router.get("/api/entities", response_model=schemas.Page[schemas.EntityOut], summary="List face/voice entities")
def list_entities(ctx: Ctx, kind: Annotated[EntityKind | None, Query()] = None,
                  offset: Offset = 0, limit: Limit = 100) -> schemas.Page[schemas.EntityOut]:
    """Every face and/or voice entity with its character, one page at a time."""
    with ctx.stores.read() as store:
        character_of, _ = views.character_names(store)
        rows = [service.entity_out(e, character_of) for e in store.entities(kind)]
    return service.page(rows, offset, limit)


@router.get("/api/entities/{entity_id}", response_model=schemas.EntityDetail,
            summary="One entity with its observations (the ids a split takes)")
def get_entity(ctx: Ctx, entity_id: EntityId) -> schemas.EntityDetail:
    """The entity with its observations, whose ids a split takes."""
    return service.entity_detail(ctx, entity_id)


@router.get("/api/entities/{entity_id}/media/{index}", response_class=Response, responses=MEDIA,
            summary="Face crop N (JPEG) of a face entity, or voice snippet N (WAV) of a voice entity")
def get_entity_media(ctx: Ctx, entity_id: EntityId, index: MediaIndex) -> Response:
    """Crop or snippet ``index``, so a person can tell who an entity is; not cached (it changes on merges)."""
    with ctx.stores.read() as store:
        entity = store.get_entity(entity_id)
        media = service.entity_media(store, entity, index + 1)
    if index >= len(media):
        what = "face crop" if entity.kind == EntityKind.FACE else "voice snippet"
        raise NotFoundError(f"{entity.tag} has no {what} {index}", hint="GET /api/entities/{id} says how many")
    media_type = "image/jpeg" if entity.kind == EntityKind.FACE else "audio/wav"
    return Response(media[index], media_type=media_type, headers={"cache-control": "no-store"})


@router.patch("/api/entities/{entity_id}", response_model=schemas.EntityOut, summary="Rename an entity")
def rename_entity(ctx: Ctx, entity_id: EntityId, body: schemas.Rename) -> schemas.EntityOut:
    """Name the entity; memories and answers then show the name."""
    with ctx.write() as store:
        store.rename_entity(entity_id, body.name.strip())
        character_of, _ = views.character_names(store)
        return service.entity_out(store.get_entity(entity_id), character_of)


@router.post("/api/entities/{entity_id}/merge", response_model=schemas.EntityOut,
             summary="Fold another entity into this one (the same person recognised twice)")
def merge_entity(ctx: Ctx, entity_id: EntityId, body: schemas.Merge) -> schemas.EntityOut:
    """Fold ``absorb`` into this entity (409 when it cannot be, e.g. itself); recorded, so it can be undone."""
    with ctx.write() as store:
        store.merge_entities(entity_id, body.absorb)
        character_of, _ = views.character_names(store)
        return service.entity_out(store.get_entity(entity_id), character_of)


@router.get("/api/merges", response_model=schemas.Page[schemas.MergeOut],
            summary="Recorded entity merges, automatic ones with their evidence")
def list_merges(ctx: Ctx, offset: Offset = 0, limit: Limit = 100) -> schemas.Page[schemas.MergeOut]:
    """The merge log, automatic merges with the evidence that decided them, so wrong ones can be undone."""
    with ctx.stores.read() as store:
        rows = [schemas.MergeOut(id=m.id, keep=m.keep_id, absorbed=m.absorbed_id, kind=m.kind,
                                 source=m.source, evidence=m.evidence, video_id=m.video_id, clip_index=m.clip_index,
                                 created_at=m.created_at, undone_at=m.undone_at) for m in store.entity_merges()]
    return service.page(rows, offset, limit)


@router.post("/api/merges/{merge_id}/undo", response_model=schemas.EntityOut,
             summary="Undo a recorded merge: the absorbed entity comes back under its old id")
def undo_merge(ctx: Ctx, merge_id: MergeId) -> schemas.EntityOut:
    """Bring the absorbed entity back under its old id (409 when already undone)."""
    with ctx.write() as store:
        restored = store.undo_merge(merge_id)
        character_of, _ = views.character_names(store)
        return service.entity_out(restored, character_of)


@router.post("/api/entities/{entity_id}/split", response_model=schemas.EntityOut, status_code=201,
             summary="Move observations to a new entity (two people taken for one); returns the new entity")
def split_entity(ctx: Ctx, entity_id: EntityId, body: schemas.Split) -> schemas.EntityOut:
    """Move the given observations to a new entity of the same kind and return it."""
    with ctx.write() as store:
        new = store.split_entity(entity_id, body.observation_ids)
        character_of, _ = views.character_names(store)
        return service.entity_out(new, character_of)


@router.post("/api/links", response_model=schemas.CharacterOut, status_code=201,
             summary="Link a face to a voice by hand (the same person): one character from then on")
def link_entities(ctx: Ctx, body: schemas.Link) -> schemas.CharacterOut:
    """Record that the face and the voice are one person (409 when the ids are not a face and a voice) and
    return the character that now holds both."""
    from m3agent.domain import FaceVoiceLink, LinkSource

    with ctx.write() as store:
        store.link_entities(FaceVoiceLink(body.face, body.voice, 1.0, LinkSource.MANUAL, "linked by hand"))
        for character in service.characters(store):
            if body.face in character.entities:
                return character
    raise NotFoundError(f"{tags.face(body.face)} belongs to no character after the link",
                        hint="the link needs perception.link_accept_confidence <= 1; check the settings")


@router.get("/api/voices/{voice_id}/audio", response_class=Response, responses=WAV,
            summary="The snippet (WAV) kept with one voice segment: that line, as it was said")
def get_voice_audio(ctx: Ctx, voice_id: VoiceId) -> Response:
    """The audio of one voice segment (an utterance), as stored at ingest."""
    with ctx.stores.read() as store:
        audio = store.voice_audio(voice_id)
    if audio is None:
        raise NotFoundError(f"voice segment {voice_id} kept no audio",
                            hint="play the clip in the video player, or the voice's snippets on its character page")
    return Response(audio, media_type="audio/wav", headers={"cache-control": "no-store"})


@router.get("/api/faces/{face_id}/crop", response_class=Response, responses=JPEG,
            summary="The crop (JPEG) of one face observation: its own, else its track's nearest in the clip")
def get_face_crop(ctx: Ctx, face_id: FaceId) -> Response:
    """The face of one sighting, as a split shows it (only a track's chosen frames keep a crop of their own)."""
    with ctx.stores.read() as store:
        crop = store.face_crop(face_id)
    if crop is None:
        raise NotFoundError(f"face observation {face_id} kept no crop",
                            hint="the entity's best crops are on its character page")
    return Response(crop, media_type="image/jpeg", headers={"cache-control": "no-store"})


@router.delete("/api/entities/{entity_id}", response_model=schemas.Forgotten, summary="Forget an entity")
def delete_entity(ctx: Ctx, entity_id: EntityId) -> schemas.Forgotten:
    """Delete the entity and what derives from it; irreversible."""
    return service.forget(ctx, schemas.ForgetRequest(entity=entity_id))


@router.get("/api/characters", response_model=schemas.Page[schemas.CharacterOut],
            summary="Characters: entities linked face-to-voice into one person")
def list_characters(ctx: Ctx, video_id: Annotated[str | None, Query()] = None,
                    offset: Offset = 0, limit: Limit = 100) -> schemas.Page[schemas.CharacterOut]:
    """The characters of the memory, or of one video, one page at a time."""
    with ctx.stores.read() as store:
        rows = service.characters(store, video_id)
    return service.page(rows, offset, limit)


@router.get("/api/characters/{character_id}", response_model=schemas.CharacterDetail,
            summary="A character: its faces and voices, facts, and appearances across videos")
def get_character(ctx: Ctx, character_id: CharacterId, response: Response) -> schemas.CharacterDetail:
    """Everything known of one person: members, facts, how many events name them, where they appear. The
    ETag header is the version of the name, for a rename's If-Match."""
    detail = service.character_detail(ctx, character_id)
    response.headers["etag"] = service.name_version(m.name for m in detail.members)
    return detail


@router.patch("/api/characters/{character_id}", response_model=schemas.CharacterOut,
              summary="Rename a character (all its entities); If-Match guards against lost updates",
              responses={412: {"model": schemas.Problem, "description": "renamed meanwhile: nothing was written"}})
def rename_character(ctx: Ctx, character_id: CharacterId, body: schemas.Rename, response: Response,
                     if_match: IfMatch = None) -> schemas.CharacterOut:
    """Give every entity of the character the name (a character is named by its members). With If-Match (the
    ETag of ``GET /api/characters/{id}`` or of an earlier rename) the rename is refused with 412 when the name
    changed since; without it the rename always applies, as before. The answer's ETag is the new version."""
    renamed, version = service.rename_versioned(ctx, character_id, body.name, if_match)
    response.headers["etag"] = version
    return renamed
