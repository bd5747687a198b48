"""``/api/jobs``: ingest a server path, an uploaded file or a URL in the background; progress and cancel."""

from __future__ import annotations

import uuid
from pathlib import Path as FsPath
from typing import Annotated

from fastapi import APIRouter, File, Form, Path, UploadFile

from m3agent.errors import AccessDeniedError, ConfigError, MediaError, UnsupportedUploadError, UploadTooLargeError
from m3agent.server import service
from m3agent.server.api import schemas
from m3agent.server.deps import Ctx, Limit, Offset
from m3agent.server.jobs import Job
from m3agent.server.security import confined

router = APIRouter(prefix="/api/jobs", tags=["ingest jobs"])
upload_router = APIRouter(prefix="/api/jobs", tags=["ingest jobs"])  # its own body limit: server.max_upload_mb
JobId = Annotated[str, Path(max_length=64)]
CHUNK = 1 << 20


@router.post("", response_model=Job, status_code=202, summary="Ingest a server-side file or a URL")
def create_job(ctx: Ctx, request: schemas.JobRequest) -> Job:
    """Queue the ingest of a file inside ``server.allowed_folders`` or (if ``server.allow_urls``) an http(s) URL,
    downloaded by the job through the checked fetcher (:mod:`m3agent.server.fetch`)."""
    from m3agent.media import default_video_id
    from m3agent.server.fetch import SCHEMES

    if request.path is not None:
        source, kind = str(confined(request.path, ctx.settings.server.allowed_folders)), "path"
    else:
        assert request.url is not None
        scheme = request.url.partition("://")[0].lower()
        if "://" not in request.url or scheme not in SCHEMES:
            raise ConfigError(f"{request.url!r} is not an http(s) URL",
                              hint=f"use one of the schemes {', '.join(SCHEMES)}, or give a path")
        if not ctx.settings.server.allow_urls:
            raise AccessDeniedError("this server does not download URLs",
                                    hint="upload the file, or set server.allow_urls = true (see the README)")
        source, kind = request.url, "url"
    video_id = request.video_id or (url_video_id(source) if kind == "url" else default_video_id(source))
    return ctx.require_jobs().submit(source, kind, video_id, max_clips=request.max_clips,  # type: ignore[arg-type]
                                     perception_only=request.perception_only, id_derived=not request.video_id)


@upload_router.post("/upload", response_model=Job, status_code=202,
                    summary="Upload a video or audio file and ingest it",
                    responses={413: {"model": schemas.Problem}, 415: {"model": schemas.Problem}})
def upload_job(ctx: Ctx, file: Annotated[UploadFile, File(description="the media file")],
               video_id: Annotated[str | None, Form(min_length=1, max_length=200, pattern=schemas.VIDEO_ID)] = None,
               max_clips: Annotated[int | None, Form(ge=1, le=1_000_000)] = None,
               perception_only: Annotated[bool, Form()] = False) -> Job:
    """Store the upload (refused past ``server.max_upload_mb`` or when unreadable as media) and queue its ingest."""
    from m3agent.media import default_video_id, probe

    name = FsPath(file.filename or "upload").name
    suffix = FsPath(name).suffix.lower()
    if suffix not in ctx.settings.server.upload_extensions:
        raise UnsupportedUploadError(f"{name!r} is not an accepted media file name ({suffix or 'no extension'})")
    target = _save_upload(ctx, file, suffix)
    try:
        probe(str(target))
    except MediaError as exc:
        target.unlink(missing_ok=True)
        raise UnsupportedUploadError(f"{name!r} is not a readable video or audio file: {exc.message}") from None
    return ctx.require_jobs().submit(str(target), "upload", video_id or default_video_id(name),
                                     max_clips=max_clips, perception_only=perception_only, id_derived=not video_id)


def url_video_id(url: str) -> str:
    """A video id usable in API paths for a URL: the file stem of its path, else its host."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return FsPath(parts.path).stem or parts.hostname or "stream"


def _save_upload(ctx: Ctx, file: UploadFile, suffix: str) -> FsPath:
    """Copy the upload into the server's uploads folder, refusing it past ``server.max_upload_mb``."""
    limit = int(ctx.settings.server.max_upload_mb * (1 << 20))
    folder = ctx.data_dir / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{uuid.uuid4().hex}{suffix}"
    written = 0
    try:
        with target.open("wb") as out:
            while chunk := file.file.read(CHUNK):
                written += len(chunk)
                if written > limit:
                    raise UploadTooLargeError(
                        f"the upload exceeds {ctx.settings.server.max_upload_mb:g} MB")
                out.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return target


@router.get("", response_model=schemas.Page[Job], summary="List jobs, newest first")
def list_jobs(ctx: Ctx, offset: Offset = 0, limit: Limit = 100) -> schemas.Page[Job]:
    """The jobs of this server, newest first, finished ones included (the journal keeps them)."""
    return service.page(ctx.require_jobs().all(), offset, limit)


@router.get("/{job_id}", response_model=Job, summary="A job's state and progress (clips done, RTF)")
def get_job(ctx: Ctx, job_id: JobId) -> Job:
    """A job's state and progress; poll it until the state is done, failed or cancelled."""
    return ctx.require_jobs().get(job_id)


@router.post("/{job_id}/cancel", response_model=Job, summary="Cancel a job (a running one stops after its clip)")
def cancel_job(ctx: Ctx, job_id: JobId) -> Job:
    """Cancel a job; the clips it committed stay, and rerunning the source resumes after them."""
    return ctx.require_jobs().cancel(job_id)
