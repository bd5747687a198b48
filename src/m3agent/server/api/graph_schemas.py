"""Response bodies of the entity-graph endpoints and MCP tools: who is where when, shots, counts, profiles.

Each body is the JSON of a graph value's ``to_dict()`` (what the agent's observations show: labels and clock
text), plus the ids and seconds a program needs (``character_id``, ``start_s``/``end_s``, ``time_s``).
:mod:`m3agent.server.graph_service` builds them as ``Model.model_validate({**value.to_dict(), ...extras})``, so
a key added to a ``to_dict()`` needs only a field here (tests/test_server_graph.py fails until it has one).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from m3agent.graph.values import Role


class PersonOut(BaseModel):
    """A person: a character, i.e. face and voice entities linked into one; ``label`` is how answers name it."""

    character_id: int
    tag: str = Field(description="<character_N>")
    name: str = Field(description="the given name; empty until someone names the person")
    label: str = Field(description="the name, else the tag")
    face_ids: list[int] = Field(description="the N of each <face_N> of the person")
    voice_ids: list[int] = Field(description="the N of each <voice_N> of the person")


class AppearanceOut(BaseModel):
    """An interval in which a person is seen (``face``), heard (``voice``) or ``both``, without a long break."""

    video_id: str
    start_s: float
    end_s: float
    span: str = Field(description="the interval as clock text, e.g. 0:40–0:52")
    role: Role


class SightingOut(BaseModel):
    """A person's face on screen: where in the frame (by the face centre's share of the width) and how near."""

    person: str = Field(description="the person's label")
    character_id: int
    entity_id: int = Field(description="the N of the <face_N> seen")
    time: str = Field(description="when the face was sampled, as clock text")
    time_s: float
    horizontal: Literal["left", "centre", "right"]
    depth: Literal["foreground", "background"] = Field(
        description="background: much smaller than the largest face at the same time or the shot's main face, "
                    "or tiny in the frame (m3agent.perception.attributes.place)")


class UtteranceOut(BaseModel):
    """A person heard, with what the speech recogniser wrote."""

    person: str = Field(description="the person's label")
    character_id: int
    entity_id: int = Field(description="the N of the <voice_N> heard")
    start_s: float
    end_s: float
    span: str
    text: str


class ShotOut(BaseModel):
    """A shot of a video, in order from ``index`` 0; ``opens_scene`` when it starts at a detected cut."""

    video_id: str
    index: int
    start_s: float
    end_s: float
    span: str
    opens_scene: bool
    summary: str = Field(description="what ingest summarised of the shot (people, text, objects, sounds)")
    people: list[str] = Field(description="labels of the people in the shot")
    character_ids: list[int] = Field(description="their character ids, in the same order")
    memory_ids: list[int] = Field(description="the shot-summary memories it was read from (evidence)")
    kind: Literal["still", "live", "uncertain"] | None = Field(
        None, description="still picture (a photo, a slide, a title card) or live video, measured at ingest; "
        "null: not measured")
    kind_confidence: float = Field(0.0, description="confidence of kind, 0 to 1 (0 when uncertain or unmeasured)")
    split_screen: bool = Field(False, description="two pictures side by side (a seam down the middle), measured at "
                               "ingest")


class MomentOut(BaseModel):
    """An instant or interval of a video: who is on screen and where, who speaks, the scene's text, objects and
    sounds, and the shot it falls in (null when the video has no shot summaries)."""

    video_id: str
    start_s: float
    end_s: float
    span: str
    on_screen: list[SightingOut] = Field(description="one per person, left to right")
    speaking: list[UtteranceOut]
    scene: list[str] = Field(description="on-screen text, objects and sounds recorded for the interval")
    shot: ShotOut | None


class SharedSpanOut(BaseModel):
    """An interval two people are present in together."""

    video_id: str
    start_s: float
    end_s: float
    span: str


class CompanyOut(BaseModel):
    """Another person present (seen or heard) at the same time as the one asked about, and when."""

    person: str = Field(description="the other person's label")
    character_id: int
    spans: list[SharedSpanOut]


class AppearancesOut(BaseModel):
    """Every appearance of a person, in time order (over all videos, or one)."""

    person: PersonOut
    video_id: str | None = Field(description="the video asked about; null: all videos")
    appearances: list[AppearanceOut]


class TogetherOut(BaseModel):
    """The people present while a person is, with the shared intervals."""

    person: PersonOut
    video_id: str | None = Field(description="the video asked about; null: all videos")
    company: list[CompanyOut]


class AttributeOut(BaseModel):
    """A description measured for a person (e.g. clothing colour), with its confidence."""

    name: str
    value: str
    confidence: float


class ProfileOut(BaseModel):
    """A person at a glance: their appearances in order, the first and the last, and their attributes."""

    person: PersonOut
    label: str
    appearances: list[AppearanceOut]
    first: AppearanceOut | None
    last: AppearanceOut | None
    attributes: list[AttributeOut]
    description: str = Field("", description="one short phrase of the attributes decided with confidence 0.5 or "
                             "more, e.g. 'a low voice; usually on the left; appears male'")


class PeopleCountOut(BaseModel):
    """How many people are in an interval: everyone seen, everyone heard whose voice is linked to a face, and a
    voice linked to no face only when some of its speech there has no face on screen (heard only over faces it
    may be one of them). One seen and heard counts once."""

    video_id: str
    start_s: float
    end_s: float
    span: str
    distinct: int = Field(description="how many people: the number of `people`")
    seen: list[str] = Field(description="labels of the people seen")
    heard: list[str] = Field(description="labels of the people heard")
    not_counted: list[str] = Field(default_factory=list,
                                   description="labels of voices linked to no face heard only while a face was on "
                                               "screen: perhaps one of the people seen, so not counted")
    people: list[PersonOut] = Field(description="the people counted, each once")
