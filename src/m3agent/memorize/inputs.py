"""What a memory writer reads for one clip (:class:`ClipInput`) and what it returns (:class:`WriterOutput`).

A writer sees the clip's resolved observations, its sampled frames and audio,
and what earlier clips established (names, characters): never anything of a
later clip. Build the input with :func:`clip_input` inside the clip's store
transaction, after identity resolution, so the clip's own entities exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.domain import (
    Character,
    Clip,
    ClipSenses,
    FaceObservation,
    FaceTrack,
    FaceVoiceLink,
    Frame,
    Memory,
    VoiceSegment,
)
from m3agent.llm import Usage

if TYPE_CHECKING:
    from m3agent.domain import ClipMedia
    from m3agent.identity.resolver import ResolvedClip
    from m3agent.store.protocol import MemoryStore


@dataclass(frozen=True, slots=True, eq=False)
class ClipInput:
    """One clip as a writer sees it.

    ``tracks``/``voices`` carry entity ids (``None`` where identity was not
    established); ``frames`` are RGB arrays; ``audio`` is the clip's mono
    float32 signal at ``audio_rate`` Hz starting at ``clip.start_s``;
    ``names`` maps entity ids of this clip to names known so far;
    ``characters`` are the video's characters up to this clip;
    ``senses`` holds the scene stages' outputs (shots, on-screen text, objects, sounds).
    """

    clip: Clip
    tracks: tuple[FaceTrack, ...] = ()
    voices: tuple[VoiceSegment, ...] = ()
    frames: tuple[Frame, ...] = ()
    audio: Any | None = None
    audio_rate: int = 16000
    fps: float = 2.0
    names: Mapping[int, str] = field(default_factory=dict)
    characters: tuple[Character, ...] = ()
    senses: ClipSenses = field(default_factory=ClipSenses)

    def face_ids(self) -> tuple[int, ...]:
        """Face entities of the clip, in order of first appearance."""
        seen: dict[int, float] = {}
        for track in self.tracks:
            for obs in track.observations:
                if obs.entity_id is not None and obs.entity_id not in seen:
                    seen[obs.entity_id] = obs.time_s
        return tuple(sorted(seen, key=lambda e: (seen[e], e)))

    def voice_ids(self) -> tuple[int, ...]:
        """Voice entities that speak in the clip, in order of first speech."""
        ordered = sorted((s for s in self.voices if s.entity_id is not None), key=lambda s: s.start_s)
        return tuple(dict.fromkeys(s.entity_id for s in ordered if s.entity_id is not None))

    def tag_kinds(self) -> dict[int, str]:
        """``entity id -> "face" | "voice"`` for every entity a writer may name."""
        kinds = {e: "face" for e in self.face_ids()}
        kinds.update({e: "voice" for e in self.voice_ids()})
        return kinds

    def best_face(self, entity_id: int) -> FaceObservation | None:
        """The highest-quality observation of ``entity_id`` that has a crop."""
        cropped = [o for t in self.tracks for o in (*t.best, *t.observations)
                   if o.entity_id == entity_id and o.crop_jpeg]
        return max(cropped, key=lambda o: (o.quality, o.det_score), default=None)

    def screen_seconds(self, entity_id: int) -> float:
        """About how long face ``entity_id`` is visible (sightings / fps)."""
        return sum(1 for t in self.tracks for o in t.observations if o.entity_id == entity_id) / self.fps

    def character_of(self) -> dict[int, int]:
        return {e: c.id for c in self.characters for e in c.entity_ids}


@dataclass(frozen=True, slots=True)
class WriterOutput:
    """Memories (text naming people only by tags of this clip's entities, no embeddings yet),
    face-voice links a model stated, and the statements validation dropped (with why)."""

    memories: tuple[Memory, ...] = ()
    equivalences: tuple[FaceVoiceLink, ...] = ()
    dropped: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0


def clip_input(store: MemoryStore, media: ClipMedia, resolved: ResolvedClip, fps: float,
               senses: ClipSenses | None = None) -> ClipInput:
    """The writer input of a clip whose identities ``resolved`` has just assigned (same transaction)."""
    clip = media.clip
    characters = tuple(store.characters(before_clip=clip.index, video_id=clip.video_id))
    base = ClipInput(clip=clip, tracks=resolved.tracks, voices=resolved.voices, fps=fps)
    names = known_names(store, clip, set(base.tag_kinds()), characters)
    return ClipInput(clip=clip, tracks=resolved.tracks, voices=resolved.voices, frames=media.frames,
                     audio=media.audio, audio_rate=media.audio_rate, fps=fps, names=names,
                     characters=characters, senses=senses or ClipSenses())


def known_names(store: MemoryStore, clip: Clip, present: set[int], characters: tuple[Character, ...]) -> dict[int, str]:
    """Names of the ``present`` entities: their character's name (set by a user), else the name the
    heaviest one-person fact about the character in this video up to this clip states for them
    ("X's name is V", "X is called V": :func:`m3agent.text.stated_names`)."""
    from m3agent.domain import MemoryKind, SearchFilter
    from m3agent.text import stated_names

    names: dict[int, str] = {}
    flt = SearchFilter(video_ids=(clip.video_id,), before_clip=clip.index, kinds=(MemoryKind.SEMANTIC,))
    for character in characters:
        members = [e for e in character.entity_ids if e in present]
        if not members:
            continue
        name, best = character.name, -1.0
        for fact in ([] if name else store.memories_of_entities(character.entity_ids, flt)):
            stated = [n for tag, n in stated_names(fact.text) if tag.id in fact.entity_ids]
            if stated and len(fact.entity_ids) == 1 and fact.weight > best:
                name, best = stated[0], fact.weight
        names.update({e: name for e in members if name})
    return names
