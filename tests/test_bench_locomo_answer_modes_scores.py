"""bench/locomo_answer_modes.py ``--scores``: a row too long for one session resumes on a fresh machine from committed
scores that hold no LoCoMo text, and summarises the same as from the full log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench_helpers import load_bench_script
from m3agent.bench.results_io import JsonlLog


def _bench() -> Any:
    return load_bench_script("locomo_answer_modes")


def _record(qid: str, category: int, answer: str, f1: float) -> dict[str, Any]:
    return {"qid": qid, "category": category, "question": "What did Caroline paint?", "gold": "a sunset",
            "answer": answer, "seconds": 4.0, "cpu_s": 7.0, "tokens": 900, "rounds": 2, "model": "qwen-1.5b",
            "failure": None, "cited": [3], "f1": f1, "em": 0.0}  # fmt: skip


def test_scores_hold_no_text_and_summarise_like_the_full_records() -> None:
    bench = _bench()
    full = [_record("c#1", 1, "She painted a sunset.", 0.5), _record("c#2", 2, "", 0.0),
            _record("c#3", 5, "The memory does not say.", 1.0)]  # fmt: skip
    scores = [bench.scores_only(r) for r in full]
    text = json.dumps(scores)
    assert "Caroline" not in text and "sunset" not in text and "does not say" not in text
    assert [s["abstained"] for s in scores] == [False, True, True]
    assert bench.summarise("agent", "x", scores) == bench.summarise("agent", "x", full)


def test_carry_resumes_from_committed_scores_and_adds_this_machines_answers(tmp_path: Path) -> None:
    bench = _bench()
    committed = JsonlLog(tmp_path / "scores.jsonl")
    committed.append(bench.scores_only(_record("c#1", 1, "A sunset.", 0.5)))
    done = {"c#2": _record("c#2", 3, "Paris.", 1.0)}  # answered on this machine, not yet committed
    bench._carry(committed, done)
    assert set(done) == {"c#1", "c#2"}, "the committed answer is not asked again"
    assert {r["qid"] for r in committed.read()} == {"c#1", "c#2"}
    bench._carry(committed, done)
    assert len(committed.read()) == 2, "a second resume adds nothing twice"
