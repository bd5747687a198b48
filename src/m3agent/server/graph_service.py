"""The entity-graph operations the REST API and the MCP tools share: people, profiles, appearances, company,
moments, shots and counts, as :mod:`m3agent.server.api.graph_schemas` bodies.

Each call builds its own :class:`~m3agent.graph.operators.EntityGraph` over a pooled read store: a graph is a
snapshot that reads lazily through the store it was given, so it cannot outlive the request that lent the
store, and building one costs nothing until it is asked something. (The server's change fingerprint sees
only the SQLite file and this process's writes, so a cached graph could miss another writer's ingest.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from m3agent.errors import NotFoundError, UnfitRequestError
from m3agent.server.api.graph_schemas import (
    AppearancesOut,
    CompanyOut,
    MomentOut,
    PeopleCountOut,
    PersonOut,
    ProfileOut,
    ShotOut,
    SightingOut,
    TogetherOut,
    UtteranceOut,
)
from m3agent.text import CLOCK, clock, clock_seconds

if TYPE_CHECKING:
    from m3agent.domain import Video
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Company, Moment, PeopleCount, Person, ShotView, Sighting, Utterance
    from m3agent.server.context import ServerContext
    from m3agent.store.protocol import MemoryStore

TIME_PATTERN = rf"^\s*(?:[0-9]+(?:\.[0-9]+)?|{CLOCK})\s*$"
"""Seconds (``190``, ``190.5``) or clock text (``3:10``, ``1:02:05``)."""
TIME_HINT = "give seconds (190) or clock text (3:10)"
END_SLACK_S = 0.5  # a time this far past the recorded end still counts as inside the video
PEOPLE_HINT = "GET /api/people (MCP: list_characters) lists the people; name one by id, tag or given name"
VIDEOS_HINT = "GET /api/videos lists the video ids"


@contextmanager
def reading(ctx: ServerContext) -> Iterator[EntityGraph]:
    """A fresh graph over a pooled read store, for one request."""
    from m3agent.graph.operators import EntityGraph

    with ctx.stores.read() as store:
        yield EntityGraph(store, max_frame_side=ctx.settings.media.max_frame_side)


# inputs --------------------------------------------------------------------------------
def seconds(value: float | str, what: str = "t") -> float:
    """``value`` in seconds: a number, or text holding seconds or a clock time; 422 for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and re.fullmatch(TIME_PATTERN, value):
        text = value.strip()
        number = clock_seconds(text) if ":" in text else float(text)
    else:
        raise UnfitRequestError(f"{what}={value!r} is not a time", hint=TIME_HINT)
    if not 0.0 <= number < float("inf"):
        raise UnfitRequestError(f"{what}={value!r} is not a time from the start of the video", hint=TIME_HINT)
    return number


def person_ref(ref: int | str) -> int | str:
    """A path or tool reference as the graph takes it: digits are a character id, the rest a tag or a name."""
    text = ref.strip() if isinstance(ref, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= 18:  # longer digit runs cannot be an id: a name
        return int(text)
    return ref


def video(store: MemoryStore, video_id: str) -> Video:
    """The stored video, or a 404 whose hint says where the ids are listed."""
    try:
        return store.get_video(video_id)
    except NotFoundError as exc:
        raise NotFoundError(exc.message, hint=VIDEOS_HINT) from None


def video_end(store: MemoryStore, stored: Video) -> float | None:
    """The video's duration, else the end of its last recorded clip; None when neither is known."""
    if stored.duration_s is not None and stored.duration_s > 0:
        return stored.duration_s
    ends = [c.end_s for c, _, _ in store.clips(stored.video_id)]
    return max(ends) if ends else None


def interval(store: MemoryStore, stored: Video, start: float, end: float | None) -> tuple[float, float | None]:
    """``(start, end)`` checked against the video: 422 when it starts past the end or ends before it starts;
    an end past the video's end is cut to it."""
    last = video_end(store, stored)
    if last is not None and start > last + END_SLACK_S:
        raise UnfitRequestError(f"{clock(start)} is past the end of {stored.video_id} ({clock(last)})",
                                hint=f"times in {stored.video_id} run from 0:00 to {clock(last)}")
    if end is not None and end < start:
        raise UnfitRequestError(f"the interval ends ({clock(end)}) before it starts ({clock(start)})",
                                hint="give an end at or after the start")
    if end is not None and last is not None:
        end = min(end, max(last, start))
    return start, end


def find_person(graph: EntityGraph, ref: int | str) -> Person:
    """The person ``ref`` names, or a 404 whose hint says how to name one."""
    try:
        return graph.person(person_ref(ref))
    except NotFoundError as exc:
        raise NotFoundError(exc.message, hint=PEOPLE_HINT) from None


# operations -------------------------------------------------------------------------------
def people(ctx: ServerContext) -> list[PersonOut]:
    """Every person of the memory, by character id."""
    with reading(ctx) as graph:
        return [person_out(p) for p in graph.people()]


def profile(ctx: ServerContext, ref: int | str) -> ProfileOut:
    """The person with all appearances, the first and last, and their attributes."""
    with reading(ctx) as graph:
        value = graph.profile(find_person(graph, ref))
    return ProfileOut.model_validate({**value.to_dict(), "person": person_out(value.person)})


def appearances(ctx: ServerContext, ref: int | str, video_id: str | None = None) -> AppearancesOut:
    """The person's appearances in time order, over all videos or one."""
    with reading(ctx) as graph:
        if video_id is not None:
            video(graph.store, video_id)
        person = find_person(graph, ref)
        found = graph.appearances(person, video_id)
    return AppearancesOut.model_validate({"person": person_out(person), "video_id": video_id,
                                          "appearances": [a.to_dict() for a in found]})


def together(ctx: ServerContext, ref: int | str, video_id: str | None = None) -> TogetherOut:
    """The people present while the person is, with the shared intervals."""
    with reading(ctx) as graph:
        if video_id is not None:
            video(graph.store, video_id)
        person = find_person(graph, ref)
        company = graph.together(person, video_id)
    return TogetherOut(person=person_out(person), video_id=video_id, company=[company_out(c) for c in company])


def moment(ctx: ServerContext, video_id: str, start: float, end: float | None = None) -> MomentOut:
    """Who is on screen and where, who speaks, the scene and the shot at an instant or in an interval."""
    with reading(ctx) as graph:
        start, end = interval(graph.store, video(graph.store, video_id), start, end)
        return moment_out(graph.at(video_id, start, end))


def shots(ctx: ServerContext, video_id: str) -> list[ShotOut]:
    """The shots of the video in order."""
    with reading(ctx) as graph:
        video(graph.store, video_id)
        return [shot_out(s) for s in graph.shots(video_id)]


def count(ctx: ServerContext, video_id: str, start: float = 0.0, end: float | None = None) -> PeopleCountOut:
    """How many people are in ``[start, end]`` (``end`` None: to the end of the video), by the graph's one rule
    (:meth:`~m3agent.graph.operators.EntityGraph.count_people`)."""
    with reading(ctx) as graph:
        stored = video(graph.store, video_id)
        start, end = interval(graph.store, stored, start, end)
        last = end if end is not None else video_end(graph.store, stored)
        return count_out(graph.count_people(video_id, start, start if last is None else max(start, last)))


# values to bodies ---------------------------------------------------------------------------
def person_out(person: Person) -> PersonOut:
    return PersonOut.model_validate({**person.to_dict(), "label": person.label})


def sighting_out(sighting: Sighting) -> SightingOut:
    return SightingOut.model_validate({**sighting.to_dict(), "character_id": sighting.person.character_id,
                                       "time_s": round(sighting.time_s, 2)})


def utterance_out(utterance: Utterance) -> UtteranceOut:
    return UtteranceOut.model_validate({**utterance.to_dict(), "character_id": utterance.person.character_id,
                                        "start_s": round(utterance.start_s, 2), "end_s": round(utterance.end_s, 2)})


def shot_out(shot: ShotView) -> ShotOut:
    return ShotOut.model_validate({**shot.to_dict(), "character_ids": [p.character_id for p in shot.people],
                                   "memory_ids": list(shot.memory_ids)})


def moment_out(value: Moment) -> MomentOut:
    return MomentOut.model_validate({
        **value.to_dict(), "start_s": round(value.start_s, 2), "end_s": round(value.end_s, 2),
        "on_screen": [sighting_out(s) for s in value.on_screen],
        "speaking": [utterance_out(u) for u in value.speaking],
        "shot": None if value.shot is None else shot_out(value.shot)})


def company_out(company: Company) -> CompanyOut:
    spans = [{**span, "start_s": round(a, 2), "end_s": round(b, 2)}
             for span, (_, a, b) in zip(company.to_dict()["spans"], company.spans, strict=True)]
    return CompanyOut.model_validate({**company.to_dict(), "character_id": company.person.character_id,
                                      "spans": spans})


def count_out(value: PeopleCount) -> PeopleCountOut:
    """The count as the graph decides it (:meth:`~m3agent.graph.operators.EntityGraph.count_people`): ``people``
    are the counted ones, by character id."""
    return PeopleCountOut.model_validate({
        **value.to_dict(), "start_s": round(value.start_s, 2), "end_s": round(value.end_s, 2),
        "people": [person_out(p) for p in sorted(value.counted, key=lambda p: p.character_id)]})
