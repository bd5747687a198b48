"""The typed answers of the entity-graph operators: people, their appearances, moments, shots, counts, profiles.

Every value is frozen and carries times in seconds of its video. ``to_dict`` gives the JSON form the REST API,
the MCP tools and the agent's observations share (times also as clock text, so a model reads ``0:40``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from m3agent.perception.attributes.names import UNCERTAIN, Attribute
from m3agent.perception.attributes.place import PLACE_WORDS
from m3agent.text import clock

if TYPE_CHECKING:
    from m3agent.perception.attributes.names import (
        ApparentGender,
        ClothesColour,
        EyewearValue,
        RegisterValue,
        Uncertain,
    )
    from m3agent.perception.attributes.place import Depth, Horizontal

DESCRIBE_MIN = 0.5
"""A measured attribute enters a profile's phrase, and an answer's words for a person ("the man with glasses"),
from this combined confidence on."""


class Role(enum.StrEnum):
    """How a person is present in an interval: seen (face), heard (voice) or both."""

    FACE = "face"
    VOICE = "voice"
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class Person:
    """A character: linked face and voice entities that are one person; ``label`` is how answers name them."""

    character_id: int
    tag: str
    name: str
    face_ids: tuple[int, ...]
    voice_ids: tuple[int, ...]

    @property
    def label(self) -> str:
        return self.name or self.tag

    @property
    def entity_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.face_ids + self.voice_ids))

    def to_dict(self) -> dict[str, Any]:
        return {"character_id": self.character_id, "tag": self.tag, "name": self.name,
                "face_ids": list(self.face_ids), "voice_ids": list(self.voice_ids)}


@dataclass(frozen=True, slots=True)
class Appearance:
    """One interval in which a person is seen or heard without a break longer than the merge gap."""

    video_id: str
    start_s: float
    end_s: float
    role: Role

    def to_dict(self) -> dict[str, Any]:
        return {"video_id": self.video_id, "start_s": round(self.start_s, 2), "end_s": round(self.end_s, 2),
                "span": span_text(self.start_s, self.end_s), "role": self.role.value}


@dataclass(frozen=True, slots=True)
class Sighting:
    """A person's face on screen at a moment: where in the frame (``horizontal``: left / centre / right;
    ``depth``: foreground / background by face height)."""

    person: Person
    entity_id: int
    time_s: float
    horizontal: str
    depth: str

    def to_dict(self) -> dict[str, Any]:
        return {"person": self.person.label, "entity_id": self.entity_id, "time": clock(self.time_s),
                "horizontal": self.horizontal, "depth": self.depth}


@dataclass(frozen=True, slots=True)
class Utterance:
    """A person heard in an interval, with what the speech recogniser wrote."""

    person: Person
    entity_id: int
    start_s: float
    end_s: float
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"person": self.person.label, "entity_id": self.entity_id,
                "span": span_text(self.start_s, self.end_s), "text": self.text}


@dataclass(frozen=True, slots=True)
class ShotView:
    """A shot of a video in order (``index`` from 0); ``opens_scene`` when it starts at a detected cut. ``kind``
    says whether it shows a still picture (``still``: a photo, a slide, a title card) or ``live`` video, with
    ``kind_confidence`` (``uncertain`` when measured but undecided, ``None`` when not measured);
    ``split_screen`` when its summary says two pictures stand side by side."""

    video_id: str
    index: int
    start_s: float
    end_s: float
    opens_scene: bool
    summary: str
    people: tuple[Person, ...]
    memory_ids: tuple[int, ...] = ()  # the shot summaries it was read from (the evidence of an answer about it)
    kind: str | None = None
    kind_confidence: float = 0.0
    split_screen: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"video_id": self.video_id, "index": self.index, "start_s": round(self.start_s, 2),
                "end_s": round(self.end_s, 2), "span": span_text(self.start_s, self.end_s),
                "opens_scene": self.opens_scene, "summary": self.summary,
                "people": [p.label for p in self.people], "kind": self.kind,
                "kind_confidence": round(self.kind_confidence, 3), "split_screen": self.split_screen}


@dataclass(frozen=True, slots=True)
class Moment:
    """What the memory holds about an interval of a video: who is seen (with frame position), who speaks, the
    scene's text, objects and sounds, and the shot it falls in."""

    video_id: str
    start_s: float
    end_s: float
    on_screen: tuple[Sighting, ...]
    speaking: tuple[Utterance, ...]
    scene: tuple[str, ...]
    shot: ShotView | None

    def to_dict(self) -> dict[str, Any]:
        return {"video_id": self.video_id, "span": span_text(self.start_s, self.end_s),
                "on_screen": [s.to_dict() for s in self.on_screen],
                "speaking": [u.to_dict() for u in self.speaking], "scene": list(self.scene),
                "shot": None if self.shot is None else self.shot.to_dict()}


@dataclass(frozen=True, slots=True)
class Company:
    """Another person present at the same time as the one asked about, and when."""

    person: Person
    spans: tuple[tuple[str, float, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"person": self.person.label, "spans": [{"video_id": v, "span": span_text(a, b)}
                                                       for v, a, b in self.spans]}


@dataclass(frozen=True, slots=True)
class PeopleCount:
    """The people of an interval: everyone ``seen`` and ``heard``, and those ``counted`` as people by the rule of
    :meth:`~m3agent.graph.operators.EntityGraph.count_people` (``distinct`` is their number; a person both seen
    and heard counts once). ``not_counted``: the voices heard but left out (matched to no face, heard only while
    a face was on screen)."""

    video_id: str
    start_s: float
    end_s: float
    seen: tuple[Person, ...]
    heard: tuple[Person, ...]
    counted: tuple[Person, ...]

    @property
    def distinct(self) -> int:
        return len(self.counted)

    @property
    def not_counted(self) -> tuple[Person, ...]:
        kept = {p.character_id for p in self.counted}
        return tuple(p for p in self.heard if p.character_id not in kept)

    def to_dict(self) -> dict[str, Any]:
        return {"video_id": self.video_id, "span": span_text(self.start_s, self.end_s), "distinct": self.distinct,
                "seen": [p.label for p in self.seen], "heard": [p.label for p in self.heard],
                "not_counted": [p.label for p in self.not_counted]}


@dataclass(frozen=True, slots=True)
class Presence:
    """When one person is seen (face sightings joined into spans) and when they speak in one video, in time
    order: the two rows of their swimlane."""

    person: Person
    video_id: str
    seen: tuple[tuple[float, float], ...]
    speaking: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Profile:
    """A person at a glance: their appearances in order, first and last, and the descriptions measured for them:
    ``attributes`` are ``(label, value, confidence)`` combined over every clip of their face and voice entities
    (:mod:`m3agent.graph.descriptions`; the label is :attr:`~m3agent.perception.attributes.names.Attribute.label`),
    e.g. ``("voice", "low", 0.8)``, ``("position", "left", 0.9)``, ``("depth", "foreground", 0.7)``,
    ``("apparent gender", "male", 0.85)``, ``("apparent age", "60", 0.7)``. Look one up with :meth:`attribute`."""

    person: Person
    appearances: tuple[Appearance, ...]
    attributes: tuple[tuple[str, str, float], ...] = ()

    @overload
    def attribute(self, name: Literal[Attribute.VOICE_REGISTER]) -> tuple[RegisterValue, float] | None: ...
    @overload
    def attribute(self, name: Literal[Attribute.POSITION]) -> tuple[Horizontal | Uncertain, float] | None: ...
    @overload
    def attribute(self, name: Literal[Attribute.DEPTH]) -> tuple[Depth | Uncertain, float] | None: ...
    @overload
    def attribute(self, name: Literal[Attribute.APPARENT_GENDER]) -> tuple[ApparentGender, float] | None: ...
    @overload
    def attribute(self, name: Literal[Attribute.EYEWEAR]) -> tuple[EyewearValue, float] | None: ...
    @overload
    def attribute(self, name: Literal[Attribute.CLOTHES]) -> tuple[ClothesColour, float] | None: ...
    @overload
    def attribute(self, name: Attribute) -> tuple[str, float] | None: ...

    def attribute(self, name: Attribute) -> tuple[str, float] | None:
        """``(value, confidence)`` of the attribute ``name`` (``Attribute.VOICE_REGISTER``...), its value typed by
        the values perception writes for it; ``None`` unmeasured."""
        return next(((v, c) for n, v, c in self.attributes if n == name.label), None)

    def describe(self, min_confidence: float = DESCRIBE_MIN, *, usual_place: bool = True) -> str:
        """One short phrase of the attributes decided with at least ``min_confidence``, e.g. "a low voice;
        usually on the left; appears male; looks about 60; wears glasses; dark clothes" ("" when none is);
        without the usual place when ``usual_place`` is false (how someone looks, said where they are at a
        moment)."""
        sure = {n: v for n, v, c in self.attributes if c >= min_confidence and v != UNCERTAIN}
        voice, place = sure.get(Attribute.VOICE_REGISTER.label), sure.get(Attribute.POSITION.label, "")
        gender, age = sure.get(Attribute.APPARENT_GENDER.label), sure.get(Attribute.APPARENT_AGE.label)
        parts = []
        if voice in ("low", "high"):
            parts.append(f"a {voice} voice")
        where = f"usually {PLACE_WORDS[place]}" if place in PLACE_WORDS else ""
        if sure.get(Attribute.DEPTH.label) == "background":
            where = f"{where}, in the background" if where else "usually in the background"
        parts += [where] if where and usual_place else []
        if gender in ("female", "male"):
            parts.append(f"appears {gender}")
        if age is not None:
            parts.append(f"looks about {age}")
        if sure.get(Attribute.EYEWEAR.label) == "glasses":
            parts.append("wears glasses")
        if sure.get(Attribute.CLOTHES.label):
            parts.append(f"{sure[Attribute.CLOTHES.label]} clothes")
        return "; ".join(parts)

    @property
    def first(self) -> Appearance | None:
        return self.appearances[0] if self.appearances else None

    @property
    def last(self) -> Appearance | None:
        return self.appearances[-1] if self.appearances else None

    def to_dict(self) -> dict[str, Any]:
        return {"person": self.person.to_dict(), "label": self.person.label,
                "appearances": [a.to_dict() for a in self.appearances],
                "first": None if self.first is None else self.first.to_dict(),
                "last": None if self.last is None else self.last.to_dict(),
                "attributes": [{"name": n, "value": v, "confidence": round(c, 3)} for n, v, c in self.attributes],
                "description": self.describe()}


def span_text(start: float, end: float) -> str:
    """``0:40–0:52`` (one clock time when both ends read the same)."""
    a, b = clock(start), clock(end)
    return a if a == b else f"{a}–{b}"
