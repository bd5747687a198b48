"""Cut a decoded source into consecutive clips of fixed length, by presentation time.

Clip ``i`` covers ``[i * L, (i + 1) * L)`` seconds from the start of the source
(``L`` = ``MediaSettings.clip_seconds``); the last clip ends at the true end of
the decoded media, and a tail shorter than ``TAIL_MERGE_S`` joins the clip before
it instead of becoming a clip of its own. Cuts are sample- and frame-exact, never
snapped to keyframes. Only the clips not yet handed out are held in memory.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.domain import Clip, ClipMedia, Frame, VideoSource
from m3agent.media.audio import AudioTrack
from m3agent.media.frames import FrameSampler

if TYPE_CHECKING:
    from collections.abc import Iterator

    from m3agent.settings import MediaSettings

TAIL_MERGE_S = 0.25
MAX_STREAM_SKEW_S = 10.0


@dataclass(frozen=True, slots=True)
class CutPlan:
    """What the cutter needs to know about the source."""

    video_id: str
    has_video: bool
    has_audio: bool
    start_clip: int = 0
    source: VideoSource | None = None  # a complete local file, to decode again


class ClipCutter:
    """Receives decoded frames on one timeline (seconds from the source start) and yields clips."""

    def __init__(self, media: MediaSettings, plan: CutPlan, audio_offset_s: float) -> None:
        self._L = media.clip_seconds
        self._plan = plan
        self._next = plan.start_clip
        start_s = plan.start_clip * self._L
        self._sampler = FrameSampler(media.frame_fps, media.max_frame_side, self._L, start_s)
        self._audio = AudioTrack(media.audio_rate, audio_offset_s, start_s) if plan.has_audio else None
        self._video_pos = start_s  # start time of the newest video frame
        self._video_end = 0.0  # end time of the newest video frame
        self._seen_video = False
        self._problems: dict[int, list[str]] = defaultdict(list)
        self._damaged: dict[int, int] = defaultdict(int)
        self.emitted = 0

    # -- input -------------------------------------------------------------

    def add_video(self, time_s: float, duration_s: float, frame: object) -> None:
        self._sampler.add(time_s, frame)  # type: ignore[arg-type]
        self._video_pos = max(self._video_pos, time_s)
        self._video_end = max(self._video_end, time_s + duration_s)
        self._seen_video = True

    def add_audio(self, frame: object | None) -> None:
        if self._audio is not None:
            self._audio.add(frame)  # type: ignore[arg-type]

    def note_damaged_packet(self) -> None:
        self._damaged[self._current_clip()] += 1

    def note_problem(self, message: str) -> None:
        self._problems[self._current_clip()].append(message)

    @property
    def decoded_end_s(self) -> float:
        """The true end of what was decoded so far."""
        audio_end = self._audio.end_s if self._audio is not None else 0.0
        return max(self._video_end, audio_end)

    # -- output ------------------------------------------------------------

    def complete_clips(self) -> Iterator[ClipMedia]:
        """Clips that no later input can change any more."""
        progress = self._progress()
        while (self._next + 1) * self._L + TAIL_MERGE_S <= progress:
            yield self._emit((self._next + 1) * self._L)

    def finish(self) -> Iterator[ClipMedia]:
        """The source ended: flush decoders' leftovers and hand out the remaining clips."""
        self.add_audio(None)
        true_end = self.decoded_end_s
        self._sampler.finish(self._video_end)
        self._move_orphan_problems(true_end)
        last = self._last_index(true_end)
        while last is not None and self._next <= last:
            end = (self._next + 1) * self._L
            yield self._emit(true_end if self._next == last else end)

    def leftover_problems(self) -> list[str]:
        """Problems that could not be attached to any clip (nothing was decoded)."""
        return [p for ps in self._problems.values() for p in ps]

    # -- internals ---------------------------------------------------------

    def _progress(self) -> float:
        positions = []
        if self._plan.has_video:
            positions.append(self._video_pos)
        if self._audio is not None:
            positions.append(self._audio.end_s)
        lead = max(positions)
        active = [p for p in positions if p >= lead - MAX_STREAM_SKEW_S]
        return min(active)

    def _current_clip(self) -> int:
        return max(self._next, math.floor(self.decoded_end_s / self._L))

    def _last_index(self, true_end: float) -> int | None:
        """Index of the final clip ``finish`` will emit, or None when it emits none."""
        index = self._next
        if index * self._L >= true_end - 1e-6:
            return None
        if index > 0 and index * self._L + TAIL_MERGE_S > true_end:
            return None  # a pass from the start merged this tail into the clip before (resumed after it)
        while (index + 1) * self._L + TAIL_MERGE_S <= true_end:
            index += 1
        return index

    def _move_orphan_problems(self, true_end: float) -> None:
        last = self._last_index(true_end)
        if last is None:
            return
        for index in [i for i in self._problems if i > last]:
            self._problems[last].extend(self._problems.pop(index))
        for index in [i for i in self._damaged if i > last]:
            self._damaged[last] += self._damaged.pop(index)

    def _emit(self, end_s: float) -> ClipMedia:
        index = self._next
        start_s = index * self._L
        frames = self._take_frames(end_s)
        audio = self._audio.cut(start_s, end_s) if self._audio is not None else None
        problems = self._problems.pop(index, [])
        damaged = self._damaged.pop(index, 0)
        if damaged:
            problems.insert(0, f"{damaged} damaged packet(s) could not be decoded and were skipped")
        self._next += 1
        self.emitted += 1
        width, height = (frames[0].image.shape[1], frames[0].image.shape[0]) if frames else (0, 0)
        return ClipMedia(
            clip=Clip(self._plan.video_id, index, start_s, end_s),
            frames=tuple(frames),
            audio=audio,
            audio_rate=self._audio.rate if self._audio is not None else 16000,
            width=int(width),
            height=int(height),
            problems=tuple(problems),
            source=self._plan.source if self._plan.has_video else None,
        )

    def _take_frames(self, end_s: float) -> list[Frame]:
        ready = self._sampler.ready
        mine = [f for _, f in ready if f.time_s < end_s]
        self._sampler.ready = [(clip, f) for clip, f in ready if f.time_s >= end_s]
        return sorted(mine, key=lambda f: f.time_s)
