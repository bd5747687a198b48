"""Accuracy with seeded bootstrap confidence intervals, overall and per label."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20250811


@dataclass(frozen=True, slots=True)
class Accuracy:
    """``correct`` of ``n`` with a percentile bootstrap interval (fractions in [0, 1])."""

    n: int
    correct: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return self.correct / self.n if self.n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "correct": self.correct,
            "accuracy": round(self.value, 4),
            "ci95": [round(self.low, 4), round(self.high, 4)],
        }


def bootstrap_accuracy(
    outcomes: Sequence[bool], resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Accuracy:
    """Accuracy of ``outcomes`` and its 95 % percentile bootstrap interval (seeded, reproducible)."""
    import numpy as np

    n = len(outcomes)
    correct = int(sum(bool(o) for o in outcomes))
    if n == 0:
        return Accuracy(0, 0, 0.0, 0.0)
    values = np.asarray(outcomes, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Accuracy(n, correct, float(low), float(high))


def accuracy_by_label(items: Iterable[tuple[Sequence[str], bool]], seed: int = DEFAULT_SEED) -> dict[str, Accuracy]:
    """Per-label accuracy; an item counts towards every label it carries."""
    grouped: dict[str, list[bool]] = {}
    for labels, ok in items:
        for label in labels:
            grouped.setdefault(label, []).append(ok)
    return {label: bootstrap_accuracy(v, seed=seed) for label, v in sorted(grouped.items())}
