"""Face perception of one clip: detect, track, embed the best crops, merge tracks of one person.

Only a few crops per track are embedded (the embedding is ~150 ms a face on
CPU, detection ~70 ms a frame), chosen for being frontal, sharp and large;
a track's identity then rests on its best views instead of on every profile
or blurred frame. Tracks of one clip whose exemplars are close merge, but
two tracks seen in the same frame never do.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.domain import ClipMedia, FaceObservation, FaceTrack
from m3agent.errors import MediaError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.perception.faces.detect import Detection, FaceDetector
    from m3agent.perception.faces.embed import FaceEmbedder
    from m3agent.perception.faces.models import FaceModels
    from m3agent.perception.faces.quality import FaceQuality
    from m3agent.perception.faces.track import Track
    from m3agent.settings import PerceptionSettings

MAX_EXEMPLARS = 3
EMBED_BUDGET = 36  # per clip: with many tracks each gets fewer exemplars (never fewer than one)
MAX_BEST = 6
JITTERS = 1

Member = tuple[int, int]


@dataclass(frozen=True, slots=True)
class _Exemplar:
    member: Member
    embedding: npt.NDArray[np.float32]
    crop: bytes


def perceive_faces(media: ClipMedia, settings: PerceptionSettings) -> tuple[FaceTrack, ...]:
    """Face tracks of one clip, one per person seen; see :func:`perceive_faces_timed`."""
    return perceive_faces_timed(media, settings)[0]


def perceive_faces_timed(
    media: ClipMedia, settings: PerceptionSettings, models: FaceModels | None = None
) -> tuple[tuple[FaceTrack, ...], dict[str, float]]:
    """Face tracks of one clip and the seconds spent per stage.

    Every detected face becomes a :class:`FaceObservation` carrying its track id;
    a track's ``best`` observations also carry a 128-d embedding and a JPEG crop.
    Track ids count from 0 in order of first appearance.
    """
    from m3agent.perception.faces.detect import FACE_DETECTORS
    from m3agent.perception.faces.models import face_models

    timings: dict[str, float] = {}
    if not settings.faces or not media.frames:
        return (), timings
    models = models or face_models(settings.threads)
    detector = FACE_DETECTORS.create(settings.face_detector, models=models)
    images = [as_rgb(frame.image) for frame in media.frames]
    with _timed(timings, "detect_s"):
        found = _detect_all(images, detector, settings.min_face_px)
    with _timed(timings, "track_s"):
        qualities, tracks = _track(images, found)
    with _timed(timings, "embed_s"):
        limit = max(1, min(MAX_EXEMPLARS, EMBED_BUDGET // max(len(tracks), 1)))
        exemplars = [_embed_track(t, images, found, qualities, models, limit, settings.face_embedder)
                     for t in tracks]
    with _timed(timings, "merge_s"):
        labels = merge_tracks(tracks, exemplars, settings.face_merge_distance)
    result = _build(media, found, qualities, tracks, exemplars, labels)
    timings["frames"] = float(len(images))
    timings["faces_embedded"] = float(sum(len(e) for e in exemplars))
    return result, timings


@contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    timings[key] = timings.get(key, 0.0) + time.perf_counter() - start


def as_rgb(image: Any) -> Any:
    """The frame as a contiguous (H, W, 3) uint8 array; grey and RGBA are converted."""
    import numpy as np

    array = np.asarray(image)
    if array.dtype != np.uint8:
        raise MediaError(f"frame has dtype {array.dtype}, expected uint8 RGB", hint="decode frames as rgb24")
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (3, 4) or min(array.shape[:2]) < 1:
        raise MediaError(f"frame has shape {array.shape}, expected (height, width, 3)")
    return np.ascontiguousarray(array[:, :, :3])


def _detect_all(images: Sequence[Any], detector: FaceDetector, min_face_px: int) -> list[list[Detection]]:
    from m3agent.perception.faces.detect import detect_faces

    return [detect_faces(image, detector, min_face_px=min_face_px) for image in images]


def _track(images: Sequence[Any], found: Sequence[Sequence[Detection]]) -> tuple[list[list[FaceQuality]], list[Track]]:
    from m3agent.perception.faces.quality import assess
    from m3agent.perception.faces.track import link_tracks, shot_cuts

    qualities = [[assess(image, det) for det in dets] for image, dets in zip(images, found, strict=True)]
    return qualities, link_tracks(found, shot_cuts(images))


def choose_exemplars(members: Sequence[Member], quality: dict[Member, float], limit: int) -> list[Member]:
    """Up to ``limit`` members by descending quality, preferring ones not from adjacent frames.

    The order is total (quality, then time, then detection index), so runs repeat exactly.
    """
    ranked = sorted(members, key=lambda m: (-round(quality[m], 6), m[0], m[1]))
    chosen: list[Member] = []
    for member in ranked:
        if len(chosen) < limit and all(abs(member[0] - c[0]) > 1 for c in chosen):
            chosen.append(member)
    for member in ranked:
        if len(chosen) < limit and member not in chosen:
            chosen.append(member)
    return chosen


def _embed_track(
    track: Track,
    images: Sequence[Any],
    found: Sequence[Sequence[Detection]],
    qualities: Sequence[Sequence[FaceQuality]],
    models: FaceModels,
    limit: int,
    embedder: FaceEmbedder = "dlib+sface",
) -> list[_Exemplar]:
    """Embed the track's best crops: one for a single sighting, two for short tracks, else ``limit``."""
    from m3agent.perception.faces.embed import crop_jpeg, embed_face

    quality = {m: qualities[m[0]][m[1]].overall for m in track.members}
    length = len(track.members)
    count = min(limit, 1 if length < 2 else 2 if length < 5 else MAX_EXEMPLARS)
    out = []
    for frame, index in choose_exemplars(track.members, quality, count):
        det = found[frame][index]
        vector = embed_face(images[frame], det, models, JITTERS, embedder)
        out.append(_Exemplar((frame, index), vector, crop_jpeg(images[frame], det.bbox)))
    return out


def merge_tracks(tracks: Sequence[Track], exemplars: Sequence[Sequence[_Exemplar]], threshold: float) -> list[int]:
    """A person label per track: average linkage over exemplar embeddings, co-occurring tracks kept apart."""
    import numpy as np

    from m3agent.perception.faces.cluster import agglomerate, euclidean_distances

    if not tracks:
        return []
    vectors = [e.embedding for ex in exemplars for e in ex]
    groups = [t for t, ex in enumerate(exemplars) for _ in ex]
    frames = [t.frames() for t in tracks]
    apart = [(a, b) for a in range(len(tracks)) for b in range(a + 1, len(tracks)) if frames[a] & frames[b]]
    item_labels = agglomerate(euclidean_distances(np.stack(vectors)), threshold, groups=groups, cannot_link=apart)
    by_track = dict(zip(groups, item_labels, strict=True))
    return [by_track[t] for t in range(len(tracks))]


def _build(
    media: ClipMedia,
    found: Sequence[Sequence[Detection]],
    qualities: Sequence[Sequence[FaceQuality]],
    tracks: Sequence[Track],
    exemplars: Sequence[Sequence[_Exemplar]],
    labels: Sequence[int],
) -> tuple[FaceTrack, ...]:
    """One :class:`FaceTrack` per person label, numbered by first appearance."""
    chosen = {e.member: e for ex in exemplars for e in ex}
    people: dict[int, list[Member]] = {}
    for track, label in zip(tracks, labels, strict=True):
        people.setdefault(label, []).extend(track.members)
    ordered = sorted(people.values(), key=min)
    result = []
    for person, members in enumerate(ordered):
        observations = []
        for member in sorted(members):
            frame, index = member
            det, exemplar = found[frame][index], chosen.get(member)
            observations.append(
                FaceObservation(
                    clip_index=media.clip.index,
                    time_s=media.frames[frame].time_s,
                    bbox=det.bbox,
                    det_score=det.score,
                    quality=qualities[frame][index].overall,
                    track=person,
                    embedding=exemplar.embedding if exemplar else None,
                    crop_jpeg=exemplar.crop if exemplar else None,
                )
            )
        best = sorted((o for o in observations if o.embedding is not None), key=lambda o: (-o.quality, o.time_s))
        result.append(FaceTrack(media.clip.index, person, tuple(observations), tuple(best[:MAX_BEST])))
    return tuple(result)
