"""``iter_clips``: decode a source (file, growing file, URL, device) into :class:`ClipMedia` clips.

Decoding streams packet by packet; only the clips not yet handed out are held.
Recoverable trouble (damaged packets, a truncated or corrupt tail, a stalled
live stream) ends up in ``ClipMedia.problems``; a source that cannot be read at
all raises :class:`~m3agent.errors.MediaError`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.domain import VideoSource
from m3agent.errors import MediaError
from m3agent.media.clips import ClipCutter, CutPlan
from m3agent.media.sources import OpenOptions, open_source, source_kind

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator

    from av.container import InputContainer

    from m3agent.domain import ClipMedia
    from m3agent.settings import MediaSettings

log = logging.getLogger(__name__)

TRUNCATION_TOLERANCE_S = 0.5


def default_video_id(source: str | os.PathLike[str]) -> str:
    """A readable id for a source: the file stem, or the URL/device as given."""
    text = os.fspath(source)
    return Path(text).stem if source_kind(text) == "file" else text


def iter_clips(
    source: str | os.PathLike[str],
    media: MediaSettings,
    start_clip: int = 0,
    *,
    video_id: str | None = None,
    options: OpenOptions | None = None,
) -> Iterator[ClipMedia]:
    """Yield consecutive clips of ``media.clip_seconds`` from ``source``, starting at ``start_clip``.

    Frames are sampled at ``media.frame_fps`` as upright RGB; audio is mono
    float32 at ``media.audio_rate``. The clips of a file are the same whatever
    ``start_clip`` is (so a resumed ingest reproduces an uninterrupted one): its
    audio is always decoded from the start, because decoder and resampler state
    after a seek would shift every later sample, and its video from the keyframe
    a seek to ``start_clip`` lands on (decoding from a keyframe is exact). A live
    source cannot seek, so its clips are numbered from ``start_clip`` with time
    counted from that clip's start.
    """
    if start_clip < 0:
        raise MediaError(f"start_clip must be >= 0, got {start_clip}", hint="pass the index of a clip")
    opts = options or OpenOptions()
    container = open_source(source, opts)
    with closing(container):
        reader = _Reader(container, media, start_clip, video_id or default_video_id(source), source, opts)
        yield from reader.run()


class _Reader:
    """One decoding pass over an opened container."""

    def __init__(
        self,
        container: InputContainer,
        media: MediaSettings,
        start_clip: int,
        video_id: str,
        source: str | os.PathLike[str],
        opts: OpenOptions,
    ) -> None:
        self._c = container
        self._text = os.fspath(source)
        kind = source_kind(self._text)
        # A live stream or device has no timeline of its own to seek in; a file (also one still
        # being written) or a network file with a known duration has.
        self._live = kind == "device" or (kind == "network" and not container.duration)
        self._complete_file = kind == "file" and not opts.follow
        self._timeout_s = opts.timeout_s
        self._video = _pick_video(container)
        self._audio = container.streams.audio[0] if container.streams.audio else None
        if self._video is None and self._audio is None:
            raise MediaError(f"{self._text} has no audio or video stream", hint="pass a video or audio file")
        self._start_s = start_clip * media.clip_seconds
        self._origin = _container_origin(container)
        self._shift = self._start_s if self._live else 0.0  # live sources cannot seek
        plan = CutPlan(video_id, self._video is not None, self._audio is not None, start_clip)
        self._media = media
        self._plan = plan
        self._cutter: ClipCutter | None = None
        self._opts = opts
        self._video_from: _Keyframe | None = None  # video packets before this one are not decoded

    def run(self) -> Iterator[ClipMedia]:
        self._prepare_decoders()
        if self._start_s > 0 and not self._live:
            self._skip_video_before(self._start_s)
        stopped = yield from self._decode_all()
        cutter = self._get_cutter(0.0)
        if stopped is None:
            self._check_truncation(cutter)
        yield from cutter.finish()
        leftover = cutter.leftover_problems()
        if cutter.emitted == 0 and self._start_s == 0:
            detail = f": {'; '.join(leftover)}" if leftover else ""
            raise MediaError(f"nothing could be decoded from {self._text}{detail}")
        if leftover:
            log.warning("problems after the last clip of %s: %s", self._text, "; ".join(leftover))

    def _decode_all(self) -> Generator[ClipMedia, None, str | None]:
        """Decode until the end; returns a reason when decoding stopped early (None at a clean end)."""
        import av

        streams = [s for s in (self._video, self._audio) if s is not None]
        try:
            for packet in self._c.demux(*streams):
                self._decode_packet(packet)
                if self._cutter is not None:
                    yield from self._cutter.complete_clips()
        except (av.error.ExitError, TimeoutError):
            return self._stop(f"the stream stalled (nothing received for {self._timeout_s:g} s); ended here")
        except (av.error.FFmpegError, OSError) as exc:
            return self._stop(f"reading stopped at a damaged or truncated part ({exc}); the rest is lost")
        return None

    def _stop(self, message: str) -> str:
        self._get_cutter(0.0).note_problem(message)
        return message

    def _decode_packet(self, packet: Any) -> None:
        import av

        if packet.stream is self._video and self._skips(packet):
            return
        try:
            frames = packet.decode()
        except av.error.FFmpegError:
            if not self._before_start(packet):  # damage in clips already done belongs to them
                self._get_cutter(0.0).note_damaged_packet()
            return
        for frame in frames:
            if packet.stream is self._video:
                self._add_video(frame)
            else:
                self._get_cutter(self._stream_time(frame) or 0.0).add_audio(frame)

    def _before_start(self, packet: Any) -> bool:
        if self._live or packet.pts is None or packet.time_base is None:
            return False
        return float(packet.pts * packet.time_base) - self._origin_s() < self._start_s - 1.0

    def _add_video(self, frame: Any) -> None:
        raw = self._stream_time(frame)
        if raw is None:
            return
        cutter = self._get_cutter(raw)
        time_s = raw - self._origin_s() + self._shift
        cutter.add_video(time_s, self._frame_duration(frame), frame)

    def _stream_time(self, frame: Any) -> float | None:
        time = frame.time
        return float(time) if time is not None else None

    def _origin_s(self) -> float:
        return self._origin if self._origin is not None else 0.0

    def _get_cutter(self, first_time_s: float) -> ClipCutter:
        """The cutter, created at the first decoded frame (live sources take their origin from it)."""
        if self._cutter is None:
            if self._live or (self._origin is None and self._start_s == 0):
                self._origin = first_time_s
            elif self._origin is None:  # a seeked file that declares no start time: its timeline starts at 0
                self._origin = 0.0
            plan = self._plan
            if self._complete_file:  # a whole local file can be decoded again (active speakers at video rate)
                plan = dataclasses.replace(plan, source=VideoSource(self._text, self._origin_s()))
            self._cutter = ClipCutter(self._media, plan, self._origin - self._shift)
        return self._cutter

    def _frame_duration(self, frame: Any) -> float:
        if frame.duration and frame.time_base:
            return float(frame.duration * frame.time_base)
        rate = self._video.average_rate if self._video is not None else None
        return 1.0 / float(rate) if rate else 0.0

    def _prepare_decoders(self) -> None:
        if self._video is not None:
            self._video.thread_type = "AUTO"
            rate = self._video.average_rate or self._video.guessed_rate
            if rate and float(rate) > 4 * self._media.frame_fps:
                self._video.codec_context.skip_frame = "NONREF"

    def _skip_video_before(self, start_s: float) -> None:
        """Find the keyframe a seek to ``start_s`` lands on; video before it is demuxed but not decoded."""
        self._video_from = _resume_keyframe(self._text, self._opts, start_s + self._origin_s(), self._video)
        if self._video_from is None and self._video is not None:
            log.info("cannot find the keyframe before %.2f s in %s; decoding its video from the start",
                     start_s, self._text)

    def _skips(self, packet: Any) -> bool:
        """Whether a video packet lies before the resume keyframe (and is not decoded)."""
        key = self._video_from
        if key is None:
            return False
        if packet.dts is None or packet.dts < key.dts or (packet.dts == key.dts and not packet.is_keyframe):
            return True
        self._video_from = None
        return False

    def _check_truncation(self, cutter: ClipCutter) -> None:
        declared = self._c.duration
        if not self._complete_file or declared is None or declared <= 0:
            return
        declared_s = declared / 1_000_000
        decoded = cutter.decoded_end_s
        if decoded < declared_s - TRUNCATION_TOLERANCE_S and decoded > self._start_s:
            cutter.note_problem(
                f"the file ends early: decoded up to {decoded:.2f} s of the {declared_s:.2f} s "
                "its header declares (truncated or damaged tail)"
            )


@dataclass(frozen=True, slots=True)
class _Keyframe:
    """The first video packet decoded when resuming: its decode timestamp (stream time base)."""

    dts: int


def _resume_keyframe(text: str, opts: OpenOptions, time_s: float, video: Any) -> _Keyframe | None:
    """The keyframe packet a backward seek to ``time_s`` lands on, found in a second opening of the source."""
    import av

    if video is None:
        return None
    try:
        with closing(open_source(text, opts)) as probe:
            stream = next((s for s in probe.streams.video if s.index == video.index), None)
            if stream is None:
                return None
            probe.seek(int(time_s * 1_000_000), backward=True, any_frame=False)
            for packet in probe.demux(stream):
                if packet.dts is not None and packet.is_keyframe:
                    return _Keyframe(int(packet.dts))
                if packet.dts is not None:
                    return None  # the seek did not land on a keyframe; decode everything
    except (MediaError, av.error.FFmpegError, OSError) as exc:
        log.info("cannot seek %s (%s)", text, exc)
    return None


def _pick_video(container: InputContainer) -> Any:
    """The first real video stream (cover art in audio files is skipped)."""
    for stream in container.streams.video:
        if not _is_attached_picture(stream):
            return stream
    return None


def _is_attached_picture(stream: Any) -> bool:
    import av

    disposition = getattr(stream, "disposition", None)
    flag = getattr(getattr(av.stream, "Disposition", None), "attached_pic", None)
    return bool(disposition is not None and flag is not None and disposition & flag)


def _container_origin(container: InputContainer) -> float | None:
    start = container.start_time
    return start / 1_000_000 if start is not None else None


def read_audio(source: str | os.PathLike[str], rate: int = 16000) -> Any:
    """The whole audio track of ``source`` as mono float32 at ``rate`` (for benchmarks and tools)."""
    import numpy as np

    from m3agent.settings import MediaSettings

    media = MediaSettings(clip_seconds=3600.0, frame_fps=0.001, audio_rate=rate, max_frame_side=64)
    parts = [c.audio for c in iter_clips(source, media) if c.audio is not None]
    if not parts:
        raise MediaError(f"{os.fspath(source)} has no audio track", hint="pass a file with sound")
    return np.concatenate(parts).astype(np.float32)
