"""Whether a browser can play a served media file: its streams' codecs against those every current browser
decodes (an MPEG-4 Part 2 video plays as a black picture with sound, so the inspector says so instead)."""

from __future__ import annotations

import functools
from pathlib import Path

BROWSER_VIDEO = frozenset({"h264", "vp8", "vp9", "av1", "theora"})
BROWSER_AUDIO = frozenset({"aac", "mp3", "mp3float", "opus", "vorbis", "flac", "pcm_s16le", "pcm_f32le",
                           "pcm_u8", "pcm_s24le"})


def unplayable_codecs(path: Path) -> tuple[str, ...]:
    """The codecs of ``path``'s streams that browsers cannot decode (empty: it plays); unreadable: ``("?",)``."""
    try:
        stat = path.stat()
    except OSError:
        return ("?",)
    return _codecs(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _codecs(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """Cached by the file's modification time and size, so a replaced file is read again."""
    import av

    try:
        container = av.open(path)
    except (OSError, av.FFmpegError):
        return ("?",)
    try:
        found = [(s.type, s.codec_context.name) for s in container.streams if s.type in ("video", "audio")]
    finally:
        container.close()
    return tuple(name for kind, name in found
                 if name not in (BROWSER_VIDEO if kind == "video" else BROWSER_AUDIO))
