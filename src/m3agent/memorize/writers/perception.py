"""The perception-only memory writer: deterministic memories without any LLM.

Episodic memories say who says what (one memory per utterance: a speaker's
contiguous, sentence-complete speech, :mod:`m3agent.memorize.utterances`, with
timestamps and the on-screen captions that restate it,
:mod:`m3agent.memorize.captions`) and who is on screen where. Where the shot stage
ran, each shot's summary (:mod:`m3agent.memorize.scene_memories`) says who is
where in it, so no presence line repeats it; without shots, one presence memory
per person per clip does. Who appears with whom is not written as sentences (n
people would make n(n-1)/2 of them): it is a relation of the entity graph
(:meth:`m3agent.graph.operators.EntityGraph.together`), read from the faces.
Semantic memories record names people give for themselves ("my name is Ann",
"I'm Ann"). People are named only by entity tags; the store maps tags to
characters and names at read time.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.domain import Clip, FaceObservation, FaceTrack, Memory, MemoryKind, ScreenText, Shot, VoiceSegment
from m3agent.memorize.captions import spoken_captions
from m3agent.memorize.inputs import ClipInput, WriterOutput
from m3agent.memorize.places import largest_heights, place_words
from m3agent.memorize.scene_memories import span
from m3agent.memorize.speech_line import says_line
from m3agent.memorize.utterances import Utterance, utterances
from m3agent.text import self_names

if TYPE_CHECKING:
    from m3agent.registry import BackendSpec

PROVENANCE = "perception-writer/1"
"""What follows a speech memory's quote when the same words were on screen (read by consolidation's pre-check,
which judges only what was said)."""


class PerceptionWriter:
    """The :class:`~m3agent.memorize.MemoryWriter` over :func:`clip_memories` and the scene memories (no model,
    no equivalences: face-voice links come from audio-visual evidence in identity resolution)."""

    def write(self, clip_input: ClipInput) -> WriterOutput:
        from m3agent.memorize.scene_memories import scene_memories

        inp = clip_input
        size = (inp.frames[0].image.shape[1], inp.frames[0].image.shape[0]) if inp.frames else None
        said = utterances(inp.voices, [s.start_s for s in inp.senses.shots if s.cut])
        captions = spoken_captions(inp.senses.texts, said)
        merged = {id(t) for group in captions.values() for t in group}
        senses = dataclasses.replace(inp.senses, texts=tuple(t for t in inp.senses.texts if id(t) not in merged))
        memories = clip_memories(inp.clip, inp.tracks, said, inp.fps, shots=inp.senses.shots, frame_size=size,
                                 captions=captions, presence=not inp.senses.shots)
        memories += scene_memories(inp.clip, senses, inp.tracks, inp.voices, frame_size=size)
        memories.sort(key=lambda m: (m.start_s, m.kind.value))
        return WriterOutput(memories=tuple(memories))


def create(spec: BackendSpec, **_: Any) -> PerceptionWriter:
    """Factory of the ``perception`` writer (it takes no options)."""
    return PerceptionWriter()


def write_clip(clip: Clip, tracks: Sequence[FaceTrack], voices: Sequence[VoiceSegment], fps: float,
               shots: Sequence[Shot] = (), frame_size: tuple[int, int] | None = None) -> list[Memory]:
    """All memories of one clip without its scene stages, in time order (embeddings are added by the caller).

    ``shots`` split presence (none: the clip is one shot); ``frame_size`` (width, height) adds where in the
    picture each person is (none: presence without a place)."""
    said = utterances(voices, [s.start_s for s in shots if s.cut])
    return clip_memories(clip, tracks, said, fps, shots=shots, frame_size=frame_size)


def clip_memories(clip: Clip, tracks: Sequence[FaceTrack], said: Sequence[Utterance], fps: float, *,
                  shots: Sequence[Shot] = (), frame_size: tuple[int, int] | None = None,
                  captions: Mapping[int, Sequence[ScreenText]] | None = None, presence: bool = True) -> list[Memory]:
    """Presence (unless ``presence`` is False: the shot summaries say who is where), speech with the captions
    that restate it (``captions``: index into ``said`` -> lines) and self-given names, in time order."""
    spans = [(s.start_s, s.end_s) for s in shots] or [(clip.start_s, clip.end_s)]
    memories = _presence_memories(clip, tracks, spans, gap=2.5 / fps, frame_size=frame_size) if presence else []
    memories += _speech_memories(clip, said, captions or {})
    memories += _name_memories(clip, said)
    memories.sort(key=lambda m: (m.start_s, m.kind.value))
    return memories


def _memory(clip: Clip, kind: MemoryKind, text: str, start: float, end: float, entities: Iterable[int],
            confidence: float = 1.0) -> Memory:
    return Memory(kind=kind, text=text, video_id=clip.video_id, clip_index=clip.index, start_s=start, end_s=end,
                  entity_ids=tuple(dict.fromkeys(entities)), confidence=confidence, provenance=PROVENANCE)


def _presence_memories(clip: Clip, tracks: Sequence[FaceTrack], shots: Sequence[tuple[float, float]], gap: float,
                       frame_size: tuple[int, int] | None) -> list[Memory]:
    """One memory per face entity per shot it is seen in: its intervals there and its usual place."""
    seen: dict[tuple[int, int], list[FaceObservation]] = defaultdict(list)
    for track in tracks:
        for obs in track.observations:
            shot = _shot_index(shots, obs.time_s)
            if obs.entity_id is not None and shot is not None:
                seen[(shot, obs.entity_id)].append(obs)
    heights = largest_heights(tracks)
    out = []
    for (_, entity), observations in sorted(seen.items()):
        observations.sort(key=lambda o: o.time_s)
        spans = _intervals([o.time_s for o in observations], gap)
        when = ", ".join(span(a, b) for a, b in spans)
        place = place_words(observations, heights, frame_size)
        text = f"{tags.face(entity)} is on screen {when}{', ' + place if place else ''}."
        out.append(_memory(clip, MemoryKind.EPISODIC, text, spans[0][0], spans[-1][1], [entity]))
    return out


def _shot_index(shots: Sequence[tuple[float, float]], t: float) -> int | None:
    """The shot holding time ``t`` (a shot's end belongs to the next one; the last shot keeps its end)."""
    for i, (start, end) in enumerate(shots):
        if start <= t < end or (i == len(shots) - 1 and start <= t <= end + 1e-6):
            return i
    return None


def _intervals(times: list[float], gap: float) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    for t in times:
        if spans and t - spans[-1][1] <= gap:
            spans[-1] = (spans[-1][0], t)
        else:
            spans.append((t, t))
    return spans


def _speech_memories(clip: Clip, said: Sequence[Utterance],
                     captions: Mapping[int, Sequence[ScreenText]]) -> list[Memory]:
    out = []
    for i, utterance in enumerate(said):
        line = says_line(utterance.start_s, tags.voice(utterance.entity_id), utterance.text,
                         tuple(t.text for t in captions.get(i, ())))
        out.append(_memory(clip, MemoryKind.EPISODIC, line, utterance.start_s, utterance.end_s,
                           [utterance.entity_id]))
    return out


def _name_memories(clip: Clip, said: Sequence[Utterance]) -> list[Memory]:
    out = []
    for utterance in said:
        for name in self_names(utterance.text):
            text = f"{tags.voice(utterance.entity_id)}'s name is {name}."
            out.append(_memory(clip, MemoryKind.SEMANTIC, text, utterance.start_s, utterance.end_s,
                               [utterance.entity_id], 0.7))
    return out
