"""MCP tools over a served memory (official ``mcp`` SDK): remember, job_status, recall, ask, forget,
list_characters, rename_character, and the entity-graph tools who_is_at, person_profile, appearances,
people_together, shots and count_people.

The same operations as the REST API (:mod:`m3agent.server.service`). Served
over stdio by ``m3agent mcp`` and over streamable HTTP at ``/mcp`` by
``m3agent serve``. An m3agent error becomes an MCP tool error whose text is
the message followed by the hint (what to do next). Every argument is bounded
as its REST twin bounds it (:mod:`m3agent.server.api.schemas`); arguments that do not
fit are refused with the reason and a hint too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import Field, ValidationError

from m3agent.errors import M3AgentError
from m3agent.server import graph_service, service
from m3agent.server.api import graph_schemas, schemas
from m3agent.server.api.schemas import MAX_ID, MAX_NAME, MAX_SOURCE, MAX_TEXT, NOT_BLANK, VIDEO_ID
from m3agent.server.failures import validation_message
from m3agent.server.jobs import Job

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.mcpserver import MCPServer

    from m3agent.server.context import ServerContext

F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = """A long-term memory of videos: who was seen and heard, what they said and did.
Use `recall` to search memories, `ask` for an answer with cited evidence, `remember` to ingest a new video
(then `job_status`), `list_characters`/`rename_character` to name people, and `forget` to delete.
For exact who/where/when facts read the entity graph: `who_is_at` (a moment), `person_profile`, `appearances`,
`people_together`, `shots` (order of events) and `count_people`. Times are seconds or clock text like 3:10."""

MISSING_HINT = "check the id: list_characters lists people, recall finds memories with their video ids"
ARGUMENTS_HINT = "give arguments that fit the tool's input schema (list_tools shows each one's type and bounds)"
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT, pattern=NOT_BLANK)]
VideoId = Annotated[str | None, Field(max_length=MAX_NAME,
                                      description="restrict to one video id (default: all videos)")]
BeforeClip = Annotated[int | None, Field(ge=0, le=MAX_ID, description="hide clips after this index (inclusive)")]
GraphVideo = Annotated[str, Field(min_length=1, max_length=MAX_NAME,
                                  description="the video id (recall and list results name it)")]
Id = Annotated[int, Field(ge=0, le=MAX_ID)]
PersonRef = Annotated[Id | Annotated[str, Field(min_length=1, max_length=MAX_NAME)],
                      Field(description="a character id (3), a tag (<character_3>, <face_2>, <voice_5>) "
                                        "or a given name")]
Clock = Annotated[float, Field(ge=0, allow_inf_nan=False)] | Annotated[str, Field(max_length=32)]
Time = Annotated[Clock, Field(description="seconds (190) or clock text (3:10) from the video's start")]


def _hinted(func: F) -> F:
    """Turn an m3agent error, or arguments a request schema refuses, into an MCP tool error carrying the
    message and the hint."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except M3AgentError as exc:
            raise ToolError(f"{exc.message}. What to do: {exc.hint or MISSING_HINT}") from None
        except ValidationError as exc:
            raise ToolError(f"{validation_message(exc.errors())}. What to do: {ARGUMENTS_HINT}") from None

    return wrapper  # type: ignore[return-value]


def build_mcp(ctx: ServerContext) -> MCPServer[Any]:
    """The MCP server whose tools act on ``ctx``'s memory (started and stopped by the caller)."""
    from mcp.server.mcpserver import MCPServer

    server: MCPServer[Any] = MCPServer("m3agent", instructions=INSTRUCTIONS)
    for tool in _tools(ctx):
        server.add_tool(_hinted(tool), name=tool.__name__, description=tool.__doc__)
    server.middleware.append(_hint_refused_arguments)
    return server


async def _hint_refused_arguments(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Give a tool error the SDK made itself (arguments the tool's schema refused before the tool ran) the shape
    of ours: the reason, without the values echoed, then "What to do:" and the hint."""
    result = await call_next(ctx)
    if not isinstance(result, dict) or not result.get("isError") or not result.get("content"):
        return result
    first = result["content"][0]
    text = first.get("text") if isinstance(first, dict) else None
    if not isinstance(text, str) or "What to do:" in text:
        return result
    hinted = {**first, "text": f"{_without_echo(text)}. What to do: {ARGUMENTS_HINT}"}
    return {**result, "content": [hinted, *result["content"][1:]]}


def _without_echo(text: str) -> str:
    """A pydantic error text on one line, without the rejected values (``[type=..., input_value=...]``) and links."""
    import re

    text = re.sub(r"\s*\[type=.*?, input_type=\w+\]", "", text, flags=re.S)
    lines = [line.strip() for line in text.splitlines() if line.strip() and "errors.pydantic.dev" not in line]
    return "; ".join(lines).rstrip(".")


def _tools(ctx: ServerContext) -> list[Callable[..., Any]]:
    def remember(
        source: Annotated[str, Field(min_length=1, max_length=MAX_SOURCE,
                                     description="a file inside the server's allowed folders, or an http(s) URL "
                                                 "(when server.allow_urls)")],
        video_id: Annotated[str | None, Field(min_length=1, max_length=MAX_NAME, pattern=VIDEO_ID,
                                              description="id for the video (default: the file name)")] = None,
        max_clips: Annotated[int | None, Field(ge=1, le=1_000_000, description="stop after this many new clips")]
        = None,
    ) -> Job:
        """Ingest (watch) a video or audio source into the memory in the background; returns the job.

        Poll `job_status` with the job id until its state is done; rerunning resumes where it stopped."""
        from m3agent.server.api.jobs import create_job

        is_url = "://" in source
        request = schemas.JobRequest(path=None if is_url else source, url=source if is_url else None,
                                     video_id=video_id, max_clips=max_clips)
        return create_job(ctx, request)

    def job_status(job_id: Annotated[str, Field(max_length=64, description="the id `remember` returned")]) -> Job:
        """State and progress of an ingest job (clips done, real-time factor, error and hint)."""
        return ctx.require_jobs().get(job_id)

    def recall(
        query: Annotated[Text, Field(description="what to look for, in words; names work")],
        k: Annotated[int, Field(ge=1, le=100, description="memories returned")] = 10,
        video_id: VideoId = None,
        before_clip: BeforeClip = None,
    ) -> dict[str, Any]:
        """Search the memory (vector + keyword), grouped by clip, with times and the people involved."""
        return service.search(ctx, schemas.SearchRequest(query=query, k=k, video_id=video_id,
                                                         before_clip=before_clip)).to_dict()

    def ask(
        question: Annotated[Text, Field(description="a question about what the memory saw/heard")],
        video_id: VideoId = None,
        before_clip: BeforeClip = None,
    ) -> dict[str, Any]:
        """Answer a question from the memory; the answer lists the memories it relied on as evidence."""
        answer = service.ask(ctx, schemas.AskRequest(question=question, video_id=video_id, before_clip=before_clip))
        keep = ("text", "answered", "evidence", "clips", "mode", "rounds", "failure")
        return {key: answer[key] for key in keep}

    def forget(
        video: Annotated[str | None, Field(min_length=1, max_length=MAX_NAME, description="a video id to delete")]
        = None,
        entity: Annotated[Id | None, Field(description="an entity id (the N of <face_N>/<voice_N>)")] = None,
        memory: Annotated[Id | None, Field(description="a memory id")] = None,
    ) -> schemas.Forgotten:
        """Delete exactly one video, entity or memory and everything derived from it. Irreversible."""
        try:
            request = schemas.ForgetRequest(video=video, entity=entity, memory=memory)
        except ValueError:
            from m3agent.errors import ConfigError

            raise ConfigError("forget takes exactly one of video, entity, memory",
                              hint="e.g. forget(video='interview')") from None
        return service.forget(ctx, request)

    def list_characters(video_id: VideoId = None) -> list[schemas.CharacterOut]:
        """The people in the memory: each character groups a face and a voice entity, with its name if known."""
        with ctx.stores.read() as store:
            return service.characters(store, video_id)

    def rename_character(
        character_id: Annotated[Id, Field(description="the N of <character_N>")],
        name: Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=NOT_BLANK,
                                   description="the person's name (not blank)")],
    ) -> schemas.CharacterOut:
        """Name a character; answers and memories then use the name."""
        return service.rename_character(ctx, character_id, name)

    return [remember, job_status, recall, ask, forget, list_characters, rename_character, *_graph_tools(ctx)]


def _graph_tools(ctx: ServerContext) -> list[Callable[..., Any]]:
    """The entity-graph operators: exact facts of who is where when, read from faces, voices and shots."""

    def who_is_at(video_id: GraphVideo, time: Time,
                  end: Annotated[Clock | None, Field(description="end of an interval (default: an instant)")]
                  = None) -> graph_schemas.MomentOut:
        """Who is on screen at a moment of a video (left/centre/right, foreground/background), who speaks and
        what they say, the scene's text, objects and sounds, and the shot. Use it for questions about one
        time ("who is on the left at 3:10?", "who speaks at 0:40?")."""
        return graph_service.moment(ctx, video_id, graph_service.seconds(time, "time"),
                                    None if end is None else graph_service.seconds(end, "end"))

    def person_profile(ref: PersonRef) -> graph_schemas.ProfileOut:
        """One person at a glance: their face and voice ids, every appearance in order, the first and the last,
        and measured attributes. Use it for "when does X first/last appear?" and "what does X look like?"."""
        return graph_service.profile(ctx, ref)

    def appearances(ref: PersonRef, video_id: VideoId = None) -> graph_schemas.AppearancesOut:
        """Every interval a person is seen, heard or both, in time order. Use it for "when is X on screen?",
        "how often does X speak?" or to order events around a person."""
        return graph_service.appearances(ctx, ref, video_id)

    def people_together(ref: PersonRef, video_id: VideoId = None) -> graph_schemas.TogetherOut:
        """The other people present while a person is, with the shared intervals. Use it for "who is with X?"
        or "does X ever meet Y?"."""
        return graph_service.together(ctx, ref, video_id)

    def shots(video_id: GraphVideo) -> list[graph_schemas.ShotOut]:
        """The shots of a video in order, each with its span, summary and people. Use it for "what happens
        before/after ...?" and to walk a video scene by scene."""
        return graph_service.shots(ctx, video_id)

    def count_people(video_id: GraphVideo, start: Time = 0.0,
                     end: Annotated[Clock | None, Field(description="default: the end of the video")] = None,
                     ) -> graph_schemas.PeopleCountOut:
        """How many people are in an interval of a video, and who (a voice matched to no face counts only when
        heard with no face on screen). Use it for "how many people are in the room?" rather than counting names
        in search results."""
        return graph_service.count(ctx, video_id, graph_service.seconds(start, "start"),
                                   None if end is None else graph_service.seconds(end, "end"))

    return [who_is_at, person_profile, appearances, people_together, shots, count_people]
