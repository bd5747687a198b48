"""Open a media source with PyAV: a file, a file still being written, a URL or a capture device.

Every failure to open becomes a :class:`~m3agent.errors.MediaError` with a hint;
PyAV exceptions never escape from here.
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import MediaError

if TYPE_CHECKING:
    from av.container import InputContainer

NETWORK_SCHEMES = ("rtsp", "rtsps", "rtmp", "http", "https", "udp", "tcp", "srt", "rtp", "mms", "hls")
FILE_ONLY = {"protocol_whitelist": "file"}  # a file (or a playlist inside it) never makes ffmpeg open a socket


@dataclass(frozen=True, slots=True)
class OpenOptions:
    """How to open a source.

    ``timeout_s`` bounds opening and every read of a network or device source; a
    live stream that delivers nothing for that long is treated as ended (with a
    problem recorded). ``follow`` reads a file that is still being written: at the
    end of the data it waits for more, and ends after ``timeout_s`` without growth.
    A followed file must be in a streamable container (MPEG-TS, Matroska,
    fragmented MP4); a plain MP4 keeps its index at the end until it is finished.
    """

    timeout_s: float = 10.0
    follow: bool = False
    poll_s: float = 0.2


def source_kind(source: str | os.PathLike[str]) -> str:
    """``'network'``, ``'device'`` or ``'file'``."""
    text = os.fspath(source)
    scheme, sep, _ = text.partition("://")
    if sep and scheme.lower() in NETWORK_SCHEMES:
        return "network"
    if text.startswith("/dev/video") or text.startswith("/dev/v4l/"):
        return "device"
    return "file"


def open_source(source: str | os.PathLike[str], options: OpenOptions | None = None) -> InputContainer:
    """Open ``source`` for demuxing; raise :class:`MediaError` when that is impossible."""
    import av

    opts = options or OpenOptions()
    text = os.fspath(source)
    kind = source_kind(text)
    try:
        if kind == "network":
            return av.open(text, options=_network_options(text), timeout=(opts.timeout_s, opts.timeout_s))
        if kind == "device":
            return av.open(text, format="v4l2", timeout=(opts.timeout_s, opts.timeout_s))
        return _open_file(Path(text), opts)
    except MediaError:
        raise
    except av.error.FFmpegError as exc:
        raise _translate_open_error(text, kind, exc) from None
    except OSError as exc:
        raise MediaError(f"cannot open {text}: {exc}") from None


def _network_options(url: str) -> dict[str, str]:
    if url.lower().startswith("rtsp"):
        return {"rtsp_transport": "tcp"}
    return {}


def _open_file(path: Path, opts: OpenOptions) -> InputContainer:
    import av

    if not path.exists():
        raise MediaError(f"no such file: {path}", hint="check the path (and that the disk is mounted)")
    if path.is_dir():
        raise MediaError(f"{path} is a folder, not a media file", hint="pass a video or audio file")
    if not opts.follow and path.stat().st_size == 0:
        raise MediaError(f"{path} is empty (0 bytes)", hint="the recording may have failed; check the file")
    if opts.follow:
        reader = GrowingFile(path, stall_s=opts.timeout_s, poll_s=opts.poll_s)
        options = {"probesize": "262144", "analyzeduration": "2000000", **FILE_ONLY}
        return av.open(reader, mode="r", options=options)
    return av.open(str(path), options=FILE_ONLY)


def _translate_open_error(text: str, kind: str, exc: Exception) -> MediaError:
    import av

    if isinstance(exc, ConnectionError | av.error.HTTPError):
        return MediaError(
            f"cannot connect to {text}: {exc.strerror if hasattr(exc, 'strerror') else exc}",
            hint="check that the stream server is running and the URL, port and credentials are right",
        )
    if isinstance(exc, av.error.ExitError | TimeoutError):
        return MediaError(f"{text} did not answer in time", hint="check the network or raise the timeout")
    if isinstance(exc, av.error.FileNotFoundError):
        return MediaError(f"no such file or device: {text}")
    if isinstance(exc, av.error.InvalidDataError) and kind == "file":
        return MediaError(
            f"{text} is not a readable video or audio file ({exc.strerror})",
            hint="the file may be incomplete (an MP4 still being recorded has no index yet) "
            "or not media at all; check it with a media player",
        )
    return MediaError(f"cannot open {text}: {exc}")


class GrowingFile(io.RawIOBase):
    """A read-only file that waits for more bytes at its end, like ``tail -f``.

    ``read`` returns ``b""`` (end of file) only after the file has not grown for
    ``stall_s`` seconds, so a writer that is still recording keeps the demuxer going.
    """

    def __init__(self, path: Path, *, stall_s: float, poll_s: float = 0.2) -> None:
        super().__init__()
        self._file = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._stall_s = stall_s
        self._poll_s = poll_s

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        waited_since = time.monotonic()
        while True:
            n = self._file.readinto(view)
            if n:
                return n
            if time.monotonic() - waited_since >= self._stall_s:
                return 0
            time.sleep(self._poll_s)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()
