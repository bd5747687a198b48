"""The perception-only memory writer: deterministic memories without any LLM.

Episodic memories say who is on screen when, who appears with whom, and who
says what (one memory per utterance: a speaker's contiguous, sentence-complete
speech, :mod:`m3agent.memorize.utterances`, with timestamps). Semantic memories
record names people give for themselves ("my name is Ann", "I'm Ann") or are
addressed by. People are named only by entity tags; the store maps tags to
characters and names at read time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.domain import Clip, FaceTrack, Memory, MemoryKind, VoiceSegment
from m3agent.memorize.inputs import ClipInput, WriterOutput
from m3agent.memorize.utterances import utterances
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
        memories = write_clip(inp.clip, inp.tracks, inp.voices, inp.fps)
        memories += scene_memories(inp.clip, inp.senses, inp.tracks, inp.voices)  # text, objects, sounds, shots
        memories.sort(key=lambda m: (m.start_s, m.kind.value))
        return WriterOutput(memories=tuple(memories))


def create(spec: BackendSpec, **_: Any) -> PerceptionWriter:
    """Factory of the ``perception`` writer (it takes no options)."""
    return PerceptionWriter()


def write_clip(clip: Clip, tracks: Sequence[FaceTrack], voices: Sequence[VoiceSegment], fps: float) -> list[Memory]:
    """All memories of one clip, in time order (embeddings are added by the caller)."""
    visible = _visibility(tracks, gap=2.5 / fps)
    memories = _presence_memories(clip, visible)
    memories += _together_memories(clip, tracks)
    memories += _speech_memories(clip, voices)
    memories += _name_memories(clip, voices)
    memories.sort(key=lambda m: (m.start_s, m.kind.value))
    return memories


def _memory(clip: Clip, kind: MemoryKind, text: str, start: float, end: float, entities: Iterable[int],
            confidence: float = 1.0) -> Memory:
    return Memory(kind=kind, text=text, video_id=clip.video_id, clip_index=clip.index, start_s=start, end_s=end,
                  entity_ids=tuple(dict.fromkeys(entities)), confidence=confidence, provenance=PROVENANCE)


def _visibility(tracks: Sequence[FaceTrack], gap: float) -> dict[int, list[tuple[float, float]]]:
    """Per face entity, merged intervals of being on screen."""
    times: dict[int, list[float]] = defaultdict(list)
    for track in tracks:
        for obs in track.observations:
            if obs.entity_id is not None:
                times[obs.entity_id].append(obs.time_s)
    return {entity: _intervals(sorted(ts), gap) for entity, ts in times.items()}


def _intervals(times: list[float], gap: float) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    for t in times:
        if spans and t - spans[-1][1] <= gap:
            spans[-1] = (spans[-1][0], t)
        else:
            spans.append((t, t))
    return spans


def _presence_memories(clip: Clip, visible: dict[int, list[tuple[float, float]]]) -> list[Memory]:
    out = []
    for entity, spans in sorted(visible.items()):
        when = ", ".join(f"{clock(a)} to {clock(b)}" for a, b in spans)
        seen = sum(b - a for a, b in spans)
        text = f"{tags.face(entity)} is on screen from {when} (about {max(seen, 1):.0f} s)."
        out.append(_memory(clip, MemoryKind.EPISODIC, text, spans[0][0], spans[-1][1], [entity]))
    return out


def _together_memories(clip: Clip, tracks: Sequence[FaceTrack]) -> list[Memory]:
    frames: dict[float, set[int]] = defaultdict(set)
    for track in tracks:
        for obs in track.observations:
            if obs.entity_id is not None:
                frames[round(obs.time_s, 3)].add(obs.entity_id)
    pairs: dict[tuple[int, int], list[float]] = defaultdict(list)
    for t, entities in frames.items():
        ordered = sorted(entities)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                pairs[(a, b)].append(t)
    out = []
    for (a, b), ts in sorted(pairs.items()):
        when = f"{clock(min(ts))} to {clock(max(ts))}"
        text = f"{tags.face(a)} and {tags.face(b)} appear on screen together around {when}."
        out.append(_memory(clip, MemoryKind.EPISODIC, text, min(ts), max(ts), [a, b]))
    return out


def _speech_memories(clip: Clip, voices: Sequence[VoiceSegment]) -> list[Memory]:
    out = []
    for said in utterances(voices):
        line = f'At {clock(said.start_s)} {tags.voice(said.entity_id)} says: "{said.text}"'
        out.append(_memory(clip, MemoryKind.EPISODIC, line, said.start_s, said.end_s, [said.entity_id]))
    return out


def _name_memories(clip: Clip, voices: Sequence[VoiceSegment]) -> list[Memory]:
    out = []
    for said in utterances(voices):
        for name in self_names(said.text):
            text = f"{tags.voice(said.entity_id)}'s name is {name}."
            out.append(_memory(clip, MemoryKind.SEMANTIC, text, said.start_s, said.end_s, [said.entity_id], 0.7))
    return out
