"""A video's swimlanes for the inspector: one lane per person (when seen, when speaking), the shots (still or
live, with the summary and how many people), and on-screen text and sounds, as bars placed in percent of the
video's duration so the page draws them without knowing the duration (``static/app.js`` sets them through the
CSSOM, follows the playhead and seeks on a click).

Everything comes from :class:`~m3agent.graph.operators.EntityGraph`, the operators the API serves, so the lanes,
``/api/videos/{id}/at`` and the answers agree; the people of a shot are counted by its one rule
(:meth:`~m3agent.graph.operators.EntityGraph.count_people`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.text import clock

if TYPE_CHECKING:
    from m3agent.domain import Memory
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Person, ShotView

SOUNDS = re.compile(r"sounds: ([^;]+)")  # the sounds part of a shot summary (scene_memories writes it last)
ON_SCREEN = re.compile(r"^On screen [0-9:.–-]+: ")  # the head of an on-screen text memory


@dataclass(frozen=True, slots=True)
class Bar:
    """One interval of a lane: its span in seconds, where it sits (``left`` and ``width`` in percent of the
    video), its ``kind`` (``seen``, ``speaking``, ``still``, ``live``, ``uncertain``, ``shot``, ``text``,
    ``sound``, ``object``), the words it shows and, for a shot, whether it opens a scene and how many people."""

    start_s: float
    end_s: float
    left: float
    width: float
    kind: str
    label: str
    opens: bool = False
    people: int | None = None

    @property
    def span(self) -> str:
        return f"{clock(self.start_s)}–{clock(self.end_s)}"


@dataclass(frozen=True, slots=True)
class Lane:
    """A row of bars: a person's (``character_id`` and ``tag`` set), the shots' or the scene notes'."""

    key: str
    title: str
    bars: tuple[Bar, ...]
    character_id: int | None = None
    tag: str = ""


@dataclass(frozen=True, slots=True)
class Swimlanes:
    """The lanes of one video of ``duration_s`` seconds: people (in order of first appearance), shots, notes."""

    duration_s: float
    people: tuple[Lane, ...]
    shots: Lane
    notes: Lane


def swimlanes(graph: EntityGraph, video_id: str, duration_s: float | None) -> Swimlanes | None:
    """The swimlanes of ``video_id``; None when its duration is unknown (nothing to place bars against)."""
    if duration_s is None or duration_s <= 0:
        return None
    place = _Place(duration_s)
    people = [lane for p in graph.people() if (lane := _person_lane(graph, video_id, p, place)).bars]
    people.sort(key=lambda lane: (lane.bars[0].start_s, lane.character_id or 0))
    shots = graph.shots(video_id)
    shot_bars = tuple(_shot_bar(graph, s, place) for s in shots)
    notes = [_note_bar(m, place) for m in graph.scene_notes(video_id)]
    notes += [place(s.start_s, s.end_s, "sound", f"sounds: {found}")
              for s in shots for found in SOUNDS.findall(s.summary)]
    return Swimlanes(duration_s, tuple(people), Lane("shots", "Shots", shot_bars),
                     Lane("notes", "Text & sounds", tuple(sorted(notes, key=lambda b: (b.start_s, b.end_s)))))


class _Place:
    """Bars placed against one duration (a bar past the end is cut at it)."""

    def __init__(self, duration_s: float) -> None:
        self.duration_s = duration_s

    def __call__(self, start_s: float, end_s: float, kind: str, label: str, opens: bool = False,
                 people: int | None = None) -> Bar:
        start = min(max(0.0, start_s), self.duration_s)
        end = min(max(start, end_s), self.duration_s)
        return Bar(start_s, end_s, round(100 * start / self.duration_s, 3),
                   round(100 * (end - start) / self.duration_s, 3), kind, label, opens, people)


def _person_lane(graph: EntityGraph, video_id: str, person: Person, place: _Place) -> Lane:
    found = graph.presence(person, video_id)
    bars = [place(a, b, "seen", "seen") for a, b in found.seen]
    bars += [place(a, b, "speaking", "speaking") for a, b in found.speaking]
    bars.sort(key=lambda bar: (bar.start_s, bar.kind))
    return Lane(f"person-{person.character_id}", person.label, tuple(bars), person.character_id,
                tags.character(person.character_id))


def _shot_bar(graph: EntityGraph, shot: ShotView, place: _Place) -> Bar:
    count = graph.count_people(shot.video_id, shot.start_s, shot.end_s).distinct
    return place(shot.start_s, shot.end_s, shot.kind or "shot", shot.summary, shot.opens_scene, count)


def _note_bar(memory: Memory, place: _Place) -> Bar:
    if ON_SCREEN.match(memory.text):
        return place(memory.start_s, memory.end_s, "text", ON_SCREEN.sub("", memory.text))
    return place(memory.start_s, memory.end_s, "sound" if " heard " in memory.text else "object", memory.text)
