"""``/api/memories``, ``/api/search``, ``/api/ask`` (JSON and SSE) and ``/api/forget``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from concurrent.futures.process import BrokenProcessPool
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from m3agent import views
from m3agent.domain import MemoryKind, SearchFilter
from m3agent.errors import M3AgentError
from m3agent.server import answers, service
from m3agent.server.api import answer_schemas, schemas
from m3agent.server.deps import Ctx, Limit, Offset
from m3agent.server.failures import error_body

router = APIRouter(tags=["memories, search and ask"])
MemoryId = Annotated[int, Path(ge=0, le=schemas.MAX_ID)]


@router.get("/api/memories", response_model=schemas.Page[schemas.MemoryOut], summary="List memories")
def list_memories(ctx: Ctx, video_id: Annotated[str | None, Query()] = None,
                  clip: Annotated[int | None, Query(ge=0, le=schemas.MAX_ID)] = None,
                  kind: Annotated[MemoryKind | None, Query()] = None,
                  offset: Offset = 0, limit: Limit = 100) -> schemas.Page[schemas.MemoryOut]:
    """Memories of the memory, one video or one clip, optionally of one kind, in store order."""
    flt = SearchFilter(kinds=(kind,)) if kind else None
    with ctx.stores.read() as store:
        if video_id is not None:
            store.get_video(video_id)
        memories = store.memories(video_id, clip, flt)
        character_of, names = views.character_names(store)
        rows = [schemas.MemoryOut(**views.memory_row(m, character_of, names))
                for m in memories[offset:offset + limit]]
    return schemas.Page[schemas.MemoryOut](items=rows, total=len(memories), offset=offset, limit=limit)


@router.get("/api/memories/{memory_id}", response_model=schemas.MemoryOut, summary="One memory")
def get_memory(ctx: Ctx, memory_id: MemoryId) -> schemas.MemoryOut:
    """One memory with its tags resolved to characters and names."""
    with ctx.stores.read() as store:
        return service.memory_out(store, memory_id)


@router.delete("/api/memories/{memory_id}", response_model=schemas.Forgotten, summary="Forget a memory")
def delete_memory(ctx: Ctx, memory_id: MemoryId) -> schemas.Forgotten:
    """Delete one memory (a wrong or private one); irreversible."""
    return service.forget(ctx, schemas.ForgetRequest(memory=memory_id))


@router.post("/api/search", response_model=answer_schemas.SearchOut, response_model_exclude_unset=True,
             summary="Hybrid (vector + keyword) memory search, as the agent's search tools run it")
async def search(ctx: Ctx, body: schemas.SearchRequest) -> answer_schemas.SearchOut:
    """What the agent's search tool would see for the query: hits grouped by clip, with scores.

    Fields left unset (a clip's ``date`` when it has none) stay out of the JSON, as in ``to_dict()``.
    Answered by a search worker process when ``server.search_workers`` are running, else in a thread."""
    pool = ctx.search_pool
    if pool is not None:
        try:
            found = await asyncio.wrap_future(pool.search(body))
            return answer_schemas.SearchOut.model_validate(found)
        except BrokenProcessPool:  # a worker died (killed, out of memory): answer here from now on
            ctx.search_pool = None
    found = (await run_in_threadpool(service.search, ctx, body)).to_dict()
    return answer_schemas.SearchOut.model_validate(found)


@router.post("/api/ask", response_model=answer_schemas.AnswerOut, response_model_exclude_unset=True,
             summary="Answer a question with cited evidence")
def ask(ctx: Ctx, body: schemas.AskRequest) -> answer_schemas.AnswerOut:
    """The answer of ``m3agent ask`` with its searches and the evidence it relied on (clips to jump to)."""
    return answer_schemas.AnswerOut.model_validate(service.ask(ctx, body))


@router.post("/api/ask/stream", response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}},
             summary="Answer as Server-Sent Events: one event per step (thought, action, observation, answer)")
async def ask_stream(ctx: Ctx, body: schemas.AskRequest) -> StreamingResponse:
    """Each step as it happens, so a client shows progress; the last event, ``answer``, is the body of
    ``POST /api/ask``. An unknown video is a 404 before the stream starts."""
    if body.video_id is not None:
        await run_in_threadpool(_check_video, ctx, body.video_id)
    return StreamingResponse(_events(ctx, body), media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})


def _check_video(ctx: Ctx, video_id: str) -> None:
    with ctx.stores.read() as store:
        store.get_video(video_id)


async def _events(ctx: Ctx, body: schemas.AskRequest) -> AsyncIterator[str]:
    """SSE frames; an error after the stream began is sent as an ``error`` event, then the stream ends. A client
    that hangs up cancels the answer (see :mod:`m3agent.server.answers`)."""
    try:
        async for step in answers.stream(ctx, body):
            data = step.to_dict()
            yield f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"
    except M3AgentError as exc:
        yield f"event: error\ndata: {json.dumps(error_body(exc))}\n\n"


@router.post("/api/forget", response_model=schemas.Forgotten,
             summary="Forget a video, an entity or a memory, and everything derived from it")
def forget(ctx: Ctx, body: schemas.ForgetRequest) -> schemas.Forgotten:
    """Delete exactly one video, entity or memory with everything derived from it; irreversible."""
    return service.forget(ctx, body)
