"""Face-voice links a model stated, checked against what the clip shows before they are recorded.

The store keeps every link as evidence (source ``av`` from audio-visual
co-occurrence, ``llm`` from a writer); the latest record of a pair wins and
characters are the union-find groups of accepted pairs, each named by its
smallest base id, so ids stay stable as clips arrive (store/characters.py).
A model's claim is recorded with source ``llm`` only when it cannot merge
people this clip shows to be different:

- both entities must be in this clip, a face and a voice;
- nothing is written when they already are one character;
- the merged group may not hold two voices that both speak in this clip
  (the diarizer heard two people) nor two faces seen in the same frame;
- two established people (the face already has a voice and the voice already
  has a face, by any evidence) are not merged on a model's word.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.domain import FaceVoiceLink, LinkSource

if TYPE_CHECKING:
    from m3agent.memorize.inputs import ClipInput
    from m3agent.store.protocol import ClipWriter, MemoryStore


def record_equivalences(store: MemoryStore, writer: ClipWriter, inp: ClipInput,
                        claims: Sequence[FaceVoiceLink]) -> tuple[int, list[str]]:
    """Write the acceptable ``claims`` (source ``llm``); returns how many, and why the others were not."""
    if not claims:
        return 0, []
    clip = inp.clip
    kinds = inp.tag_kinds()
    group = {e: set(c.entity_ids) for c in store.characters(before_clip=clip.index, video_id=clip.video_id)
             for e in c.entity_ids}
    context = _Context(kinds, group, _faces_seen_together(inp), set(inp.voice_ids()), store)
    written, notes = 0, []
    for claim in claims:
        face, voice = claim.face_id, claim.voice_id
        reason = context.refusal(face, voice)
        if reason:
            notes.append(f"{tags.face(face)}~{tags.voice(voice)}: {reason}")
            continue
        evidence = claim.evidence or f"stated by the memorization model for clip {clip.index}"
        writer.set_link(FaceVoiceLink(face, voice, claim.confidence, LinkSource.LLM, evidence))
        merged = group.get(face, {face}) | group.get(voice, {voice})
        for member in merged:
            group[member] = merged
        written += 1
    return written, notes


@dataclass
class _Context:
    kinds: dict[int, str]
    group: dict[int, set[int]]
    together: set[frozenset[int]]
    speaking: set[int]
    store: MemoryStore

    def kind(self, entity: int) -> str:
        if entity not in self.kinds:
            self.kinds[entity] = self.store.get_entity(entity).kind.value
        return self.kinds[entity]

    def refusal(self, face: int, voice: int) -> str:
        """Why the claim ``face ~ voice`` must not be recorded ("" when it may)."""
        if self.kinds.get(face) != "face" or self.kinds.get(voice) != "voice":
            return "not a face and a voice of this clip"
        faces_side, voices_side = self.group.get(face, {face}), self.group.get(voice, {voice})
        if voice in faces_side:
            return "already the same character"
        merged = faces_side | voices_side
        heard = sorted(merged & self.speaking)
        if len(heard) > 1:
            return "would merge " + " and ".join(tags.voice(v) for v in heard) + ", who both speak in this clip"
        clash = sorted(sorted(pair) for pair in self.together if pair <= merged)
        if clash:
            return f"would merge {tags.face(clash[0][0])} and {tags.face(clash[0][1])}, who are seen together"
        face_has_voice = any(self.kind(e) == "voice" for e in faces_side - {face})
        voice_has_face = any(self.kind(e) == "face" for e in voices_side - {voice})
        if face_has_voice and voice_has_face:
            return "both are already linked to other entities"
        return ""


def _faces_seen_together(inp: ClipInput) -> set[frozenset[int]]:
    frames: dict[float, set[int]] = defaultdict(set)
    for track in inp.tracks:
        for obs in track.observations:
            if obs.entity_id is not None:
                frames[round(obs.time_s, 3)].add(obs.entity_id)
    return {frozenset(p) for ids in frames.values() for p in _pairs(sorted(ids))}


def _pairs(ids: list[int]) -> Iterable[tuple[int, int]]:
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            yield a, b
