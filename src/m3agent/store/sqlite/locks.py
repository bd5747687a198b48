"""Per-video writer locks of an SQLite memory: one writer of a video at a time, across processes.

A lock is an exclusive ``flock`` on the file ``<memory>.locks/<digest>.lock``.
The kernel drops it when its holder's file is closed or its process ends, even
by SIGKILL, so a crashed ingest never leaves a stale lock behind. The holder
writes its pid, host and start time into the file, only to tell a waiting
process who it waits for. Lock files are tiny and kept (removing one would race
with a process about to lock it).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from m3agent.errors import StoreError, StoreReadOnlyError
from m3agent.store.sqlite.schema import utc_now


def lock_path(db_path: Path, video_id: str) -> Path:
    """The lock file of ``video_id`` in the memory ``db_path``."""
    digest = hashlib.sha256(video_id.encode("utf-8")).hexdigest()[:24]
    return db_path.with_name(db_path.name + ".locks") / f"{digest}.lock"


@contextmanager
def video_lock(db_path: Path, video_id: str, *, wait: bool,
               on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the writer lock of ``video_id`` for the ``with`` block.

    When another process (or another open store in this one) holds it:
    with ``wait`` call ``on_wait`` with a message naming the holder and block
    until it is released (Ctrl-C interrupts the wait); without ``wait`` raise
    :class:`StoreError`.
    """
    fd = _open(lock_path(db_path, video_id))
    try:
        if not _try_lock(fd):
            holder = _holder(fd)
            if not wait:
                raise StoreError(
                    f"video {video_id!r} is being ingested by another process ({holder})",
                    hint="wait for that ingest to finish, or stop it (Ctrl-C keeps its done clips), then retry",
                )
            if on_wait is not None:
                on_wait(f"another ingest of {video_id!r} is running ({holder}); waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        _write_holder(fd)
        yield
    finally:
        os.close(fd)  # releases the lock


def _open(path: Path) -> int:
    try:
        path.parent.mkdir(exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreReadOnlyError(f"cannot create the writer lock {path}: {exc}") from exc


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError):
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
        if text:
            return text
    return "holder unknown"


def _write_holder(fd: int) -> None:
    text = f"pid {os.getpid()} on {socket.gethostname()}, since {utc_now()}".encode()
    with contextlib.suppress(OSError):  # only informative; the lock itself is what counts
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
