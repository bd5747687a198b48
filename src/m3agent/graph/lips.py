"""Whose lips move with a voice: the evidence face-voice links are decided on, read again when a question asks who
is speaking at a moment.

A link joins a face and a voice for good, in every answer and across videos, so identity asks for a clear margin
over the next face (``perception.lip_sync_margin``, 0.25). A question about one moment can use weaker evidence if
it says so: with no face linked to the voice heard, the face on screen whose lips move with it at least
:data:`LIKELY_MIN_R` and :data:`LIKELY_MARGIN` above every other face there is the one *most likely* speaking, and
the answer gives both correlations. The evidence is recomputed from the store exactly as identity computes it
(:func:`m3agent.identity.linking.evidence_from`: stored sightings, speech spans and mouth motions), with the
sampling interval read from the sightings themselves.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.settings import PerceptionSettings

if TYPE_CHECKING:
    from m3agent.graph.values import Person
    from m3agent.identity.linking import LipSync
    from m3agent.store.protocol import MemoryStore

LIKELY_MIN_R: float = PerceptionSettings.model_fields["lip_sync_min"].default
"""The lowest correlation that says anything: the link rule's own floor."""
LIKELY_MARGIN = 0.1
"""Over the next face on screen: less than a link needs, which is why the answer says "most likely"."""
MIN_SAMPLES: int = PerceptionSettings.model_fields["lip_sync_samples"].default
"""Sampled frame pairs a face needs while the voice is heard, as for a link."""

PairSync = dict[tuple[int, int], "LipSync"]


@dataclass(frozen=True, slots=True)
class LikelySpeaker:
    """The person whose lips move with a voice (``r``), and the best other face on screen (``runner_up``: its
    person and correlation)."""

    person: Person
    r: float
    runner_up: tuple[Person, float]


def video_lip_sync(store: MemoryStore, video_id: str) -> PairSync:
    """Lip sync of every (face entity, voice entity) pair of a video, from what the store holds."""
    from m3agent.identity.linking import evidence_from

    sightings = store.face_sightings(video_id)
    interval = sampling_interval(sightings)
    if interval is None:
        return {}
    evidence = evidence_from(sightings, store.voice_spans(video_id), 1.0 / interval, store.mouth_motions(video_id))
    return {pair: sync for pair, sync in evidence.lip_sync.items() if sync.samples >= MIN_SAMPLES}


def sampling_interval(sightings: Sequence[tuple[float, int]]) -> float | None:
    """The interval faces were sampled at: the median gap between one face entity's consecutive sightings."""
    times: dict[int, list[float]] = defaultdict(list)
    for time_s, face in sightings:
        times[face].append(time_s)
    gaps = [round(b - a, 3) for ts in times.values() for a, b in itertools.pairwise(sorted(ts)) if b - a > 1e-3]
    return statistics.median(gaps) if gaps else None


def likely_speaker(sync: PairSync, voice: Person, on_screen: list[Person]) -> LikelySpeaker | None:
    """The person on screen whose lips move with ``voice`` (a person heard, with no face of their own) clearly
    more than anyone else's there; None when nobody's do, or two do alike."""
    scored = [(r, person) for person in on_screen if (r := _best_r(sync, person, voice)) is not None]
    scored.sort(key=lambda s: -s[0])
    if len(scored) < 2 or scored[0][0] < LIKELY_MIN_R or scored[0][0] - scored[1][0] < LIKELY_MARGIN:
        return None  # one face watched is no comparison (a link needs two as well)
    return LikelySpeaker(scored[0][1], round(scored[0][0], 2), (scored[1][1], round(scored[1][0], 2)))


@dataclass(frozen=True, slots=True)
class OtherSpeaker:
    """The speaker left of two people on screen: ``person`` speaks, ``other`` does not, either because another voice
    of the scene is shown to be theirs (``other_voice``: by a link or by their lips) or because their lips move
    against the voice (``other_r``, at most ``-LISTENER_R``: they talk in its pauses; ``other_voice`` None).
    ``r`` is the speaker's own lip sync with the voice (None when not measured)."""

    person: Person
    other: Person
    other_voice: Person | None
    r: float | None
    other_r: float | None


LISTENER_R = 0.2
"""A face whose mouth motion correlates with a voice at ``-LISTENER_R`` or less moves in that voice's pauses: in a
talk between two people on screen, the one listening. (On the debate's interjections, sampled at 2 fps: the
listener's r -0.27 to -0.41, the speaker's -0.2 to 0.01.)"""


def by_elimination(sync: PairSync, voice: Person, on_screen: list[Person], voices: list[Person]
                   ) -> OtherSpeaker | None:
    """Who speaks with ``voice`` (a person heard, with no face of their own) when exactly two people are on screen
    and one of them is shown not to: their lips move against it (:data:`LISTENER_R`; the speaker's at least
    :data:`LIKELY_MARGIN` more), or the scene's other ``voices`` are theirs and nobody else's there. Two people
    talking on camera, whose lips a low frame rate samples too seldom to match the speaker's own. None when more or
    fewer than two are on screen, when neither is ruled out, or when ``voice``'s own lips move more with the one
    ruled out than with the one left (a voice of theirs cut in two)."""
    if voice.face_ids or len(on_screen) != 2:
        return None
    first, second = on_screen
    rs = {p.character_id: r for p in on_screen if (r := _best_r(sync, p, voice)) is not None}
    for listener, speaker in ((first, second), (second, first)):
        r, other_r = rs.get(speaker.character_id), rs.get(listener.character_id)
        if r is not None and other_r is not None and other_r <= -LISTENER_R and r >= other_r + LIKELY_MARGIN:
            return OtherSpeaker(speaker, listener, None, _rounded(r), _rounded(other_r))
    claims = _claims(sync, voice, on_screen, voices)
    if len(claims) != 1:
        return None
    claimed_id, other_voice = next(iter(claims.items()))
    other = next(p for p in on_screen if p.character_id == claimed_id)
    person = next(p for p in on_screen if p.character_id != claimed_id)
    r, other_r = rs.get(person.character_id), rs.get(claimed_id)
    if other_r is not None and (r is None or other_r > r):
        return None
    return OtherSpeaker(person, other, other_voice, _rounded(r), _rounded(other_r))


def _claims(sync: PairSync, voice: Person, on_screen: list[Person], voices: list[Person]) -> dict[int, Person]:
    """The people of ``on_screen`` (by character id) whom another of ``voices`` is shown to belong to: a voice of
    their own, or one their lips move with."""
    ids = {p.character_id for p in on_screen}
    claims: dict[int, Person] = {}
    for w in voices:
        if w.character_id == voice.character_id:
            continue
        claimed = w if w.character_id in ids else _lips_of(sync, w, on_screen)
        if claimed is not None:
            claims.setdefault(claimed.character_id, w)
    return claims


def _lips_of(sync: PairSync, voice: Person, on_screen: list[Person]) -> Person | None:
    likely = likely_speaker(sync, voice, on_screen) if not voice.face_ids else None
    return likely.person if likely is not None else None


def _best_r(sync: PairSync, person: Person, voice: Person) -> float | None:
    """The highest lip sync of any face of ``person`` with any voice of ``voice``; None when none was measured."""
    rs = [sync[(f, v)].r for f in person.face_ids for v in voice.voice_ids if (f, v) in sync]
    return max(rs) if rs else None


def _rounded(r: float | None) -> float | None:
    return None if r is None else round(r, 2)


@dataclass(frozen=True, slots=True)
class MovingSpeaker:
    """The person on screen whose mouth moves most above its own usual while a voice is heard (``lift``: the mean
    motion then, less the person's median in the shot, over their spread there), and the next one (``runner_up``)."""

    person: Person
    lift: float
    runner_up: tuple[Person, float]


MOVING_MARGIN = 0.15
"""Of :func:`moving_speaker`'s lift over the next face (in spreads of each face's own motion). On the split-screen
debate in 15 dev ingests (75 lines with a known speaker; 67 with a voice segment within 2 s of the line's middle and
both faces measured), the face with the higher lift was the speaker on 50 of 67 lines (0.75), on 42 of the 56 this
margin decides (0.75; 49 of 63 at 0.1); docs/benchmarks.md, "Who speaks when no face is linked"."""
MOVING_MIN_SAMPLES = 6
"""Motion samples a face needs in the shot for its own usual level (its median and spread) to mean anything."""


def moving_speaker(motions: Sequence[tuple[float, int, float]], on_screen: list[Person], heard: tuple[float, float],
                   shot: tuple[float, float], step: float) -> MovingSpeaker | None:
    """The person of ``on_screen`` whose mouth moves most above its own usual while a voice is ``heard``, with
    :data:`MOVING_MARGIN` over everyone else there; None when fewer than two can be compared or none stands out.

    Weaker than lip sync (:func:`likely_speaker`), which needs the voice to stop and start while a face is watched:
    a turn heard throughout a short shot, or a voice the diarizer mixed with another, leaves nothing to correlate,
    but the one talking still moves their lips more than they do while listening. Each face is measured against
    itself (its median and interquartile spread over ``shot``, sampled every ``step`` s; a sample covers the
    interval ending at its time), since the level differs between faces (size, angle, a microphone); a still
    picture's face (no motion at all) is left out."""
    from m3agent.identity.linking import FROZEN_MOTION

    lifts = []
    for person in on_screen:
        faces = set(person.face_ids)
        own = sorted(m for t, f, m in motions if f in faces and shot[0] <= t <= shot[1] + step)
        now = [m for t, f, m in motions if f in faces and heard[0] < t <= heard[1] + step]
        if len(own) < MOVING_MIN_SAMPLES or not now or all(abs(m) < FROZEN_MOTION for m in own):
            continue
        spread = own[3 * len(own) // 4] - own[len(own) // 4]
        if spread > FROZEN_MOTION:
            lifts.append(((statistics.fmean(now) - statistics.median(own)) / spread, person))
    lifts.sort(key=lambda s: -s[0])
    if len(lifts) < 2 or lifts[0][0] - lifts[1][0] < MOVING_MARGIN:
        return None
    return MovingSpeaker(lifts[0][1], round(lifts[0][0], 2), (lifts[1][1], round(lifts[1][0], 2)))
