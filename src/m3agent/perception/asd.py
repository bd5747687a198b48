"""Active speaker detection: how much each face's mouth moves between sampled frames.

For every pair of consecutive sampled frames of a face track (frames about
``1/frame_fps`` apart), the mouth region of the face box (lower middle) and
the upper face (eyes and brow) are cut from both frames at the same place,
and their mean absolute grey-level change is normalised by their contrast.
The cue is the mouth's change minus the upper face's: a moving head or a
lighting change moves both and cancels out, while talking moves the lips
and jaw alone. One value is comparable over time for one face (a listener's
smile or a microphone in front of the mouth shifts the level), so linking
correlates it with each voice's speech over time instead of comparing levels
between faces (:mod:`m3agent.identity.linking`).

Why box regions and not dlib's 68 mouth landmarks: on the debate and
interview clips (turned heads, microphones near the mouth) the 68-point
predictor, fed MTCNN boxes, put the lips on the cheek often enough that
landmark-based cues (lip opening, its change, landmark-aligned mouth crops)
correlated with the wrong voice as often as with the right one, while the
box-region cue separated the speakers in both (docs/benchmarks.md, Identity).

Where the clip's file can be decoded again, :mod:`m3agent.perception.asd_video` measures the motion at
video rate with :func:`flow_motion` instead (the same regions, optical flow instead of grey-level change)
and stores its median over each sampling interval; :func:`mouth_motion` is the fallback for live sources.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent.domain import BBox, ClipMedia, FaceTrack, MouthMotion

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Region = tuple[tuple[float, float], tuple[float, float]]

MOUTH: Region = ((0.25, 0.75), (0.62, 0.98))  # (x from, x to), (y from, y to) as fractions of the face box
UPPER: Region = ((0.15, 0.85), (0.20, 0.50))
MAX_GAP_STEPS = 1.5  # consecutive samples only: a longer gap is not one motion
MIN_REGION_PX = 4
FLOW_SIZE = 96  # face side for optical flow: a 1080p face is ~200 px; lips still move 1-3 px at this size


def mouth_motion(media: ClipMedia, tracks: Sequence[FaceTrack], fps: float) -> tuple[MouthMotion, ...]:
    """The mouth-motion cue of every track between each two consecutive sampled frames it is in."""
    frames = {round(frame.time_s, 3): frame.image for frame in media.frames}
    out = []
    for track in tracks:
        for before, after in zip(track.observations, track.observations[1:], strict=False):
            t0, t1 = round(before.time_s, 3), round(after.time_s, 3)
            if not 0 < t1 - t0 <= MAX_GAP_STEPS / fps or t0 not in frames or t1 not in frames:
                continue
            box = _mean_box(before.bbox, after.bbox)
            value = motion_between(frames[t0], frames[t1], box)
            if value is not None:
                out.append(MouthMotion(track.track, before.time_s, after.time_s, value))
    return tuple(out)


def motion_between(image_a: Any, image_b: Any, box: BBox) -> float | None:
    """Mouth change minus upper-face change inside ``box`` from ``image_a`` to ``image_b`` (RGB uint8)."""
    mouth = _change(image_a, image_b, box, MOUTH)
    upper = _change(image_a, image_b, box, UPPER)
    if mouth is None or upper is None:
        return None
    return round(mouth - upper, 4)


def flow_motion(image_a: Any, image_b: Any, box: BBox) -> float | None:
    """How much the mouth moved relative to the head from ``image_a`` to ``image_b`` (grey or RGB ``uint8``,
    consecutive video frames): dense optical flow (Farneback) over the face ``box`` scaled to
    :data:`FLOW_SIZE` pixels and stretched to the full grey range, the head's motion (median flow of
    :data:`UPPER`) subtracted, then the mean vertical plus half the mean horizontal speed left in
    :data:`MOUTH`, in pixels of the scaled face (the jaw opens vertically; lips also widen).

    Why flow and not the grey-level change of :func:`motion_between`: a change in grey levels depends on
    which pixels the region covers, so a box a few pixels off (another CPU's detector) or a mouth at the
    box's edge (a face in profile) changes it as much as speech does; flow measures the lips' movement
    wherever in the region they are (docs/benchmarks.md, "Identity: lip sync at video rate").
    Identical crops give exactly 0 (a still picture, ``identity.linking.FROZEN_MOTION``)."""
    import cv2
    import numpy as np

    a, b = _face(image_a, box), _face(image_b, box)
    if a is None or b is None:
        return None
    if np.array_equal(a, b):
        return 0.0
    a, b = _stretched(a, b)
    out = np.zeros((FLOW_SIZE, FLOW_SIZE, 2), dtype=np.float32)
    flow = np.asarray(cv2.calcOpticalFlowFarneback(a, b, out, 0.5, 2, 9, 2, 5, 1.1, 0))
    upper, mouth = flow[_rows_cols(UPPER)], flow[_rows_cols(MOUTH)]
    head = np.median(upper.reshape(-1, 2), axis=0)
    speed = np.abs(mouth - head).reshape(-1, 2).mean(axis=0)
    return round(float(speed[1] + 0.5 * speed[0]), 4)


def with_mouth_motion(tracks: Sequence[FaceTrack], motions: Sequence[MouthMotion]) -> tuple[FaceTrack, ...]:
    """The tracks with each observation's ``mouth_motion`` set from the motion ending at its time."""
    by_key = {(m.track, round(m.end_s, 3)): m.motion for m in motions}

    def tag(track: FaceTrack, obs: Any) -> Any:
        value = by_key.get((track.track, round(obs.time_s, 3)))
        return obs if value is None else dataclasses.replace(obs, mouth_motion=value)

    return tuple(dataclasses.replace(t, observations=tuple(tag(t, o) for o in t.observations),
                                     best=tuple(tag(t, o) for o in t.best)) for t in tracks)


def _change(image_a: Any, image_b: Any, box: BBox, region: Region) -> float | None:
    """Mean absolute grey difference of one face region in two frames, over their summed contrast."""
    a, b = _grey(image_a, box, region), _grey(image_b, box, region)
    if a is None or b is None or a.shape != b.shape:
        return None
    spread = float(a.std() + b.std()) + 1e-3
    return float(abs(a - b).mean()) / spread


def _grey(image: Any, box: BBox, region: Region) -> npt.NDArray[np.float32] | None:
    import cv2
    import numpy as np

    (fx0, fx1), (fy0, fy1) = region
    height, width = image.shape[:2]
    x0 = max(0, int(box.x1 + fx0 * box.width))
    x1 = min(width, int(box.x1 + fx1 * box.width))
    y0 = max(0, int(box.y1 + fy0 * box.height))
    y1 = min(height, int(box.y1 + fy1 * box.height))
    if x1 - x0 < MIN_REGION_PX or y1 - y0 < MIN_REGION_PX:
        return None
    patch = np.ascontiguousarray(image[y0:y1, x0:x1])
    if patch.ndim == 3:
        patch = cv2.cvtColor(np.ascontiguousarray(patch[:, :, :3]), cv2.COLOR_RGB2GRAY)
    grey = cv2.GaussianBlur(patch, (3, 3), 0)
    result: npt.NDArray[np.float32] = grey.astype(np.float32)
    return result


def _face(image: Any, box: BBox) -> npt.NDArray[np.uint8] | None:
    """The face box of a frame as a grey :data:`FLOW_SIZE` square (None when it is too small or outside)."""
    import cv2
    import numpy as np

    height, width = image.shape[:2]
    x0, x1 = max(0, int(box.x1)), min(width, int(box.x2))
    y0, y1 = max(0, int(box.y1)), min(height, int(box.y2))
    if x1 - x0 < 2 * MIN_REGION_PX or y1 - y0 < 2 * MIN_REGION_PX:
        return None
    patch = np.ascontiguousarray(image[y0:y1, x0:x1])
    if patch.ndim == 3:
        patch = cv2.cvtColor(np.ascontiguousarray(patch[:, :, :3]), cv2.COLOR_RGB2GRAY)
    face = np.asarray(cv2.resize(patch, (FLOW_SIZE, FLOW_SIZE), interpolation=cv2.INTER_AREA), dtype=np.uint8)
    return face


def _stretched(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.uint8], ...]:
    """Both crops with their joint grey range stretched to 0-255: flow then does not depend on the face's
    contrast, nor on the source's luma range (a limited-range luma plane moved r by up to 0.08 otherwise)."""
    import numpy as np

    low, high = float(min(a.min(), b.min())), float(max(a.max(), b.max()))
    scale = 255.0 / max(high - low, 1.0)
    return tuple(np.asarray((x.astype(np.float32) - low) * scale, dtype=np.uint8) for x in (a, b))


def _rows_cols(region: Region) -> tuple[slice, slice]:
    (fx0, fx1), (fy0, fy1) = region
    return slice(int(fy0 * FLOW_SIZE), int(fy1 * FLOW_SIZE)), slice(int(fx0 * FLOW_SIZE), int(fx1 * FLOW_SIZE))


def _mean_box(a: BBox, b: BBox) -> BBox:
    return BBox((a.x1 + b.x1) / 2, (a.y1 + b.y1) / 2, (a.x2 + b.x2) / 2, (a.y2 + b.y2) / 2)
