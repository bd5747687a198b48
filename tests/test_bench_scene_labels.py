"""bench/scene_labels.py: how label resolution is scored, and that test seeds are refused."""

from __future__ import annotations

from bench_helpers import load_bench_script


def test_first_all_and_none_are_scored_against_the_parts_of_the_label() -> None:
    bench = load_bench_script("scene_labels")
    items = [
        {"parts": [(0.0, 10.0)], "found": [(0.0, 10.2)]},  # first and all right
        {"parts": [(20.0, 30.0)], "found": [(20.0, 30.0), (40.0, 50.0)]},  # first right; something else fits alike
        {"parts": [(20.0, 30.0)], "found": [(29.5, 40.0), (20.0, 30.0)]},  # half a second of overlap is no match
        {"parts": [(0.0, 5.0)], "found": []},
    ]
    assert bench.score(items) == {"labels": 4, "first": 2, "all": 1, "none": 1}


def test_test_seeds_are_not_read_label_by_label() -> None:
    bench = load_bench_script("scene_labels")
    assert bench.main(["--seeds", "1001", "--label", "x", "--no-write"]) == 2
