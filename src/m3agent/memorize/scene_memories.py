"""Memories of the scene stages: on-screen text, and one summary per shot holding the shot's people,
objects and sounds.

Deterministic text with spans written by :func:`m3agent.text.clock`. On-screen text is one memory per
line kept (``On screen 0:03–0:09: "…"``; captions that restate speech are merged into the utterance,
:mod:`m3agent.memorize.captions`). The shot summary (``Shot 0:47–1:02 (after a scene change): on screen
<face_3> (on the left); speaking <voice_2>; text "…"; objects: a dog; sounds: music.``) is the one
memory of who is where, what is seen and what is heard in a shot, so a question about "the scene after
the speech" finds one memory holding all of it; its span is the shot's, and its entities are the people
in it. A scene change is the opening of its shot's summary, not a memory of its own. Without shots
(the stage off) objects and sounds are memories of their own (``A dog is visible 0:10–0:25.``,
``Music is heard 1:10–1:40.``); people whose faces were all seen are never a "person" object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from m3agent import tags
from m3agent.domain import (
    Clip,
    ClipSenses,
    FaceObservation,
    FaceTrack,
    Memory,
    MemoryKind,
    ObjectTrack,
    Shot,
    VoiceSegment,
)
from m3agent.memorize.places import largest_heights, place_words
from m3agent.perception.audio.lyrics import rapping
from m3agent.text import clock

PROVENANCE = "scene-senses/1"
SHOT_HEAD = "Shot "
SCREEN_HEAD = "On screen "
"""How a memory of on-screen text opens (:func:`screen_line`)."""
OPENING = " (after a scene change)"
TEXT_HEAD = "text "
"""How the on-screen text of a shot summary opens (:func:`summary_texts`)."""
OBJECTS_HEAD = "objects: "
"""How the objects of a shot summary open (:func:`summary_objects`)."""
SOUNDS_HEAD = "sounds: "
"""How the sounds of a shot summary open (:func:`summary_sounds`)."""
SPLIT_SCREEN = "a split screen"
"""How a shot summary opens for a split screen (:attr:`~m3agent.domain.Shot.split_screen`)."""
PERSON = "person"
PLURALS = {PERSON: "people", "bus": "buses", "sheep": "sheep", "sofa": "sofas"}
SUMMARY_ITEMS = 4
SOUND_IN_SHOT_S = 1.0
"""How long a sound must be heard inside a shot for its summary to tell it (:func:`_heard_in`)."""
OBJECT_ITEMS = 6  # objects are told only here when shots were found: room for a busy scene


def scene_memories(clip: Clip, senses: ClipSenses, tracks: Sequence[FaceTrack],
                   voices: Sequence[VoiceSegment] = (), frame_size: tuple[int, int] | None = None) -> list[Memory]:
    """Every scene memory of one clip, in time order (embeddings are added by the caller).

    Objects and sounds inside a shot are told only in its summary (with the people there and where they are
    in a ``frame_size`` picture); outside every shot (no shot stage), each is a memory of its own, and so is a
    sound no shot hears for long enough (:func:`_heard_in`). Rapping heard in the voices' words over music
    (:func:`~m3agent.perception.audio.lyrics.rapping`) is one of the sounds."""
    senses = replace(senses, sounds=(*senses.sounds, *rapping(voices, senses.sounds)))
    out = [_memory(clip, screen_line(t.start_s, t.end_s, t.text), t.start_s, t.end_s, t.confidence)
           for t in senses.texts]

    def unsummarised(start: float, end: float) -> bool:
        return not any(_in_shot(start, end, s) for s in senses.shots)

    out += [_memory(clip, f"{_objects_phrase(o)} {_verb(o)} visible {span(o.start_s, o.end_s)}.", o.start_s,
                    o.end_s, o.score) for o in senses.objects
            if not _faces_cover(o, tracks) and unsummarised(o.start_s, o.end_s)]
    out += [_memory(clip, f"{s.label.capitalize()} is heard {span(s.start_s, s.end_s)}.", s.start_s, s.end_s,
                    s.score) for s in senses.sounds if not any(_heard_in(s.start_s, s.end_s, h) for h in senses.shots)]
    heights = largest_heights(tracks)
    out += [m for s in senses.shots
            if (m := _shot_summary(clip, s, senses, tracks, voices, _Frame(heights, frame_size))) is not None]
    out.sort(key=lambda m: m.start_s)
    return out


def screen_line(start: float, end: float, text: str) -> str:
    """``On screen 0:03–0:09: "…"``: a line of text read on screen that no one says with it."""
    return f'{SCREEN_HEAD}{span(start, end)}: "{text}"'


def read_screen(text: str) -> str | None:
    """The words of a :func:`screen_line` memory; None for any other memory."""
    head, sep, rest = text.partition(': "')
    if not head.startswith(SCREEN_HEAD) or not sep or not rest.endswith('"'):
        return None
    return rest[:-1]


def span(start: float, end: float) -> str:
    """``0:03–0:09``, or ``at 0:03`` when both ends read the same."""
    a, b = clock(start), clock(end)
    return f"at {a}" if a == b else f"{a}–{b}"


def _memory(clip: Clip, text: str, start: float, end: float, confidence: float = 1.0,
            entities: Sequence[int] = ()) -> Memory:
    return Memory(kind=MemoryKind.EPISODIC, text=text, video_id=clip.video_id, clip_index=clip.index,
                  start_s=start, end_s=max(start, end), entity_ids=tuple(dict.fromkeys(entities)),
                  confidence=round(min(1.0, max(0.0, confidence)), 3), provenance=PROVENANCE)


def _faces_cover(track: ObjectTrack, faces: Sequence[FaceTrack]) -> bool:
    """Whether ``track`` counts people whose faces were all seen over its span (the presence memories say it
    already); people the face detector missed, e.g. turned away or far, keep their object memory."""
    if track.label != PERSON:
        return False
    seen = {o.entity_id for t in faces for o in t.observations
            if o.entity_id is not None and track.start_s <= o.time_s <= track.end_s}
    return len(seen) >= track.count


def _objects_phrase(track: ObjectTrack) -> str:
    if track.count > 1:
        return f"{track.count} {PLURALS.get(track.label, track.label + 's')}"
    article = "An" if track.label[:1].lower() in "aeiou" else "A"
    return f"{article} {track.label}"


def _verb(track: ObjectTrack) -> str:
    return "are" if track.count > 1 else "is"


@dataclass(frozen=True, slots=True)
class _Frame:
    """What a face's place in the picture is judged against: the largest face at each time, the frame size."""

    heights: dict[float, float]
    size: tuple[int, int] | None


def _shot_summary(clip: Clip, shot: Shot, senses: ClipSenses, tracks: Sequence[FaceTrack],
                  voices: Sequence[VoiceSegment], frame: _Frame) -> Memory | None:
    def inside(start: float, end: float) -> bool:
        return _in_shot(start, end, shot)

    seen: dict[int, list[FaceObservation]] = {}
    for obs in sorted((o for t in tracks for o in t.observations), key=lambda o: o.time_s):
        if obs.entity_id is not None and inside(obs.time_s, obs.time_s):
            seen.setdefault(obs.entity_id, []).append(obs)
    faces = sorted(seen)
    speakers = list(dict.fromkeys(v.entity_id for v in sorted(voices, key=lambda v: v.start_s)
                                  if v.entity_id is not None and v.text.strip() and inside(v.start_s, v.end_s)))
    texts = list(dict.fromkeys(t.text for t in senses.texts if inside(t.start_s, t.end_s)))[:SUMMARY_ITEMS]
    objects = list(dict.fromkeys(_objects_phrase(o).lower().removeprefix("a ").removeprefix("an ")
                                 for o in senses.objects if inside(o.start_s, o.end_s)
                                 and not _faces_cover(o, tracks)))[:OBJECT_ITEMS]
    sounds = list(dict.fromkeys(s.label.lower() for s in senses.sounds if _heard_in(s.start_s, s.end_s, shot)))
    parts = [SPLIT_SCREEN] if shot.split_screen else []
    if faces:
        parts.append("on screen " + ", ".join(_seen(e, seen[e], frame) for e in faces))
    if speakers:
        parts.append("speaking " + ", ".join(tags.voice(e) for e in speakers[:SUMMARY_ITEMS]))
    if texts:
        parts.append(TEXT_HEAD + "; ".join(f'"{t}"' for t in texts))
    if objects:
        parts.append(OBJECTS_HEAD + ", ".join(objects))
    if sounds:
        parts.append(sounds_text(tuple(sounds[:SUMMARY_ITEMS])))
    if not parts:
        return None
    opening = OPENING if shot.cut else ""
    text = f"{SHOT_HEAD}{span(shot.start_s, shot.end_s)}{opening}: " + "; ".join(parts) + "."
    return _memory(clip, text, shot.start_s, shot.end_s, entities=[*faces, *speakers[:SUMMARY_ITEMS]])


def _in_shot(start: float, end: float, shot: Shot) -> bool:
    """Whether the span ``start``-``end`` (an instant when equal) falls in ``shot``: the summary tells it."""
    return start < shot.end_s and end >= shot.start_s


def _heard_in(start: float, end: float, shot: Shot) -> bool:
    """Whether a sound from ``start`` to ``end`` is heard in ``shot``: for :data:`SOUND_IN_SHOT_S` of it, or half
    of a shorter shot. A sound's ends are known to half a second (the classifier's hop) and a voice's to the
    recogniser's word times, so one that runs a moment past a cut belongs to the next shot alone."""
    heard = min(end, shot.end_s) - max(start, shot.start_s)
    return heard >= min(SOUND_IN_SHOT_S, (shot.end_s - shot.start_s) / 2)


def _seen(entity: int, observations: Sequence[FaceObservation], frame: _Frame) -> str:
    """``<face_3> (on the left)``: a face tag and, when measured, where the person usually is in the shot."""
    place = place_words(observations, frame.heights, frame.size)
    return f"{tags.face(entity)} ({place})" if place else tags.face(entity)


def read_shot_summary(memory: Memory) -> tuple[bool, str] | None:
    """``(opens a scene, what the shot holds)`` when ``memory`` is a shot summary written here, else None: the
    entity-graph operators read what a shot holds back through this, so the wording has one owner (whether it
    opens a scene they read from the stored shot, and from here only for a memory stored without shots)."""
    if memory.provenance != PROVENANCE or not memory.text.startswith(SHOT_HEAD):
        return None
    head, _, body = memory.text.partition(": ")
    return head.endswith(OPENING), body.rstrip(".")


def sounds_text(sounds: tuple[str, ...]) -> str:
    """``sounds: music, rapping``: the sounds of a shot as its summary tells them (:func:`summary_sounds` reads
    them back), and as an answer about the shot repeats them."""
    return SOUNDS_HEAD + ", ".join(sounds)


def summary_sounds(body: str) -> tuple[str, ...]:
    """The sounds a shot summary's body (:func:`read_shot_summary`) says are heard (``("music", "rapping")``)."""
    for part in body.split("; "):
        if part.startswith(SOUNDS_HEAD):
            return tuple(part.removeprefix(SOUNDS_HEAD).split(", "))
    return ()


def summary_texts(body: str) -> tuple[str, ...]:
    """The lines of on-screen text a shot summary's body tells (``text "A"; "B"`` -> ``("A", "B")``): the writer
    joins them with the separator of the summary's parts, so the lines after the first are the quoted parts that
    follow it."""
    lines: list[str] = []
    for part in body.split("; "):
        if part.startswith(TEXT_HEAD + '"') or (lines and part.startswith('"')):
            lines.append(part.removeprefix(TEXT_HEAD).strip('"'))
        elif lines:
            break
    return tuple(lines)


def summary_objects(body: str) -> tuple[str, ...]:
    """The objects a shot summary's body tells (``objects: chair, microphone`` -> ``("chair", "microphone")``)."""
    for part in body.split("; "):
        if part.startswith(OBJECTS_HEAD):
            return tuple(part.removeprefix(OBJECTS_HEAD).split(", "))
    return ()


def shows_split_screen(body: str) -> bool:
    """Whether a shot summary's body (:func:`read_shot_summary`) says the shot is a split screen."""
    return body == SPLIT_SCREEN or body.startswith(SPLIT_SCREEN + "; ")
