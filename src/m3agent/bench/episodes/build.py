"""Build long test "episodes" by concatenating real clips into one video (PyAV, no ffmpeg binary).

Every part is letterboxed to a common frame size and rate, and its audio is
resampled to mono at a common rate, padded or cut to the part's exact
duration. The returned timeline gives each part's start and end in the
episode, so ground truth (who is where when) follows from the parts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import MediaError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Part:
    source: str
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class Still:
    """A still picture held while an audio file plays: a photo shown under a voice, or (``image`` None) a dark
    screen under a voice only. ``seconds`` of ``audio`` from ``offset_s`` (the audio's rest when None)."""

    image: Path | None
    audio: Path
    offset_s: float = 0.0
    seconds: float | None = None

    def __str__(self) -> str:
        picture = self.image.name if self.image is not None else "dark screen"
        return f"{picture} + {self.audio.name}@{self.offset_s:g}s"


def build_episode(sources: Sequence[Path | Still], out: Path, *, width: int = 640, height: int = 360,
                  fps: int = 25, audio_rate: int = 16000) -> list[Part]:
    """Concatenate ``sources`` (video files, or :class:`Still` pictures under audio) into ``out`` (H.264 + AAC);
    returns the timeline of parts."""
    import av

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial.mp4")
    timeline: list[Part] = []
    with av.open(str(tmp), "w") as container:
        video = container.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.options = {"preset": "veryfast", "crf": "23"}
        audio = container.add_stream("aac", rate=audio_rate)
        audio.layout = "mono"
        writer = _Writer(container, video, audio, fps, audio_rate, (width, height))
        for source in sources:
            start = writer.seconds
            if isinstance(source, Still):
                writer.append_still(source)
            else:
                writer.append(source)
            timeline.append(Part(str(source), round(start, 3), round(writer.seconds, 3)))
        writer.flush()
    tmp.replace(out)
    return timeline


class _Writer:
    """Appends parts to an open container, keeping video and audio in step."""

    def __init__(self, container: Any, video: Any, audio: Any, fps: int, audio_rate: int,
                 size: tuple[int, int]) -> None:
        self.container, self.video, self.audio = container, video, audio
        self.fps, self.audio_rate, self.size = fps, audio_rate, size
        self.frames_written = 0
        self.samples_written = 0

    @property
    def seconds(self) -> float:
        return self.frames_written / self.fps

    def append(self, source: Path) -> None:
        first = self.frames_written
        for image in _resampled_frames(source, self.fps, self.size):
            self._write_frame(image)
        if self.frames_written == first:
            raise MediaError(f"{source} has no video frames")
        self._write_audio(_decode_audio(source, self.audio_rate, (self.frames_written - first) / self.fps))
        # keep audio exactly aligned with the video clock
        target = round(self.seconds * self.audio_rate)
        if target > self.samples_written:
            import numpy as np

            self._write_audio(np.zeros(target - self.samples_written, dtype=np.float32))

    def append_still(self, still: Still) -> None:
        """The picture (letterboxed) for as long as the audio part lasts, the audio under it."""
        import numpy as np

        samples = _decode_audio(still.audio, self.audio_rate, None, offset_s=still.offset_s)
        if still.seconds is not None:
            samples = samples[: round(still.seconds * self.audio_rate)]
        frames = round(len(samples) / self.audio_rate * self.fps)
        if frames == 0:
            raise MediaError(f"{still.audio} has no audio after {still.offset_s:g} s")
        width, height = self.size
        image = (_letterbox(_read_image(still.image), self.size) if still.image is not None
                 else np.full((height, width, 3), 16, dtype=np.uint8))
        for _ in range(frames):
            self._write_frame(image)
        wanted = round(self.seconds * self.audio_rate) - self.samples_written
        self._write_audio(np.pad(samples[:wanted], (0, max(0, wanted - len(samples)))).astype(np.float32))

    def _write_frame(self, image: npt.NDArray[np.uint8]) -> None:
        import av

        frame = av.VideoFrame.from_ndarray(image, format="rgb24")
        frame.pts = self.frames_written
        frame.time_base = Fraction(1, self.fps)
        for packet in self.video.encode(frame):
            self.container.mux(packet)
        self.frames_written += 1

    def _write_audio(self, samples: npt.NDArray[np.float32]) -> None:
        import av

        step = 1024
        for i in range(0, len(samples), step):
            chunk = samples[i: i + step].reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="mono")
            frame.sample_rate = self.audio_rate
            frame.pts = self.samples_written
            frame.time_base = Fraction(1, self.audio_rate)
            for packet in self.audio.encode(frame):
                self.container.mux(packet)
            self.samples_written += chunk.shape[1]

    def flush(self) -> None:
        for stream in (self.video, self.audio):
            for packet in stream.encode(None):
                self.container.mux(packet)


def _resampled_frames(source: Path, fps: int, size: tuple[int, int]) -> Iterator[npt.NDArray[np.uint8]]:
    """Frames at ``fps`` (each output time takes the latest decoded frame), letterboxed to ``size``.

    Streams: only the current frame is held, whatever the source's length or resolution.
    """
    import av
    import numpy as np

    try:
        with av.open(str(source)) as container:
            stream = container.streams.video[0]
            t0: float | None = None
            last = None
            k = 0
            for frame in container.decode(stream):
                if frame.time is None:
                    continue
                t0 = float(frame.time) if t0 is None else t0
                while last is not None and t0 + k / fps < float(frame.time):
                    yield last
                    k += 1
                last = _letterbox(np.asarray(frame.to_ndarray(format="rgb24"), dtype=np.uint8), size)
            if last is not None:
                yield last
    except (av.FFmpegError, IndexError) as exc:
        raise MediaError(f"cannot decode video of {source}: {exc}") from None


def _read_image(path: Path) -> npt.NDArray[np.uint8]:
    import cv2
    import numpy as np

    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise MediaError(f"cannot read the picture {path}")
    return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), dtype=np.uint8)


def _decode_audio(source: Path, rate: int, duration: float | None, *,
                  offset_s: float = 0.0) -> npt.NDArray[np.float32]:
    """Mono float32 at ``rate`` from ``offset_s``, padded with silence or cut to ``duration`` (silence without
    audio); the whole rest when ``duration`` is None."""
    import av
    import numpy as np

    chunks: list[npt.NDArray[np.float32]] = []
    with av.open(str(source)) as container:
        if container.streams.audio:
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            for frame in container.decode(container.streams.audio[0]):
                chunks.extend(np.asarray(r.to_ndarray(), np.float32).reshape(-1) for r in resampler.resample(frame))
    samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    samples = samples[round(offset_s * rate):]
    if duration is None:
        return samples.astype(np.float32)
    wanted = round(duration * rate)
    samples = samples[:wanted].astype(np.float32)
    return np.pad(samples, (0, wanted - len(samples)))


def _letterbox(image: npt.NDArray[np.uint8], size: tuple[int, int]) -> npt.NDArray[np.uint8]:
    import cv2
    import numpy as np

    width, height = size
    h, w = image.shape[:2]
    scale = min(width / w, height / h)
    nw, nh = max(2, round(w * scale)), max(2, round(h * scale))
    resized = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA)
    canvas = np.zeros((height, width, 3), dtype=np.uint8)
    top, left = (height - nh) // 2, (width - nw) // 2
    canvas[top: top + nh, left: left + nw] = resized
    return canvas
