"""The perception-only memory writer: deterministic memories without any LLM.

Episodic memories say who is on screen in each shot and where in the picture
(one memory per person per shot), and who says what (one memory per utterance: a
speaker's contiguous, sentence-complete speech, :mod:`m3agent.memorize.utterances`,
with timestamps). Who appears with whom is not written as sentences (n people
would make n(n-1)/2 of them per clip): it is a relation of the entity graph
(:meth:`m3agent.graph.operators.EntityGraph.together`), read from the faces. Semantic memories
record names people give for themselves ("my name is Ann", "I'm Ann") or are
addressed by. People are named only by entity tags; the store maps tags to
characters and names at read time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.domain import Clip, FaceObservation, FaceTrack, Memory, MemoryKind, Shot, VoiceSegment
from m3agent.memorize.inputs import ClipInput, WriterOutput
from m3agent.memorize.scene_memories import span
from m3agent.memorize.utterances import utterances
from m3agent.perception.attributes.position import PLACE_WORDS, frame_position, typical_position
from m3agent.text import clock, self_names

if TYPE_CHECKING:
    from m3agent.registry import BackendSpec

PROVENANCE = "perception-writer/1"


class PerceptionWriter:
    """The :class:`~m3agent.memorize.MemoryWriter` over :func:`write_clip` (no model, no equivalences:
    face-voice links come from audio-visual evidence in identity resolution)."""

    def write(self, clip_input: ClipInput) -> WriterOutput:
        from m3agent.memorize.scene_memories import scene_memories

        inp = clip_input
        size = (inp.frames[0].image.shape[1], inp.frames[0].image.shape[0]) if inp.frames else None
        memories = write_clip(inp.clip, inp.tracks, inp.voices, inp.fps, shots=inp.senses.shots, frame_size=size)
        memories += scene_memories(inp.clip, inp.senses, inp.tracks, inp.voices)  # text, objects, sounds, shots
        memories.sort(key=lambda m: (m.start_s, m.kind.value))
        return WriterOutput(memories=tuple(memories))


def create(spec: BackendSpec, **_: Any) -> PerceptionWriter:
    """Factory of the ``perception`` writer (it takes no options)."""
    return PerceptionWriter()


def write_clip(clip: Clip, tracks: Sequence[FaceTrack], voices: Sequence[VoiceSegment], fps: float,
               shots: Sequence[Shot] = (), frame_size: tuple[int, int] | None = None) -> list[Memory]:
    """All memories of one clip, in time order (embeddings are added by the caller).

    ``shots`` split presence (none: the clip is one shot); ``frame_size`` (width, height) adds where in the
    picture each person is (none: presence without a place)."""
    spans = [(s.start_s, s.end_s) for s in shots] or [(clip.start_s, clip.end_s)]
    memories = _presence_memories(clip, tracks, spans, gap=2.5 / fps, frame_size=frame_size)
    cuts = [s.start_s for s in shots if s.cut]
    memories += _speech_memories(clip, voices, cuts)
    memories += _name_memories(clip, voices, cuts)
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
    heights: dict[float, float] = defaultdict(float)  # the largest face at each sampled time
    for track in tracks:
        for obs in track.observations:
            key = round(obs.time_s, 3)
            heights[key] = max(heights[key], obs.bbox.height)
    out = []
    for (_, entity), observations in sorted(seen.items()):
        observations.sort(key=lambda o: o.time_s)
        spans = _intervals([o.time_s for o in observations], gap)
        when = ", ".join(span(a, b) for a, b in spans)
        place = _place(observations, heights, frame_size)
        text = f"{tags.face(entity)} is on screen {when}{place}."
        out.append(_memory(clip, MemoryKind.EPISODIC, text, spans[0][0], spans[-1][1], [entity]))
    return out


def _shot_index(shots: Sequence[tuple[float, float]], t: float) -> int | None:
    """The shot holding time ``t`` (a shot's end belongs to the next one; the last shot keeps its end)."""
    for i, (start, end) in enumerate(shots):
        if start <= t < end or (i == len(shots) - 1 and start <= t <= end + 1e-6):
            return i
    return None


def _place(observations: Sequence[FaceObservation], heights: dict[float, float],
           frame_size: tuple[int, int] | None) -> str:
    """``, on the left`` / ``, in the centre, in the background`` …: the person's usual place in the shot,
    compared with the largest face sampled at the same times (``heights``; empty without a frame size)."""
    if frame_size is None:
        return ""
    width, height = frame_size
    positions = []
    for obs in observations:
        try:
            positions.append(frame_position(obs.bbox, width, height, largest_height=heights[round(obs.time_s, 3)]))
        except ValueError:  # an empty box: no place from it
            continue
    typical = typical_position(positions)
    if typical is None:
        return ""
    return f", {PLACE_WORDS[typical.horizontal]}" + (", in the background" if typical.depth == "background" else "")


def _intervals(times: list[float], gap: float) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    for t in times:
        if spans and t - spans[-1][1] <= gap:
            spans[-1] = (spans[-1][0], t)
        else:
            spans.append((t, t))
    return spans


def _speech_memories(clip: Clip, voices: Sequence[VoiceSegment], cuts: Sequence[float]) -> list[Memory]:
    out = []
    for said in utterances(voices, cuts):
        line = f'At {clock(said.start_s)} {tags.voice(said.entity_id)} says: "{said.text}"'
        out.append(_memory(clip, MemoryKind.EPISODIC, line, said.start_s, said.end_s, [said.entity_id]))
    return out


def _name_memories(clip: Clip, voices: Sequence[VoiceSegment], cuts: Sequence[float]) -> list[Memory]:
    out = []
    for said in utterances(voices, cuts):
        for name in self_names(said.text):
            text = f"{tags.voice(said.entity_id)}'s name is {name}."
            out.append(_memory(clip, MemoryKind.SEMANTIC, text, said.start_s, said.end_s, [said.entity_id], 0.7))
    return out
