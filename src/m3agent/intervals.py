"""Time intervals ``(start_s, end_s)``: the one place that joins overlapping ones."""

from __future__ import annotations

from collections.abc import Iterable


def union(pieces: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """``pieces`` sorted, empty ones dropped, and those that overlap or touch joined."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(pieces):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
