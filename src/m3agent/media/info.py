"""``probe``: what a source holds (duration, streams, picture size, frame rate) without decoding it all."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.domain import Video
from m3agent.errors import MediaError
from m3agent.media.frames import scaled_size
from m3agent.media.sources import OpenOptions, open_source, source_kind

if TYPE_CHECKING:
    from av.container import InputContainer


@dataclass(frozen=True, slots=True)
class MediaInfo:
    """Facts about a source. ``width``/``height`` are as displayed (after rotation); 0 without video.

    ``duration_s`` is ``None`` for live sources and files that do not declare it.
    """

    source: str
    duration_s: float | None
    has_audio: bool
    has_video: bool
    width: int = 0
    height: int = 0
    fps: float | None = None
    rotation: int = 0
    audio_rate: int | None = None
    live: bool = False
    metadata: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    def to_video(self, video_id: str, title: str = "", *, max_frame_side: int | None = None) -> Video:
        """The domain :class:`Video` for a store, with these facts as metadata. With ``max_frame_side`` (the
        ingest's ``media.max_frame_side``) also ``frame_width`` / ``frame_height``: the size of the sampled
        frames, whose pixels face boxes are in, so readers place people without the ingest's settings."""
        facts: dict[str, object] = {
            "has_audio": self.has_audio,
            "has_video": self.has_video,
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
            "rotation": self.rotation,
            "live": self.live,
        }
        if max_frame_side is not None and self.width > 0 and self.height > 0:
            facts["frame_width"], facts["frame_height"] = scaled_size(self.width, self.height, max_frame_side)
        title = title or self.metadata.get("title", "")
        return Video(video_id, self.source, self.duration_s, title, facts)


def probe(source: str | os.PathLike[str], options: OpenOptions | None = None) -> MediaInfo:
    """Read the headers of ``source`` (and its first video frame, for the rotation)."""
    from m3agent.media.decode import _pick_video

    text = os.fspath(source)
    container = open_source(text, options)
    try:
        video = _pick_video(container)
        audio = container.streams.audio[0] if container.streams.audio else None
        if video is None and audio is None:
            raise MediaError(f"{text} has no audio or video stream", hint="pass a video or audio file")
        width, height, rotation = _display_size(container, video)
        return MediaInfo(
            source=text,
            duration_s=_duration(container, video, audio),
            has_audio=audio is not None,
            has_video=video is not None,
            width=width,
            height=height,
            fps=_fps(video),
            rotation=rotation,
            audio_rate=int(audio.codec_context.sample_rate) if audio is not None else None,
            live=source_kind(text) != "file",
            metadata={str(k): str(v) for k, v in (container.metadata or {}).items()},
        )
    finally:
        container.close()


def _duration(container: InputContainer, video: Any, audio: Any) -> float | None:
    if container.duration is not None and container.duration > 0:
        return float(container.duration) / 1_000_000
    spans = [float(s.duration * s.time_base) for s in (video, audio) if s is not None and s.duration]
    return max(spans) if spans else None


def _fps(video: Any) -> float | None:
    if video is None:
        return None
    rate = video.average_rate or video.guessed_rate or video.base_rate
    return float(rate) if rate else None


def _display_size(container: InputContainer, video: Any) -> tuple[int, int, int]:
    """(width, height, rotation) as displayed; decodes the first frame for the rotation."""
    import av

    if video is None:
        return 0, 0, 0
    width, height = int(video.codec_context.width), int(video.codec_context.height)
    rotation = 0
    try:
        for frame in container.decode(video):
            rotation = round(float(frame.rotation or 0.0) / 90.0) % 4 * 90
            width, height = frame.width, frame.height
            break
    except (av.error.FFmpegError, OSError):
        pass
    if rotation in (90, 270):
        width, height = height, width
    return width, height, rotation
