"""Face<->voice equivalence from audio-visual co-occurrence, accumulated over clips.

While a voice speaks, the faces on screen collect credit: each sampled
frame inside a voice segment gives ``1/fps`` seconds, split evenly among
the faces visible in it (a lone face gets all of it, two faces half each).
A voice is linked to a face when that face holds most of the voice's
speech time, clearly more than any other face, and the voice is also the
best voice for that face (mutual best). Confidence is the face's share of
the voice's speech time. Links are recomputed from all evidence after every
clip, so a link that later evidence contradicts is revoked (confidence 0).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from m3agent.domain import FaceObservation, FaceVoiceLink, LinkSource, VoiceSegment


@dataclass(frozen=True, slots=True)
class LinkRule:
    min_share: float = 0.5
    min_seconds: float = 1.5
    dominance: float = 1.5


@dataclass(frozen=True, slots=True)
class AVEvidence:
    """Seconds each (face, voice) pair co-occurred, and seconds each voice spoke."""

    co_seconds: dict[tuple[int, int], float]
    speech_seconds: dict[int, float]


def collect_evidence(faces: Iterable[FaceObservation], voices: Iterable[VoiceSegment], fps: float) -> AVEvidence:
    """Credit visible faces for every sampled frame that falls inside a voice segment."""
    sightings = [(f.time_s, f.entity_id) for f in faces if f.entity_id is not None]
    spans = [(v.start_s, v.end_s, v.entity_id) for v in voices if v.entity_id is not None]
    return evidence_from(sightings, spans, fps)


def evidence_from(sightings: Iterable[tuple[float, int]], spans: Iterable[tuple[float, float, int]],
                  fps: float) -> AVEvidence:
    """:func:`collect_evidence` over ``(time, face)`` sightings and ``(start, end, voice)`` spans."""
    frames: dict[float, set[int]] = defaultdict(set)
    for time_s, face_id in sightings:
        frames[round(time_s, 3)].add(face_id)
    times = sorted(frames)
    co: dict[tuple[int, int], float] = defaultdict(float)
    speech: dict[int, float] = defaultdict(float)
    step = 1.0 / fps
    for start, end, voice_id in spans:
        if end <= start:
            continue
        speech[voice_id] += end - start
        for t in _times_within(times, start, end):
            visible = frames[t]
            for face_id in visible:
                co[(face_id, voice_id)] += step / len(visible)
    return AVEvidence(dict(co), dict(speech))


def _times_within(times: Sequence[float], start: float, end: float) -> list[float]:
    import bisect

    lo = bisect.bisect_left(times, start)
    hi = bisect.bisect_left(times, end)
    return list(times[lo:hi])


def decide_links(evidence: AVEvidence, rule: LinkRule) -> list[FaceVoiceLink]:
    """Mutual-best face<->voice pairs that meet the share, time and dominance rules."""
    by_voice: dict[int, list[tuple[float, int]]] = defaultdict(list)
    by_face: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for (face_id, voice_id), seconds in evidence.co_seconds.items():
        by_voice[voice_id].append((seconds, face_id))
        by_face[face_id].append((seconds, voice_id))
    links = []
    for voice_id, candidates in by_voice.items():
        candidates.sort(reverse=True)
        best_s, face_id = candidates[0]
        runner_up = candidates[1][0] if len(candidates) > 1 else 0.0
        share = best_s / max(evidence.speech_seconds.get(voice_id, 0.0), 1e-9)
        mutual = max(by_face[face_id])[1] == voice_id
        if (share >= rule.min_share and best_s >= rule.min_seconds and mutual
                and best_s >= rule.dominance * runner_up):
            links.append(FaceVoiceLink(face_id, voice_id, confidence=round(min(share, 1.0), 3),
                                       source=LinkSource.AV, evidence=describe(evidence, face_id, voice_id)))
    return links


def describe(evidence: AVEvidence, face_id: int, voice_id: int) -> str:
    """What an AV link of ``face_id`` and ``voice_id`` rests on, in words."""
    together = evidence.co_seconds.get((face_id, voice_id), 0.0)
    speech = evidence.speech_seconds.get(voice_id, 0.0)
    return f"face on screen {together:.1f} s of the voice's {speech:.1f} s of speech"


def revisions(current: Sequence[FaceVoiceLink], decided: Sequence[FaceVoiceLink],
              evidence: AVEvidence) -> list[FaceVoiceLink]:
    """Link updates to write: new or changed links, and revocations of dropped AV links.

    Pairs are matched by role (face, voice), never by position or id order.
    """
    decided_pairs = {(link.face_id, link.voice_id) for link in decided}
    updates = [link for link in decided if _changed(current, link)]
    for old in current:
        pair = (old.face_id, old.voice_id)
        if old.source == LinkSource.AV and old.confidence > 0 and pair not in decided_pairs:
            reason = f"revoked: {describe(evidence, *pair)}, no longer the mutual best above the link rule"
            updates.append(FaceVoiceLink(*pair, confidence=0.0, source=LinkSource.AV, evidence=reason))
    return updates


def _changed(current: Sequence[FaceVoiceLink], new: FaceVoiceLink) -> bool:
    for old in current:
        if (old.face_id, old.voice_id) == (new.face_id, new.voice_id) and old.source == new.source:
            return abs(old.confidence - new.confidence) > 0.02
    return True
