"""``/api/people`` and ``/api/videos/{id}/at|shots|count``: the entity-graph operators over HTTP (who is where
when, with whom, how many, and the shots in order).

Times are seconds (``190``) or clock text (``3:10``). A time past the end of its video, or an interval that
ends before it starts, is a 422 with a hint; an unknown video or person a 404 with a hint.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from m3agent.errors import UnfitRequestError
from m3agent.server import graph_service, service
from m3agent.server.api import graph_schemas as gs
from m3agent.server.api import schemas
from m3agent.server.deps import Ctx, Limit, Offset

router = APIRouter(tags=["people, moments and shots"])
VideoId = Annotated[str, Path(description="video id")]
PersonRef = Annotated[str, Path(min_length=1, max_length=200,
                                description="a character id (3), a tag (<character_3>, face_2, <voice_5>) "
                                            "or a given name")]
OneVideo = Annotated[str | None, Query(description="one video only (default: all videos)")]


def _time(description: str) -> Any:
    return Query(pattern=graph_service.TIME_PATTERN, max_length=32, description=description,
                 examples=["190", "3:10"])


TimeAt = Annotated[str | None, _time("an instant: seconds or clock text")]
Start = Annotated[str | None, _time("start of an interval: seconds or clock text")]
End = Annotated[str | None, _time("end of the interval (default: the start, or the video's end for counts)")]
UNFIT: dict[int | str, dict[str, Any]] = {422: {
    "description": "a time outside the video or an unreadable parameter",
    "content": {"application/json": {"schema": {"anyOf": [{"$ref": "#/components/schemas/Problem"},
                                                          {"$ref": "#/components/schemas/HTTPValidationError"}]}}}}}


@router.get("/api/people", response_model=schemas.Page[gs.PersonOut],
            summary="People: characters (linked faces and voices) by id")
def list_people(ctx: Ctx, offset: Offset = 0, limit: Limit = 100) -> schemas.Page[gs.PersonOut]:
    """Every person of the memory with their face and voice entities, one page at a time."""
    return service.page(graph_service.people(ctx), offset, limit)


@router.get("/api/people/{ref}", response_model=gs.ProfileOut,
            summary="A person's profile: appearances in order, first and last, attributes")
def get_person(ctx: Ctx, ref: PersonRef) -> gs.ProfileOut:
    """The person named by id, tag or given name, at a glance (404 with a hint when no one is)."""
    return graph_service.profile(ctx, ref)


@router.get("/api/people/{ref}/appearances", response_model=gs.AppearancesOut,
            summary="When a person is seen or heard, in time order")
def get_appearances(ctx: Ctx, ref: PersonRef, video_id: OneVideo = None) -> gs.AppearancesOut:
    """Every interval the person is seen (face), heard (voice) or both, over all videos or one."""
    return graph_service.appearances(ctx, ref, video_id)


@router.get("/api/people/{ref}/together", response_model=gs.TogetherOut,
            summary="Who is present while a person is, and when")
def get_together(ctx: Ctx, ref: PersonRef, video_id: OneVideo = None) -> gs.TogetherOut:
    """The other people seen or heard during the person's appearances, with the shared intervals."""
    return graph_service.together(ctx, ref, video_id)


@router.get("/api/videos/{video_id}/at", response_model=gs.MomentOut, responses=UNFIT,
            summary="Who is on screen (left/centre/right) and who speaks at a time of a video")
def get_moment(ctx: Ctx, video_id: VideoId, t: TimeAt = None, start: Start = None,
               end: End = None) -> gs.MomentOut:
    """At the instant ``t``, or in ``start``–``end``: the people on screen with their frame position, the
    speech, the scene's text, objects and sounds, and the shot."""
    if (t is None) == (start is None):
        raise UnfitRequestError("give t (an instant) or start, with an optional end (an interval)",
                                hint="e.g. ?t=3:10 or ?start=3:00&end=3:20")
    if t is not None and end is not None:
        raise UnfitRequestError("end goes with start, not with t", hint="e.g. ?start=3:00&end=3:20")
    begin = graph_service.seconds(t if t is not None else start or "", "t" if t is not None else "start")
    return graph_service.moment(ctx, video_id, begin, None if end is None else graph_service.seconds(end, "end"))


@router.get("/api/videos/{video_id}/shots", response_model=schemas.Page[gs.ShotOut],
            summary="The shots of a video in order")
def list_shots(ctx: Ctx, video_id: VideoId, offset: Offset = 0, limit: Limit = 100) -> schemas.Page[gs.ShotOut]:
    """The video's shots from index 0 with their spans, summaries and people; empty before scene senses ran."""
    return service.page(graph_service.shots(ctx, video_id), offset, limit)


@router.get("/api/videos/{video_id}/count", response_model=gs.PeopleCountOut, responses=UNFIT,
            summary="How many distinct people are seen or heard in an interval")
def count_people(ctx: Ctx, video_id: VideoId, start: Start = None, end: End = None) -> gs.PeopleCountOut:
    """How many people are in ``start`` (default 0:00) to ``end`` (default: the video's end): everyone seen,
    everyone heard whose voice is linked to a face, and a voice linked to no face only when some of its speech
    has no face on screen (``not_counted`` lists the voices left out)."""
    begin = 0.0 if start is None else graph_service.seconds(start, "start")
    return graph_service.count(ctx, video_id, begin, None if end is None else graph_service.seconds(end, "end"))
