"""Face<->voice equivalence from audio-visual evidence, accumulated over clips.

Two kinds of evidence, strongest first:

* **Lip sync** (active speaker detection): each face sighting carries the
  mouth-motion cue of :mod:`m3agent.perception.asd`; per (face, voice) pair,
  its Pearson correlation with how much of each sampling interval the voice
  speaks. When at least two faces were watched long enough while the voice
  spoke, the voice links to the face whose lips move with it, if that face's
  correlation is positive and beats the next face's by a margin. This is what
  tells two people apart who are on screen together all the time. The speech
  it correlates with is the voice's turns (:func:`speech_turns`), not the
  transcript's segments, and their bounds count as known to within
  :data:`BOUNDARY_TOLERANCE_S`: segment bounds are where the ASR model put
  words, and they differ between models and CPUs by tenths of a second.
* **Co-presence**: while a voice speaks, the faces on screen collect credit: each sampled
frame inside a voice segment gives ``1/fps`` seconds, split evenly among
the faces visible in it (a lone face gets all of it, two faces half each).
A voice is linked to a face when that face holds most of the voice's
speech time, clearly more than any other face, and the voice is also the
best voice for that face (mutual best). Confidence is the face's share of
the voice's speech time. A voice the lips settle is not decided by co-presence.

Links are recomputed from all evidence after every
clip, so a link that later evidence contradicts is revoked (confidence 0).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.domain import FaceObservation, FaceVoiceLink, LinkSource, VoiceSegment
from m3agent.intervals import union
from m3agent.perception.audio.vad import GENEROUS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.settings import PerceptionSettings

Span = tuple[float, float, int]  # (start_s, end_s, voice entity)

BOUNDARY_TOLERANCE_S = 0.3
"""How well the bounds of a voice's speech are known. Measured on the debate clip: the turn changes that
tiny.en, base and the diarizer's turns put at one place differ by 0.0-0.18 s, once by 0.34 s (Trump's
first words: 3.78 s diarized, 3.84 s base, 4.12 s tiny.en). Lip sync averages each interval's speech
share over this much shift of the interval, so a bound moved this far changes the evidence only gradually."""

MAX_PAUSE_S = GENEROUS.min_silence_s + 2 * GENEROUS.pad_s
"""0.6 s: the longest pause inside one speech region of the generous VAD segmentation (what the
diarizer's turns and the transcriber cover), so not a silence of the speaker: a voice's transcript
segments this close are one turn (the debate's pauses between segments of one voice are 0.0-0.46 s)."""
PAUSE_SPREAD = (0.5, 0.75, 1.0, 1.25, 1.5)
"""Lip sync is averaged over turns joined at these multiples of :data:`MAX_PAUSE_S` (0.3-0.9 s), so no single
threshold decides: on an AVX-512 host the debate's base transcript left a 0.5 s pause inside Clinton's lines, and
bounds moved by 0.2-0.3 s pushed it past 0.6 s, split her turn and took her own r from 0.34 to 0.04-0.12; averaged,
it stays 0.15-0.36 in every draw (docs/benchmarks.md, "The AVX-512 failure reproduced")."""


FROZEN_MOTION = 1e-6
"""A mouth-motion sample this close to 0 means the face's pixels did not change at all between two frames:
a still picture (a photo, a slide, a frozen frame), whose lips cannot speak. On the people-and-order episode
all 21 samples of the face in a photo shown under a speech were exactly 0, and none of the 307 samples of
live faces was."""


@dataclass(frozen=True, slots=True)
class LinkRule:
    """Co-presence: ``min_share``, ``min_seconds``, ``dominance``; lip sync: the ``lip_*`` fields."""

    min_share: float = 0.5
    min_seconds: float = 1.5
    dominance: float = 1.5
    lip_min_r: float = 0.1
    lip_margin: float = 0.25
    lip_min_samples: int = 10

    @classmethod
    def from_settings(cls, perception: PerceptionSettings) -> LinkRule:
        return cls(lip_min_r=perception.lip_sync_min, lip_margin=perception.lip_sync_margin,
                   lip_min_samples=perception.lip_sync_samples)


@dataclass(frozen=True, slots=True)
class LipSync:
    """Correlation ``r`` of a face's mouth motion with a voice's speech over ``samples`` intervals,
    in which the voice spoke ``speech_seconds``."""

    r: float
    samples: int
    speech_seconds: float


@dataclass(frozen=True, slots=True)
class AVEvidence:
    """Seconds each (face, voice) pair co-occurred, seconds each voice spoke, and lip sync per pair."""

    co_seconds: dict[tuple[int, int], float]
    speech_seconds: dict[int, float]
    lip_sync: dict[tuple[int, int], LipSync] = field(default_factory=dict)


def collect_evidence(faces: Iterable[FaceObservation], voices: Iterable[VoiceSegment], fps: float) -> AVEvidence:
    """Credit visible faces for every sampled frame that falls inside a voice segment; lip sync too."""
    faces = [f for f in faces if f.entity_id is not None]
    sightings = [(f.time_s, f.entity_id) for f in faces if f.entity_id is not None]
    motions = [(f.time_s, f.entity_id, f.mouth_motion) for f in faces
               if f.entity_id is not None and f.mouth_motion is not None]
    spans = [(v.start_s, v.end_s, v.entity_id) for v in voices if v.entity_id is not None]
    return evidence_from(sightings, spans, fps, motions)


def evidence_from(sightings: Iterable[tuple[float, int]], spans: Iterable[Span],
                  fps: float, motions: Iterable[tuple[float, int, float]] = ()) -> AVEvidence:
    """:func:`collect_evidence` over ``(time, face)`` sightings, ``(start, end, voice)`` spans and
    ``(time, face, mouth motion)`` samples (the motion over the sampling interval ending at ``time``).

    Lip sync is measured against the voices' :func:`speech_turns` with :data:`BOUNDARY_TOLERANCE_S`,
    averaged over the pauses of :data:`PAUSE_SPREAD` (:func:`spread_lip_sync`), so it does not hinge on where
    the transcript's segments start and end. A sighting of a frozen face
    (:data:`FROZEN_MOTION`) earns no co-presence: a voice heard over a photo is not the photo's.
    """
    spans, motions = list(spans), list(motions)
    frozen = {(round(t, 3), face) for t, face, m in motions if abs(m) < FROZEN_MOTION}
    live = [(t, face) for t, face in sightings if (round(t, 3), face) not in frozen]
    co, speech = _co_presence(live, spans, fps)
    return AVEvidence(co, speech, spread_lip_sync(motions, spans, 1.0 / fps))


def spread_lip_sync(motions: Sequence[tuple[float, int, float]], spans: Sequence[Span],
                    step: float) -> dict[tuple[int, int], LipSync]:
    """:func:`lip_sync` against the voices' turns joined at each pause of :data:`PAUSE_SPREAD`, its r averaged per
    pair (a pair measured under only some of the joins counts the others as 0); samples and seconds spoken as at
    :data:`MAX_PAUSE_S`."""
    runs = [lip_sync(motions, speech_turns(spans, MAX_PAUSE_S * k), step, tolerance=BOUNDARY_TOLERANCE_S)
            for k in PAUSE_SPREAD]
    middle = runs[PAUSE_SPREAD.index(1.0)]
    out = {}
    for pair in set().union(*runs):
        kept = middle.get(pair) or next(r[pair] for r in runs if pair in r)
        mean = sum(r[pair].r if pair in r else 0.0 for r in runs) / len(runs)
        out[pair] = LipSync(round(mean, 4), kept.samples, kept.speech_seconds)
    return out


def speech_turns(spans: Iterable[Span], max_pause: float) -> list[Span]:
    """Each voice's speech as turns, in time order: what its lips are compared with.

    A transcript segment starts and ends where the ASR model put its first and last word, so the
    segments' bounds, the gaps between them and their number differ between models and CPUs; a
    pause of a few tenths of a second between them is no silence the lips show, sampled every
    half second (2 fps). A voice's span joins its last turn across a pause of at most ``max_pause`` unless
    another voice began speaking in it; when the voice changes after such a pause, the change is
    put in the pause's middle. Zero-length spans (words whose timestamps collapsed) still say the
    voice spoke there; turns that stay zero-length are left out.
    """
    turns: list[Span] = []
    last_of: dict[int, int] = {}
    for start, end, voice in sorted((s for s in spans if s[1] >= s[0]), key=lambda s: (s[0], s[1])):
        mine = last_of.get(voice)
        if mine is not None and _continues(turns, mine, start, max_pause):
            turns[mine] = (turns[mine][0], max(turns[mine][1], end), voice)
            continue
        if turns and turns[-1][2] != voice and 0 < start - turns[-1][1] <= max_pause:
            start = (turns[-1][1] + start) / 2
            turns[-1] = (turns[-1][0], start, turns[-1][2])
        last_of[voice] = len(turns)
        turns.append((start, max(start, end), voice))
    return [turn for turn in turns if turn[1] > turn[0]]


def _continues(turns: Sequence[Span], index: int, start: float, max_pause: float) -> bool:
    """Whether speech from ``start`` continues turn ``index``: a short pause, and no other voice began in it
    (one that began before the turn ended, a word said over it, takes nothing over)."""
    end = turns[index][1]
    return start - end <= max_pause and all(other[0] < end for other in turns[index + 1:])


def _co_presence(sightings: Iterable[tuple[float, int]], spans: Sequence[tuple[float, float, int]],
                 fps: float) -> tuple[dict[tuple[int, int], float], dict[int, float]]:
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
    return dict(co), dict(speech)


def lip_sync(motions: Iterable[tuple[float, int, float]], spans: Sequence[Span], step: float,
             tolerance: float = 0.0) -> dict[tuple[int, int], LipSync]:
    """Per (face, voice): correlation of the face's mouth motion with the voice's share of each interval.

    The interval of a sample at ``t`` is ``[t - step, t]``; with a ``tolerance``, its share is the mean
    over the interval shifted by every offset in ``[-tolerance, tolerance]`` (speech bounds known only
    that well). Pairs whose voice is silent in all of the face's intervals, or speaks in all of them
    (nothing to correlate), get no entry.
    """
    import numpy as np

    by_face: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for time_s, face_id, value in motions:
        by_face[face_id].append((time_s, value))
    if not by_face:
        return {}
    times = np.unique([t for samples in by_face.values() for t, _ in samples])  # faces share sampled frames
    faces = {face_id: (np.searchsorted(times, [t for t, _ in samples]), np.array([m for _, m in samples]))
             for face_id, samples in by_face.items()}
    out: dict[tuple[int, int], LipSync] = {}
    for voice_id, clock in speech_clocks(spans).items():
        plain, shares = clock.share(times, step), clock.share(times, step, tolerance)
        for face_id, (at, motion) in faces.items():
            if np.ptp(plain[at]) < 1e-9:  # float noise of a share that is constant
                continue
            share = shares[at]
            r = _pearson(motion, share)
            if r is not None:
                out[(face_id, voice_id)] = LipSync(round(r, 4), len(motion), round(float(share.sum()) * step, 2))
    return out


@dataclass(frozen=True, slots=True, eq=False)
class SpeechClock:
    """One voice's speech as disjoint pieces in time order (``starts``, ``lengths``), with the seconds
    spoken and the integral of that clock up to each piece's start, so shares of any intervals are exact."""

    starts: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.float64]
    spoken_before: npt.NDArray[np.float64]
    integral_before: npt.NDArray[np.float64]

    @classmethod
    def of(cls, pieces: Sequence[tuple[float, float]]) -> SpeechClock:
        """The clock of the union of ``pieces`` (``(start, end)``, any order, overlaps allowed)."""
        import numpy as np

        merged = union(pieces)
        starts = np.array([a for a, _ in merged], dtype=np.float64)
        lengths = np.array([b - a for a, b in merged], dtype=np.float64)
        spoken = np.concatenate([[0.0], np.cumsum(lengths)[:-1]])
        gaps = np.diff(starts)  # piece k and the silence after it, up to the next piece
        pieces_area = spoken[:-1] * gaps + lengths[:-1] ** 2 / 2 + lengths[:-1] * (gaps - lengths[:-1])
        integral = np.concatenate([[0.0], np.cumsum(pieces_area)])
        return cls(starts, lengths, spoken, integral)

    def spoken(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Seconds spoken up to each of ``times``."""
        import numpy as np

        after, index, into = self._locate(times)
        value = self.spoken_before[index] + np.clip(into, 0.0, self.lengths[index])
        return np.asarray(np.where(after, value, 0.0), dtype=np.float64)

    def integral(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The integral of :meth:`spoken` from before the first piece up to each of ``times``."""
        import numpy as np

        after, index, into = self._locate(times)
        length = self.lengths[index]
        inside = np.clip(into, 0.0, length)
        value = (self.integral_before[index] + self.spoken_before[index] * into + inside * inside / 2
                 + length * np.maximum(0.0, into - length))
        return np.asarray(np.where(after, value, 0.0), dtype=np.float64)

    def share(self, times: npt.NDArray[np.float64], step: float, tolerance: float = 0.0) -> npt.NDArray[np.float64]:
        """The share of each interval ``[t - step, t]`` spoken; with a ``tolerance``, its mean over the
        interval shifted by every offset in ``[-tolerance, tolerance]`` (exact: differences of :meth:`integral`)."""
        if tolerance <= 0:
            return (self.spoken(times) - self.spoken(times - step)) / step
        area = (self.integral(times + tolerance) - self.integral(times - tolerance)
                - self.integral(times - step + tolerance) + self.integral(times - step - tolerance))
        return area / (2 * tolerance * step)

    def _locate(self, times: npt.NDArray[np.float64]
                ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """Per time: whether it is at or after the first piece's start, the last piece that started by
        then (0 before the first), and the seconds since that piece's start."""
        import numpy as np

        found = np.searchsorted(self.starts, times, side="right") - 1
        index = np.maximum(found, 0)
        return found >= 0, index, np.asarray(times - self.starts[index], dtype=np.float64)


def speech_clocks(spans: Sequence[Span]) -> dict[int, SpeechClock]:
    """Per voice, the :class:`SpeechClock` of its spans (empty and reversed spans ignored)."""
    by_voice: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for start, end, voice_id in spans:
        if end > start:
            by_voice[voice_id].append((start, end))
    return {voice_id: SpeechClock.of(pieces) for voice_id, pieces in by_voice.items()}


def _pearson(a: Any, b: Any) -> float | None:
    import numpy as np

    da, db = a - a.mean(), b - b.mean()
    norm = float(np.sqrt((da * da).sum() * (db * db).sum()))
    return float((da * db).sum()) / norm if norm > 1e-12 else None


def _times_within(times: Sequence[float], start: float, end: float) -> list[float]:
    import bisect

    lo = bisect.bisect_left(times, start)
    hi = bisect.bisect_left(times, end)
    return list(times[lo:hi])


def decide_links(evidence: AVEvidence, rule: LinkRule) -> list[FaceVoiceLink]:
    """Lip-sync links where the lips settle it, else mutual-best co-presence pairs that meet the rules."""
    by_voice: dict[int, list[tuple[float, int]]] = defaultdict(list)
    by_face: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for (face_id, voice_id), seconds in evidence.co_seconds.items():
        by_voice[voice_id].append((seconds, face_id))
        by_face[face_id].append((seconds, voice_id))
    links = []
    for voice_id, candidates in by_voice.items():
        lips = lip_link(evidence, voice_id, rule)
        if lips is not None:
            links.append(lips)
            continue
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


def lip_link(evidence: AVEvidence, voice_id: int, rule: LinkRule) -> FaceVoiceLink | None:
    """The face whose lips move with the voice, when at least two faces were watched while it spoke.

    Confidence is 0.5 plus the margin over the next face (at most 0.95): a margin of
    ``rule.lip_margin`` or more clears the default link bar of 0.5 with room to spare.
    """
    ranked = sorted(((sync.r, face_id) for (face_id, voice), sync in evidence.lip_sync.items()
                     if voice == voice_id and sync.samples >= rule.lip_min_samples
                     and sync.speech_seconds >= rule.min_seconds), reverse=True)
    if len(ranked) < 2:
        return None
    (best, face_id), (runner_up, _) = ranked[0], ranked[1]
    if best < rule.lip_min_r or best - runner_up < rule.lip_margin:
        return None
    confidence = round(min(0.95, 0.5 + best - runner_up), 3)
    sync = evidence.lip_sync[(face_id, voice_id)]
    words = (f"lips move with the voice (r {best:.2f} against {runner_up:.2f} for the next face, "
             f"{sync.samples} samples); {describe(evidence, face_id, voice_id)}")
    return FaceVoiceLink(face_id, voice_id, confidence=confidence, source=LinkSource.AV, evidence=words)


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
