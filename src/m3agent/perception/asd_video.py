"""Active speaker detection at video rate: mouth motion between consecutive video frames.

At ``frame_fps`` (2 fps) two samples of a mouth are half a second apart and differ mostly by chance:
on the debate clip the speaker's own correlation was 0.08-0.16, and box shifts of a few pixels between
CPUs moved it across the link floor (issue 48). Here the mouth's motion relative to the head
(:func:`~m3agent.perception.asd.flow_motion`, optical flow in the same face regions as the 2 fps cue) is
taken between every two consecutive decoded frames (at most ``perception.lip_sync_video_fps`` a second;
decoded ahead of the flow in a thread of their own, without deblocking: :mod:`m3agent.media.luma`)
and summarised (median) over each sampling interval of a track, so a sighting's ``mouth_motion`` keeps its meaning
(motion since the track's previous sample) with a dozen measurements behind it instead of one. The box at
a frame is interpolated between the track's two samples around it (no new face detection). Frames are
decoded again from the clip's file only inside speech (the Silero VAD's generous segmentation, which the
diarizer's turns come from, widened by :data:`SPEECH_PAD_S`) and only for intervals of a tracked face; an
interval outside speech gets no value.
A clip that cannot be decoded again (live source), has no audio, or runs with the rate set to 0 gets the
cue between sampled frames, as before.
"""

from __future__ import annotations

import bisect
import logging
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.ahead import ahead
from m3agent.domain import BBox, ClipMedia, FaceObservation, FaceTrack, MouthMotion
from m3agent.errors import MediaError, MissingExtraError
from m3agent.perception.asd import MAX_GAP_STEPS, flow_motion, mouth_motion, with_mouth_motion

if TYPE_CHECKING:
    from m3agent.media.luma import LumaFrame
    from m3agent.settings import Settings

log = logging.getLogger(__name__)

SPEECH_PAD_S = 0.3
"""Speech regions are widened by this much each side: how well the bounds of a voice's speech are known
(``identity.linking.BOUNDARY_TOLERANCE_S``), so the intervals linking compares at a turn's edge are measured."""
MERGE_GAP_S = 1.0
"""Windows closer than this are decoded as one: each window starts with a seek back to a keyframe."""
DECODE_AHEAD = 4
"""Frames decoded ahead of the optical flow, in their own thread (both are native work that releases the GIL,
so on two cores they overlap; a 1080p grey frame is 2 MB)."""
MIN_PAIRS = 2
"""Frame pairs an interval needs for a value (a lone pair is the 2 fps cue's noise again)."""
EDGE_S = 1e-3


@dataclass(frozen=True, slots=True)
class Interval:
    """Two consecutive samples of one face track: where a sighting's mouth motion is measured."""

    track: int
    before: FaceObservation
    after: FaceObservation

    def box_at(self, time_s: float) -> BBox:
        """The face box at ``time_s``, linearly between the two samples' boxes."""
        t0, t1 = self.before.time_s, self.after.time_s
        w = min(1.0, max(0.0, (time_s - t0) / (t1 - t0)))
        a, b = self.before.bbox, self.after.bbox
        return BBox(a.x1 + w * (b.x1 - a.x1), a.y1 + w * (b.y1 - a.y1),
                    a.x2 + w * (b.x2 - a.x2), a.y2 + w * (b.y2 - a.y2))


def active_speaker(media: ClipMedia, tracks: Sequence[FaceTrack], settings: Settings) -> tuple[FaceTrack, ...]:
    """``tracks`` with each sighting's mouth motion: at video rate inside speech where the clip allows
    (see the module), else between sampled frames."""
    fps, rate = settings.media.frame_fps, settings.perception.lip_sync_video_fps
    speech = _speech(media) if rate > 0 and media.source is not None and media.width > 0 else None
    if speech is None:
        return with_mouth_motion(tracks, mouth_motion(media, tracks, fps))
    import av

    intervals = [iv for iv in sampling_intervals(tracks, fps) if _overlaps(iv, speech)]
    try:
        motions = video_rate_motion(media, intervals, rate)
    except (MediaError, OSError, av.error.FFmpegError) as exc:  # the file went away or broke since the clip was read
        log.warning("clip %d: mouth motion between sampled frames only (%s)", media.clip.index, exc)
        return with_mouth_motion(tracks, mouth_motion(media, tracks, fps))
    return with_mouth_motion(tracks, interval_medians(motions, intervals))


def sampling_intervals(tracks: Iterable[FaceTrack], fps: float) -> list[Interval]:
    """Consecutive samples of each track at most ``MAX_GAP_STEPS`` sampling steps apart (as at 2 fps)."""
    return [Interval(track.track, a, b) for track in tracks
            for a, b in zip(track.observations, track.observations[1:], strict=False)
            if 0 < b.time_s - a.time_s <= MAX_GAP_STEPS / fps]


def video_rate_motion(media: ClipMedia, intervals: Sequence[Interval], max_fps: float) -> list[MouthMotion]:
    """The cue between each two consecutive decoded frames that lie in one of ``intervals``, for its track."""
    from m3agent.media.luma import luma_frames

    if media.source is None or not intervals:
        return []
    windows = merged([(iv.before.time_s, iv.after.time_s) for iv in intervals], MERGE_GAP_S)
    out: list[MouthMotion] = []
    previous: LumaFrame | None = None
    with ahead(luma_frames(media.source, windows, max_fps), "m3agent-lip-frames", DECODE_AHEAD) as frames:
        for frame in frames:
            if previous is not None:
                scale = (frame.image.shape[1] / media.width, frame.image.shape[0] / media.height)
                out.extend(_pair_motions(previous, frame, intervals, scale))
            previous = frame
    return out


def interval_medians(motions: Sequence[MouthMotion], intervals: Sequence[Interval]) -> list[MouthMotion]:
    """Per interval with at least :data:`MIN_PAIRS` frame pairs inside it, the median of their motion.

    The median, not the mean: one pair with a head jerk or a blink moves the mean of a dozen pairs as much as
    the lips do; with the median both clips' speakers correlated more with their own voice (docs/benchmarks.md).
    """
    by_track: dict[int, list[MouthMotion]] = defaultdict(list)
    for motion in sorted(motions, key=lambda m: m.start_s):
        by_track[motion.track].append(motion)
    starts = {track: [m.start_s for m in items] for track, items in by_track.items()}
    out = []
    for iv in intervals:
        items = by_track.get(iv.track, [])
        lo = bisect.bisect_left(starts.get(iv.track, []), iv.before.time_s - EDGE_S)
        inside = [m.motion for m in items[lo:] if m.end_s <= iv.after.time_s + EDGE_S]
        if len(inside) >= MIN_PAIRS:
            out.append(MouthMotion(iv.track, iv.before.time_s, iv.after.time_s, round(statistics.median(inside), 4)))
    return out


def merged(spans: Iterable[tuple[float, float]], max_gap: float) -> list[tuple[float, float]]:
    """``spans`` sorted, with those at most ``max_gap`` apart (or overlapping) joined."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= max_gap:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _pair_motions(a: LumaFrame, b: LumaFrame, intervals: Sequence[Interval],
                  scale: tuple[float, float]) -> list[MouthMotion]:
    out = []
    middle = (a.time_s + b.time_s) / 2
    for iv in intervals:
        if iv.before.time_s - EDGE_S <= a.time_s and b.time_s <= iv.after.time_s + EDGE_S:
            box = iv.box_at(middle)
            sx, sy = scale
            value = flow_motion(a.image, b.image, BBox(box.x1 * sx, box.y1 * sy, box.x2 * sx, box.y2 * sy))
            if value is not None:  # per second: frames come unevenly spaced (luma_frames)
                out.append(MouthMotion(iv.track, a.time_s, b.time_s, round(value / (b.time_s - a.time_s), 4)))
    return out


def _speech(media: ClipMedia) -> list[tuple[float, float]] | None:
    """The clip's speech regions (media seconds), widened by :data:`SPEECH_PAD_S`; None without audio
    or without the voice models (then the 2 fps cue is used)."""
    from m3agent.perception.audio.vad import GENEROUS, speech_probabilities, speech_regions
    from m3agent.perception.audio.voices import _clip_audio

    audio = _clip_audio(media)
    if audio is None:
        return None
    try:
        probs = speech_probabilities(audio)
    except MissingExtraError:
        return None
    offset = media.clip.start_s
    regions = speech_regions(probs, GENEROUS, media.clip.duration_s)
    return merged([(offset + a - SPEECH_PAD_S, offset + b + SPEECH_PAD_S) for a, b in regions], 0.0)


def _overlaps(interval: Interval, speech: Sequence[tuple[float, float]]) -> bool:
    return any(a < interval.after.time_s and interval.before.time_s < b for a, b in speech)
