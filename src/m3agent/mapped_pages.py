"""Give back a process's pages of model files it mapped read-only and no longer reads.

OpenVINO's CPU plugin maps a converted model's weights (``openvino_model.bin``) read-only and shared, repacks them
into its own memory at the first inference, and keeps the mapping. The file's pages then stay in the worker's
resident set though nothing reads them again: 1.07 GB of the 1.5B's 2.9 GB (docs/runtime.md, "OpenVINO's
memory"). ``madvise(MADV_DONTNEED)`` on such a mapping removes the pages from the process; they stay in the
kernel's page cache while memory is free, and a later read faults them in again from there or from the file, so
nothing can change what the process reads. Only mappings without write permission are touched: dropping a
private writable page would lose what was written to it.

Linux only; elsewhere (no ``/proc/self/maps``, no ``madvise``) every call is a no-op.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from pathlib import Path

MADV_DONTNEED = 4


def readonly_mappings(folder: Path, maps: Path = Path("/proc/self/maps")) -> list[tuple[int, int]]:
    """Address ranges ``[start, end)`` of this process's mappings of files under ``folder`` that are not writable."""
    prefix = str(folder.resolve()) + "/"
    ranges: list[tuple[int, int]] = []
    try:
        lines = maps.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ranges
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith(prefix) or "w" in fields[1] or fields[1][0] != "r":
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        ranges.append((start, end))
    return ranges


def resident_bytes(folder: Path, pid: int | str = "self") -> int:
    """Bytes of files under ``folder`` resident in process ``pid``'s mappings (its ``smaps``); 0 where unreadable."""
    prefix = str(folder.resolve()) + "/"
    total, inside = 0, False
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    for line in lines:
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
            inside = len(fields) >= 6 and fields[5].startswith(prefix)
        elif inside and fields[:1] == ["Rss:"]:
            total += int(fields[1]) * 1024
    return total


def release(ranges: list[tuple[int, int]]) -> int:
    """Drop the resident pages of ``ranges`` (from :func:`readonly_mappings`); the bytes of the ranges advised."""
    madvise = _madvise()
    if madvise is None:
        return 0
    return sum(end - start for start, end in ranges if madvise(start, end - start, MADV_DONTNEED) == 0)


class PageReleaser:
    """A daemon thread that releases ``folder``'s read-only mappings every ``every_s`` seconds until stopped.

    Periodic rather than once: the plugin repacks the weights layer by layer during the first inference, and
    releasing each layer's pages as it goes keeps the peak at the repacked copy plus the layer in hand (1.96 GB
    instead of 2.9 GB for the 1.5B, measured). A pass costs about 0.25 ms of CPU; after :meth:`settle` (the first
    inference done: later ones do not read the file) the thread passes every ``settled_s`` instead."""

    def __init__(self, folder: Path, every_s: float = 0.05, settled_s: float = 1.0) -> None:
        self._folder = folder
        self._every_s = every_s
        self._settled_s = settled_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="m3agent-page-releaser", daemon=True)

    def start(self) -> PageReleaser:
        self._thread.start()
        return self

    def settle(self) -> None:
        """Pass now, then every ``settled_s`` (the caller's first inference is done)."""
        release(readonly_mappings(self._folder))
        self._every_s = self._settled_s

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _run(self) -> None:
        # The mappings are read again on every pass: an address kept from an earlier pass could by now belong to
        # another mapping, and advising writable memory away would zero it.
        while not self._stop.wait(self._every_s):
            release(readonly_mappings(self._folder))


@functools.cache
def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise``, looked up once (the releaser passes every 50 ms)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]
