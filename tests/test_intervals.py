"""Joining time intervals (the one owner of that vocabulary)."""

from __future__ import annotations

from m3agent.intervals import union


def test_overlapping_and_touching_intervals_join_in_time_order() -> None:
    assert union([(5.0, 6.0), (0.0, 2.0), (1.5, 3.0), (3.0, 4.0)]) == [(0.0, 4.0), (5.0, 6.0)]


def test_empty_and_reversed_intervals_are_dropped() -> None:
    assert union([(2.0, 2.0), (3.0, 1.0), (4.0, 4.5)]) == [(4.0, 4.5)]
    assert union([]) == []
