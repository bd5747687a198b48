"""The benchmark scripts under ``bench/`` and the harness modules of ``m3agent.bench`` share no file name, so
``bench/NAME.py`` always names one file (a script) and ``m3agent.bench.NAME`` another (a module)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_bench_script_shares_a_name_with_a_bench_module() -> None:
    scripts = {p.stem for p in (REPO / "bench").glob("*.py")}
    modules = {p.stem for p in (REPO / "src" / "m3agent" / "bench").glob("*.py")}
    assert len(scripts) > 5 and len(modules) > 5, "bench/ or src/m3agent/bench/ moved"
    assert scripts & modules == set(), "rename the bench/ script (it says what it measures)"
