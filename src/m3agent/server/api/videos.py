"""``/api/videos``: list, get, delete, clips, one clip's memories/faces/voices, and the media file."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import FileResponse

from m3agent import views
from m3agent.errors import NotFoundError
from m3agent.server import service
from m3agent.server.api import schemas
from m3agent.server.deps import Ctx, Limit, Offset

router = APIRouter(prefix="/api/videos", tags=["videos"])
VideoId = Annotated[str, Path(description="video id")]
ClipIndex = Annotated[int, Path(ge=0, le=schemas.MAX_ID)]
MISSING = "missing"  # views.clip_report's status of a clip the store never recorded


@router.get("", response_model=schemas.Page[schemas.VideoOut], summary="List videos")
def list_videos(ctx: Ctx, offset: Offset = 0, limit: Limit = 100) -> schemas.Page[schemas.VideoOut]:
    """Every stored video with its ingest progress, one page at a time."""
    with ctx.stores.read() as store:
        rows = [service.video_out(ctx, store, v) for v in store.videos()]
    return service.page(rows, offset, limit)


@router.get("/{video_id}", response_model=schemas.VideoDetail, summary="One video and its clips")
def get_video(ctx: Ctx, video_id: VideoId) -> schemas.VideoDetail:
    """The video and its clips with their status (404 with a hint when it is not stored)."""
    return service.video_detail(ctx, video_id)


@router.delete("/{video_id}", response_model=schemas.Forgotten, summary="Forget a video and all derived from it")
def delete_video(ctx: Ctx, video_id: VideoId) -> schemas.Forgotten:
    """Delete the video with its clips, observations and memories; irreversible."""
    return service.forget(ctx, schemas.ForgetRequest(video=video_id))


@router.get("/{video_id}/clips/{clip_index}", response_model=schemas.ClipDetail,
            summary="One clip: its memories, faces and voices")
def get_clip(ctx: Ctx, video_id: VideoId, clip_index: ClipIndex) -> schemas.ClipDetail:
    """What the memory holds of one clip: memories (tags resolved), faces grouped by entity, voice lines."""
    with ctx.stores.read() as store:
        report = views.clip_report(store, video_id, clip_index)
    if report["status"] == MISSING:
        raise NotFoundError(f"video {video_id} has no clip {clip_index}", hint="GET /api/videos/{id} lists clips")
    return schemas.ClipDetail.model_validate(report)


@router.get("/{video_id}/media", response_class=FileResponse, summary="The video file (byte ranges supported)",
            responses={200: {"content": {"video/mp4": {}}}, 404: {"model": schemas.Problem}})
def get_media(ctx: Ctx, video_id: VideoId) -> FileResponse:
    """The source file for the inspector's player; only files the server may serve (no path escapes)."""
    with ctx.stores.read() as store:
        video = store.get_video(video_id)
    path = service.media_file(ctx, video)
    if path is None:
        raise NotFoundError(f"the source of {video_id} is not served",
                            hint="only files inside server.allowed_folders or uploaded to this server are served")
    return FileResponse(path, content_disposition_type="inline")
