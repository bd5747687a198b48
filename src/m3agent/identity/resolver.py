"""Assign a clip's face tracks and speakers to persistent entities, inside the clip's transaction."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.domain import CarriedTurn, ClipPerception, EntityKind, FaceObservation, FaceTrack, VoiceSegment
from m3agent.errors import ConfigError
from m3agent.identity.banks import MatchRule, assign, score_matrix, unit_rows, update_bank
from m3agent.identity.linking import LinkRule, decide_links, evidence_from, revisions
from m3agent.identity.voice_merges import MergeRule, candidate_groups, propose
from m3agent.media.snippets import voice_snippets

if TYPE_CHECKING:
    from m3agent.identity.banks import Matrix
    from m3agent.settings import Settings
    from m3agent.store.protocol import ClipWriter, MemoryStore


@dataclass(frozen=True, slots=True)
class IdentityRules:
    face: MatchRule
    voice: MatchRule
    link: LinkRule
    fps: float
    link_accept: float  # settings.perception.link_accept_confidence: links that count, as for characters
    merge: MergeRule | None = None  # voice entities of one speaking face merged after linking (None: off)
    min_face_observations: int = 3
    min_voice_seconds: float = 0.0
    snippet_seconds: float = 3.0
    continuation: float = 1.0  # a speaker heard in the previous clip's tail continues its entity from this score

    @classmethod
    def from_settings(cls, settings: Settings) -> IdentityRules:
        distance = settings.perception.face_match_distance
        # dlib descriptors are compared as unit vectors: |a-b|^2 = 2 - 2 cos.
        face_similarity = 1.0 - distance * distance / 2.0
        return cls(
            face=MatchRule(threshold=face_similarity, margin=0.02, top=3, cap=10),
            voice=MatchRule(threshold=settings.perception.voice_match_similarity, margin=0.03, top=3, cap=20,
                            rejoin=settings.perception.voice_rejoin_similarity),
            link=LinkRule.from_settings(settings.perception),
            fps=settings.media.frame_fps,
            min_face_observations=settings.perception.min_face_observations,
            min_voice_seconds=settings.perception.min_voice_seconds,
            snippet_seconds=settings.perception.voice_snippet_seconds,
            link_accept=settings.perception.link_accept_confidence,
            continuation=settings.perception.voice_continuation_similarity,
            merge=MergeRule(link_accept=settings.perception.link_accept_confidence,
                            min_similarity=settings.perception.voice_merge_similarity)
            if settings.perception.voice_merge else None,
        )


@dataclass(frozen=True, slots=True)
class ResolvedClip:
    """The clip's observations with ``entity_id`` set, and what identity did."""

    tracks: tuple[FaceTrack, ...]
    voices: tuple[VoiceSegment, ...]
    new_entities: tuple[int, ...]
    matched_entities: tuple[int, ...]


def resolve_clip(store: MemoryStore, writer: ClipWriter, perception: ClipPerception,
                 rules: IdentityRules) -> ResolvedClip:
    """Match tracks and speakers to entities (creating new ones), store observations, refresh links."""
    new: list[int] = []
    matched: list[int] = []
    tracks = _resolve_faces(store, writer, perception.tracks, rules, new, matched)
    voices = _resolve_voices(store, writer, perception.voices, rules, new, matched, _face_times(tracks),
                             perception.carried)
    for track in tracks:
        for obs in track.observations:
            writer.add_face(obs)
    snippets = voice_snippets(perception.media, voices, rules.snippet_seconds)
    for i, segment in enumerate(voices):
        writer.add_voice(segment, snippets.get(i))
    refresh_links(store, writer, writer.clip.video_id, rules)
    absorbed = merge_split_voices(store, writer, voices, rules) if rules.merge else {}
    if absorbed:
        voices = tuple(_renamed(s, absorbed) for s in voices)
        new = [e for e in new if e not in absorbed]
        matched = list(dict.fromkeys(absorbed.get(e, e) for e in matched))
    return ResolvedClip(tracks, voices, tuple(new), tuple(matched))


def _renamed(segment: VoiceSegment, absorbed: dict[int, int]) -> VoiceSegment:
    if segment.entity_id is None or segment.entity_id not in absorbed:
        return segment
    return dataclasses.replace(segment, entity_id=absorbed[segment.entity_id])


def merge_split_voices(store: MemoryStore, writer: ClipWriter, voices: Sequence[VoiceSegment],
                       rules: IdentityRules) -> dict[int, int]:
    """Merge voice entities of one speaking face (:mod:`.voice_merges`); returns absorbed id -> kept id."""
    assert rules.merge is not None
    heard = {s.entity_id for s in voices if s.entity_id is not None}
    if not heard:
        return {}
    links = store.links(min_confidence=rules.merge.link_accept)
    groups = candidate_groups(links, heard, rule=rules.merge)
    if not groups:
        return {}
    involved = {v for own in groups.values() for v in own}
    first_seen = {e.id: e.video_id for e in store.entities(EntityKind.VOICE) if e.id in involved}
    videos = {writer.clip.video_id} | {video for video in first_seen.values() if video}
    spans = {video: store.voice_spans(video) for video in sorted(videos)}
    proposals = propose(links, spans, heard, lambda a, b: _voice_similarity(store, a, b, rules),
                        rules.merge, _undone_pairs(store))
    absorbed: dict[int, int] = {}
    for merge in proposals:
        writer.merge_entities(merge.keep, merge.absorb, merge.evidence)
        absorbed[merge.absorb] = merge.keep
    return absorbed


def _undone_pairs(store: MemoryStore) -> set[frozenset[int]]:
    """Pairs whose merge was undone: the person who undid it knows better, so never again."""
    return {frozenset((m.keep_id, m.absorbed_id)) for m in store.entity_merges() if m.undone_at is not None}


def _voice_similarity(store: MemoryStore, a: int, b: int, rules: IdentityRules) -> float:
    """Speaker-embedding score of two voice entities (mean of the best pairs of their banks)."""
    bank_a, bank_b = _bank(store, a), _bank(store, b)
    if not len(bank_a) or not len(bank_b):
        return -1.0
    return float(score_matrix([bank_a], [bank_b], rules.voice.top)[0, 0])


def _resolve_faces(store: MemoryStore, writer: ClipWriter, tracks: Sequence[FaceTrack], rules: IdentityRules,
                   new: list[int], matched: list[int]) -> tuple[FaceTrack, ...]:
    """Tracks seen fewer than ``min_face_observations`` times may join an entity but never found one:
    a single-frame detection is too often a false positive or a passer-by cut off at the edge."""
    usable = [t for t in tracks if any(o.embedding is not None for o in t.best)]
    candidates = [unit_rows([o.embedding for o in t.best if o.embedding is not None]) for t in usable]
    conflicts = {(i, j) for i in range(len(usable)) for j in range(i + 1, len(usable))
                 if _overlap(usable[i], usable[j])}
    may_found = [len(t.observations) >= rules.min_face_observations for t in usable]
    entity_of = _match(store, writer, EntityKind.FACE, candidates, conflicts, rules.face, new, matched, may_found)
    track_entity = {id(t): entity_of[i] for i, t in enumerate(usable)}
    return tuple(_with_entity(t, track_entity.get(id(t))) for t in tracks)


def _resolve_voices(store: MemoryStore, writer: ClipWriter, voices: Sequence[VoiceSegment], rules: IdentityRules,
                    new: list[int], matched: list[int],
                    face_times: dict[int, set[float]],
                    carried: Sequence[CarriedTurn] = ()) -> tuple[VoiceSegment, ...]:
    """Voice entity of each speaker of the clip; a speaker also heard in the previous clip's last seconds
    continues the entity heard there (``rules.continuation``), as one voice over a clip boundary.

    The diarizer's speakers of one clip are different people, unless one of them is left with no entity while
    its best one, held by another speaker it never talks over, scores ``rules.voice.rejoin`` (the bank holds
    more of a voice than one clip: the diarizer splits some voices in two). A speaker heard for less than
    ``rules.min_voice_seconds`` (in the clip and the previous clip's tail) may join an entity but never found
    one: its embedding is too short to be a person's.
    """
    by_speaker: dict[int, list[VoiceSegment]] = defaultdict(list)
    for seg in voices:
        if seg.embedding is not None:
            by_speaker[seg.speaker].append(seg)
    speakers = sorted(by_speaker)
    candidates = [unit_rows([s.embedding for s in by_speaker[spk] if s.embedding is not None]) for spk in speakers]
    conflicts = {(i, j) for i in range(len(speakers)) for j in range(i + 1, len(speakers))}
    overlapping = {(i, j) for i, j in conflicts if _talk_over(by_speaker[speakers[i]], by_speaker[speakers[j]])}
    vetoes = _av_vetoes(store, [by_speaker[spk] for spk in speakers], face_times, rules.link_accept)
    continued = _continued(store, writer.clip.video_id, speakers, _running_over(by_speaker, carried))
    heard = [_seconds(by_speaker[spk]) + _seconds([t for t in carried if t.speaker == spk]) for spk in speakers]
    entity_of = _match(store, writer, EntityKind.VOICE, candidates, conflicts, rules.voice, new, matched,
                       [s >= rules.min_voice_seconds for s in heard], vetoes, continued, rules.continuation,
                       hard=overlapping)
    speaker_entity = dict(zip(speakers, entity_of, strict=True))
    return tuple(dataclasses.replace(s, entity_id=speaker_entity.get(s.speaker)) for s in voices)


def _seconds(spans: Sequence[VoiceSegment] | Sequence[CarriedTurn]) -> float:
    return sum(max(0.0, s.end_s - s.start_s) for s in spans)


def _talk_over(a: Sequence[VoiceSegment], b: Sequence[VoiceSegment]) -> bool:
    """Whether two speakers' segments overlap in time (two people talking at once)."""
    return any(min(x.end_s, y.end_s) > max(x.start_s, y.start_s) for x in a for y in b)


MIN_CARRIED_S = 0.5  # seconds of a speaker's context speech that must lie in one stored entity's spans
MAX_CONTINUATION_GAP_S = 8.0
"""A speaker's speech before the clip continues into it only when its first words in the clip come at most this long
after its last ones before (a pause, another speaker's reply; as long as the context the diarizer hears before a
clip, ``perception.voice_context_seconds``' default). The diarizer also clusters voices it hears far apart: the
last words of one speech 6 s before the boundary and, 14.7 s later, another man's speech over a dark screen were
one speaker of the people-and-order episode, and continuing the first man's entity joined two people; a father
in the identity bench's playground clip pauses 5.1 s across a boundary and is one voice (docs/benchmarks.md)."""


def _running_over(by_speaker: dict[int, list[VoiceSegment]], carried: Sequence[CarriedTurn]) -> list[CarriedTurn]:
    """The turns of ``carried`` whose speaker runs over the boundary (:data:`MAX_CONTINUATION_GAP_S`)."""
    last: dict[int, float] = {}
    for t in carried:
        last[t.speaker] = max(last.get(t.speaker, t.end_s), t.end_s)
    first = {spk: min(s.start_s for s in segs) for spk, segs in by_speaker.items() if segs}
    return [t for t in carried if t.speaker in first and first[t.speaker] - last[t.speaker] <= MAX_CONTINUATION_GAP_S]


def _continued(store: MemoryStore, video_id: str, speakers: Sequence[int],
               carried: Sequence[CarriedTurn]) -> dict[int, int]:
    """Candidate index -> the voice entity stored for most of that speaker's speech before the clip (at least
    ``MIN_CARRIED_S`` of it): the diarizer heard both as one voice."""
    if not carried:
        return {}
    spans = store.voice_spans(video_id)
    result: dict[int, int] = {}
    for index, speaker in enumerate(speakers):
        heard: dict[int, float] = defaultdict(float)
        for turn in (t for t in carried if t.speaker == speaker):
            for start, end, entity in spans:
                heard[entity] += max(0.0, min(end, turn.end_s) - max(start, turn.start_s))
        best = max(heard.items(), key=lambda kv: kv[1], default=(None, 0.0))
        if best[0] is not None and best[1] >= MIN_CARRIED_S:
            result[index] = best[0]
    return result


def _match(store: MemoryStore, writer: ClipWriter, kind: EntityKind, candidates: list[Matrix],
           conflicts: set[tuple[int, int]], rule: MatchRule, new: list[int], matched: list[int],
           may_found: list[bool], vetoes: set[tuple[int, int]] | None = None,
           continued: dict[int, int] | None = None, continuation: float = 1.0,
           hard: set[tuple[int, int]] | None = None) -> list[int | None]:
    """Entity id for every candidate: an existing entity that matches, a new one, or ``None``.

    ``vetoes`` holds (candidate index, entity id) pairs ruled out by other evidence; ``continued`` (candidate
    index -> entity id) pairs count as a full match when they score at least ``continuation``; ``hard``: the
    conflicts no bank score overrides (see :func:`banks.assign`; ``None``: all of them).
    """
    entities = store.entities(kind)
    banks = [_bank(store, e.id) for e in entities]
    _same_descriptor(kind, candidates, banks)
    scores = score_matrix(candidates, banks, rule.top)
    column_of = {entity.id: j for j, entity in enumerate(entities)}
    for i, entity_id in (continued or {}).items():
        j = column_of.get(entity_id)
        if j is not None and scores[i, j] >= continuation:
            scores[i, j] = 1.0
    for i, entity_id in vetoes or ():
        for j, entity in enumerate(entities):
            if entity.id == entity_id:
                scores[i, j] = -1.0
    choice = assign(scores, conflicts, rule, hard)
    result: list[int | None] = []
    for cand, column, founds in zip(candidates, choice, may_found, strict=True):
        if column is None and not founds:
            result.append(None)
        elif column is None:
            entity = writer.add_entity(kind, list(update_bank(cand[:0], cand, rule.cap)))
            new.append(entity.id)
            result.append(entity.id)
        else:
            entity_id = entities[column].id
            writer.update_entity_bank(entity_id, list(update_bank(banks[column], cand, rule.cap)))
            matched.append(entity_id)
            result.append(entity_id)
    return result


def _same_descriptor(kind: EntityKind, candidates: Sequence[Matrix], banks: Sequence[Matrix]) -> None:
    """Refuse to compare descriptors of different models (a memory built with another face embedder)."""
    dims = {c.shape[1] for c in candidates} | {b.shape[1] for b in banks if len(b)}
    if len(dims) > 1:
        setting = "FACE_EMBEDDER=dlib" if kind is EntityKind.FACE else "VOICE_EMBEDDER=resemblyzer"
        raise ConfigError(f"this memory's {kind} entities were embedded with another model ({sorted(dims)} values "
                          "per vector)", hint=f"ingest with the memory's own perception.{kind}_embedder "
                          f"(e.g. M3AGENT_PERCEPTION__{setting}) or start a new memory")


def _face_times(tracks: Sequence[FaceTrack]) -> dict[int, set[float]]:
    """Sampled frame times at which each face entity is on screen in this clip."""
    times: dict[int, set[float]] = defaultdict(set)
    for track in tracks:
        for obs in track.observations:
            if obs.entity_id is not None:
                times[obs.entity_id].add(round(obs.time_s, 3))
    return times


def _av_vetoes(store: MemoryStore, speakers: Sequence[Sequence[VoiceSegment]], face_times: dict[int, set[float]],
               link_accept: float, seen: float = 0.7, absent: float = 0.1) -> set[tuple[int, int]]:
    """(speaker index, voice entity) pairs that the screen contradicts.

    A voice entity already linked to a face (a link of at least ``link_accept``,
    the bar characters use) cannot be this clip's speaker when,
    while the speaker talks, some face is on screen most of the time (``seen``)
    and none of the entity's linked faces is (below ``absent``). This keeps two
    similar voices apart when their faces tell them apart (resemblyzer alone puts
    some different men above 0.85 cosine).
    """
    faces_of_voice: dict[int, set[int]] = defaultdict(set)
    for link in store.links(min_confidence=link_accept):
        faces_of_voice[link.voice_id].add(link.face_id)
    frame_times = sorted(set().union(*face_times.values())) if face_times else []
    vetoes = set()
    for index, segments in enumerate(speakers):
        during = [t for t in frame_times if any(s.start_s <= t < s.end_s for s in segments)]
        if not during:
            continue
        share = {face: sum(t in times for t in during) / len(during) for face, times in face_times.items()}
        if max(share.values(), default=0.0) < seen:
            continue
        for voice, faces in faces_of_voice.items():
            if all(share.get(face, 0.0) < absent for face in faces):
                vetoes.add((index, voice))
    return vetoes


def _bank(store: MemoryStore, entity_id: int) -> Matrix:
    import numpy as np

    vectors = store.entity_bank(entity_id)
    return unit_rows(vectors) if vectors else np.zeros((0, 1), dtype=np.float32)


def _overlap(a: FaceTrack, b: FaceTrack) -> bool:
    times_a = {round(o.time_s, 3) for o in a.observations}
    return any(round(o.time_s, 3) in times_a for o in b.observations)


def _with_entity(track: FaceTrack, entity_id: int | None) -> FaceTrack:
    def tag(obs: FaceObservation) -> FaceObservation:
        return dataclasses.replace(obs, entity_id=entity_id)

    return dataclasses.replace(track, observations=tuple(tag(o) for o in track.observations),
                               best=tuple(tag(o) for o in track.best))


def refresh_links(store: MemoryStore, writer: ClipWriter, video_id: str, rules: IdentityRules) -> None:
    """Recompute face<->voice links from all evidence of the video and write what changed.

    Only links between entities seen in this video are revised: evidence
    from this video says nothing about a pair that never met in it.
    """
    sightings, spans = store.face_sightings(video_id), store.voice_spans(video_id)
    evidence = evidence_from(sightings, spans, rules.fps, store.mouth_motions(video_id))
    decided = decide_links(evidence, rules.link)
    faces, voices = {face for _, face in sightings}, {voice for _, _, voice in spans}
    current = [link for link in store.links() if link.face_id in faces and link.voice_id in voices]
    for update in revisions(current, decided, evidence):
        writer.set_link(update)
