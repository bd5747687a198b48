"""Clips decoded and perceived ahead of the writer (``m3agent.pipeline``): order kept, one item ahead at most,
failures where they belong, a stop that does not wait for the whole source."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from m3agent.pipeline import _ahead


def test_items_arrive_in_order_pulled_by_another_thread() -> None:
    threads: set[str] = set()

    def source() -> Iterator[int]:
        for n in range(5):
            threads.add(threading.current_thread().name)
            yield n

    with _ahead(source(), "test-ahead") as items:
        assert list(items) == [0, 1, 2, 3, 4]
    assert threads == {"test-ahead"}


def test_a_failure_of_the_source_reaches_the_caller_after_what_came_before() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("broken packet")

    got = []
    with pytest.raises(ValueError, match="broken packet"), _ahead(source(), "test-ahead") as items:
        for n in items:
            got.append(n)
    assert got == [1, 2]


def test_the_source_runs_at_most_two_items_ahead_and_stops_when_the_caller_does() -> None:
    pulled: list[int] = []

    def source() -> Iterator[int]:
        for n in range(1000):
            pulled.append(n)
            yield n

    started = time.monotonic()
    with _ahead(source(), "test-ahead") as items:
        assert next(items) == 0
        time.sleep(0.3)  # the thread fills the queue (one item) and holds one more, then waits
        assert len(pulled) <= 3
    assert time.monotonic() - started < 3.0
    assert len(pulled) <= 4
