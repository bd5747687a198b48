"""One voice entity per person: voice entities of one speaking face become one entity.

The diarizer and the voice bank sometimes split one person into several voice
entities (a turn recorded in another room, a shouted reply, a different
microphone in another video). The face evidence reconsiders them after each
clip's linking: voice entities that are

* linked (at least ``link_accept``) to the same face and to no other face,
* never heard at the same time (overlap at most ``max_overlap_s`` in this
  clip's video and in the videos where either was first heard; two people
  talking over each other are two people),
* not clearly different voices (speaker-embedding score at least ``min_similarity``),
* and not a pair whose earlier merge was undone,

are proposed for one entity: the oldest (smallest id) keeps, the others are
absorbed. Two people seen together are two faces, so a voice linked to each
face keeps them apart; a voice linked to two faces is left alone. The store
records each merge with the evidence below, and it can be undone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from m3agent import tags
from m3agent.domain import FaceVoiceLink
from m3agent.intervals import union


@dataclass(frozen=True, slots=True)
class MergeRule:
    link_accept: float = 0.5
    max_overlap_s: float = 0.1
    min_similarity: float = 0.6


@dataclass(frozen=True, slots=True)
class VoiceMerge:
    """Fold voice entity ``absorb`` into ``keep``: both speak through ``face``."""

    keep: int
    absorb: int
    face: int
    evidence: str


Span = tuple[float, float, int]  # (start s, end s, voice entity) within one video


def propose(links: Iterable[FaceVoiceLink], spans_by_video: Mapping[str, Sequence[Span]], heard: set[int],
            similarity: Callable[[int, int], float], rule: MergeRule,
            refused: Collection[frozenset[int]] = ()) -> list[VoiceMerge]:
    """Merges the face evidence justifies, for faces with a voice in ``heard`` (this clip's voices)."""
    links = list(links)
    confidence = {(link.face_id, link.voice_id): link.confidence for link in links
                  if link.confidence >= rule.link_accept}
    proposals = []
    for face, own in sorted(candidate_groups(links, heard, rule).items()):
        proposals += _merges_of_face(face, own, spans_by_video, similarity, rule, refused, confidence)
    return proposals


def candidate_groups(links: Iterable[FaceVoiceLink], heard: set[int], rule: MergeRule) -> dict[int, list[int]]:
    """Per face, its own voices (linked to it and no other face), when there are two or more and one is heard."""
    faces_of: dict[int, set[int]] = defaultdict(set)
    voices_of: dict[int, set[int]] = defaultdict(set)
    for link in links:
        if link.confidence >= rule.link_accept:
            faces_of[link.voice_id].add(link.face_id)
            voices_of[link.face_id].add(link.voice_id)
    groups = {}
    for face, voices in voices_of.items():
        own = sorted(v for v in voices if faces_of[v] == {face})
        if len(own) >= 2 and heard & set(own):
            groups[face] = own
    return groups


def _merges_of_face(face: int, voices: list[int], spans_by_video: Mapping[str, Sequence[Span]],
                    similarity: Callable[[int, int], float], rule: MergeRule, refused: Collection[frozenset[int]],
                    confidence: dict[tuple[int, int], float]) -> list[VoiceMerge]:
    keep, group, out = voices[0], [voices[0]], []
    for voice in voices[1:]:
        if any(frozenset((member, voice)) in refused for member in group):
            continue
        overlap = max((_overlap(spans, group, voice) for spans in spans_by_video.values()), default=0.0)
        score = similarity(keep, voice)
        if overlap > rule.max_overlap_s or score < rule.min_similarity:
            continue
        group.append(voice)
        evidence = (f"{tags.voice(voice)} and {tags.voice(keep)} both speak through {tags.face(face)} "
                    f"(links {confidence[(face, voice)]:.2f} and {confidence[(face, keep)]:.2f}, no other face), "
                    f"never at the same time (overlap {overlap:.2f} s); voice similarity {score:.2f}")
        out.append(VoiceMerge(keep, voice, face, evidence))
    return out


def _overlap(spans: Sequence[Span], group: Sequence[int], voice: int) -> float:
    """Seconds in which ``voice`` and any member of ``group`` are heard at once in one video."""
    mine = union((a, b) for a, b, v in spans if v == voice)
    theirs = union((a, b) for a, b, v in spans if v in group)
    total, j = 0.0, 0
    for start, end in mine:
        while j < len(theirs) and theirs[j][1] <= start:
            j += 1
        k = j
        while k < len(theirs) and theirs[k][0] < end:
            total += max(0.0, min(end, theirs[k][1]) - max(start, theirs[k][0]))
            k += 1
    return total
