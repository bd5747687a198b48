"""A content fingerprint of a media file, so that one video id names one file.

The fingerprint is the file's size and a SHA-256 of its first and last mebibyte: two
different recordings differ there (container headers, index, the first and last
frames), reading 2 MiB costs milliseconds whatever the file's length, and the same
file copied, renamed or uploaded again gives the same value. A stream (a URL read
live, a capture device) has no fingerprint: it is never the same bytes twice.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from m3agent.media.sources import source_kind

EDGE_BYTES = 1 << 20
VERSION = "v1"


def file_fingerprint(source: str | os.PathLike[str]) -> str:
    """``v1:<size>:<hex>`` of a regular file; ``""`` for a stream, a device or what cannot be read."""
    text = os.fspath(source)
    if source_kind(text) != "file":
        return ""
    path = Path(text)
    try:
        if not path.is_file():
            return ""
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            digest = hashlib.sha256(size.to_bytes(8, "big"))
            digest.update(handle.read(EDGE_BYTES))
            if size > EDGE_BYTES:
                handle.seek(max(EDGE_BYTES, size - EDGE_BYTES))
                digest.update(handle.read(EDGE_BYTES))
    except OSError:
        return ""
    return f"{VERSION}:{size}:{digest.hexdigest()[:32]}"
