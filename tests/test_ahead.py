"""An iterator pulled ahead by another thread (``m3agent.ahead``: clips decoded and perceived ahead of the
writer, frames decoded ahead of the lip flow): order kept, a bounded number of items ahead, failures where they
belong, a stop that does not wait for the whole source."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from m3agent.ahead import ahead


def test_items_arrive_in_order_pulled_by_another_thread() -> None:
    threads: set[str] = set()

    def source() -> Iterator[int]:
        for n in range(5):
            threads.add(threading.current_thread().name)
            yield n

    with ahead(source(), "test-ahead") as items:
        assert list(items) == [0, 1, 2, 3, 4]
    assert threads == {"test-ahead"}


def test_a_failure_of_the_source_reaches_the_caller_after_what_came_before() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("broken packet")

    got = []
    with pytest.raises(ValueError, match="broken packet"), ahead(source(), "test-ahead") as items:
        for n in items:
            got.append(n)
    assert got == [1, 2]


def test_the_source_runs_at_most_two_items_ahead_and_stops_when_the_caller_does() -> None:
    pulled: list[int] = []
    started = time.monotonic()
    with ahead(_counted(1000, pulled), "test-ahead") as items:
        assert next(items) == 0
        time.sleep(0.3)  # the thread fills the queue (one item) and holds one more, then waits
        assert len(pulled) <= 3
    assert time.monotonic() - started < 3.0
    assert len(pulled) <= 4


def test_a_deeper_queue_lets_the_source_run_further_ahead() -> None:
    produced: list[int] = []
    with ahead(_counted(20, produced), "test-deep", depth=4) as items:
        assert next(items) == 0
        time.sleep(0.5)
        assert 5 <= len(produced) <= 7, "four waiting, one taken, one being put"


def _counted(n: int, pulled: list[int]) -> Iterator[int]:
    """0 .. n-1, each noted in ``pulled`` as it is produced."""
    for k in range(n):
        pulled.append(k)
        yield k
