"""bench/locomo_answer_modes.py answers adversarial questions spread among the others, so that a run stopped early
is the prefix of a smaller ``--limit`` run with both kinds in proportion."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bench_helpers import load_bench_script


def _bench() -> Any:
    return load_bench_script("locomo_answer_modes")


def _items(answerable: int, adversarial: int) -> list[tuple[str, int, Any]]:
    return [("s", i, SimpleNamespace(category=1 + i % 4)) for i in range(answerable)] + [
        ("s", 100 + i, SimpleNamespace(category=5)) for i in range(adversarial)
    ]


def test_adversarial_questions_are_spread_and_every_prefix_is_a_smaller_run() -> None:
    order = _bench().interleaved(_items(40, 10))
    assert sorted(i for _, i, _ in order) == sorted(i for _, i, _ in _items(40, 10)), "each item once"
    first = order[:20]  # stopped after 20 answers: 16 answerable + 4 adversarial, each group a prefix
    assert [i for _, i, q in first if q.category != 5] == list(range(16))
    assert [i for _, i, q in first if q.category == 5] == [100, 101, 102, 103]
