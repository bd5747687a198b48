"""An iterator pulled by a background thread a bounded number of items ahead of its consumer.

Used where producing the next item (decoding video) and consuming the last one (perceiving it, measuring
lip motion on it) are separate native work that releases the GIL: on two cores they then overlap instead of
taking turns. The queue is bounded, so memory stays bounded on long or live sources.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

ABANDON_AFTER_S = 5.0
"""On exit, a producer still busy with an item after this long is abandoned (it is a daemon thread)."""


@contextmanager
def ahead(source: Iterator[T], name: str, depth: int = 1) -> Iterator[Iterator[T]]:
    """``source`` pulled by a background thread named ``name``, at most ``depth`` items ahead of the caller;
    an exception ``source`` raises reaches the caller in its place. On exit the thread is told to stop and
    abandoned after :data:`ABANDON_AFTER_S`."""
    items: queue.Queue[tuple[T] | BaseException | None] = queue.Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in source:
                if stop.is_set():
                    return
                _put(items, (item,), stop)
            _put(items, None, stop)
        except BaseException as exc:  # hand any failure to the consumer thread
            _put(items, exc, stop)

    def consume() -> Iterator[T]:
        while True:
            got = items.get()
            if got is None:
                return
            if isinstance(got, BaseException):
                raise got
            yield got[0]

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        yield consume()
    finally:
        stop.set()
        deadline = time.monotonic() + ABANDON_AFTER_S
        while worker.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                items.get(timeout=0.1)


def _put(items: queue.Queue[Any], item: Any, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            items.put(item, timeout=0.2)
            return
        except queue.Full:
            continue
