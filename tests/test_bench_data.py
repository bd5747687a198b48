"""Benchmark inputs and bookkeeping: LoCoMo/M3-Bench loaders, bootstrap, judge, JSONL, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from m3agent.bench.judge import Judge, load_prompt
from m3agent.bench.locomo.data import UNANSWERABLE, load_locomo, normalise_dia_ids
from m3agent.bench.m3.data import load_m3bench, normalise_type
from m3agent.bench.m3.report import markdown, summarise_m3, write_m3_report
from m3agent.bench.results_io import JsonlLog, replace_section
from m3agent.bench.stats import accuracy_by_label, bootstrap_accuracy
from m3agent.errors import BenchmarkError, EndpointError
from m3agent.llm.scripted import ScriptedChat


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        ("D1:3", ["D1:3"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D:11:26", ["D11:26"]),
        ("D30:05", ["D30:5"]),
        ("D9:1 D4:4 D4:6", ["D9:1", "D4:4", "D4:6"]),
        ("D", []),
    ],
)
def test_evidence_ids_are_normalised(raw: str, ids: list[str]) -> None:
    assert normalise_dia_ids(raw) == ids


def test_locomo_file_loads_with_the_documented_counts(data_dir: Path) -> None:
    samples = load_locomo(data_dir / "locomo" / "locomo10.json")
    assert len(samples) == 10
    assert sum(len(s.sessions) for s in samples) == 272
    assert sum(len(t) for s in samples for t in [list(x.turns) for x in s.sessions]) == 5882
    qa = [q for s in samples for q in s.qa]
    assert len(qa) == 1986
    counts = {c: sum(1 for q in qa if q.category == c) for c in range(1, 6)}
    assert counts == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    for sample in samples:  # every kept evidence id names a real turn
        known = sample.dia_ids()
        assert all(e in known for q in sample.qa for e in q.evidence)
    assert sum(s.dropped_evidence for s in samples) == 2  # D10:19 of conv-42 and D4:36 of conv-47
    adversarial = next(q for q in qa if q.category == 5)
    assert adversarial.answer == UNANSWERABLE and adversarial.adversarial_answer
    first = samples[0]
    assert first.speakers == ("Caroline", "Melanie")
    assert first.sessions[0].date == "1:56 pm on 8 May, 2023"
    assert first.sessions[0].turns[4].image_caption.startswith("a photo of")


def test_locomo_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="cannot read LoCoMo data"):
        load_locomo(tmp_path / "nope.json")


def test_m3bench_labels_are_normalised(data_dir: Path) -> None:
    robot = load_m3bench(data_dir / "m3bench" / "robot.json")
    web = load_m3bench(data_dir / "m3bench" / "web.json")
    assert (len(robot), len(web)) == (1276, 3214)
    labels = {t for q in robot + web for t in q.types}
    assert labels == {
        "Multi-Evidence Reasoning",
        "Multi-Hop Reasoning",
        "Cross-Modal Reasoning",
        "Person Understanding",
        "General Knowledge Extraction",
    }
    assert sum("Multi-Evidence Reasoning" in q.types for q in robot) == 842  # robot's "Multi-Detail"
    assert all(q.before_clip is not None for q in robot)
    assert all(q.before_clip is None for q in web)
    assert normalise_type("Human  Understanding") == "Person Understanding"


def test_bootstrap_interval_is_seeded_and_brackets_the_value() -> None:
    outcomes = [True] * 30 + [False] * 70
    a = bootstrap_accuracy(outcomes, seed=1)
    b = bootstrap_accuracy(outcomes, seed=1)
    assert a == b
    assert a.value == pytest.approx(0.3)
    assert a.low < 0.3 < a.high
    assert a.low > 0.18 and a.high < 0.42  # ~ +-1.96 * sqrt(.3*.7/100)
    assert bootstrap_accuracy([True] * 5).low == 1.0


def test_multi_label_items_count_for_every_label() -> None:
    by_label = accuracy_by_label([(("A", "B"), True), (("A",), False), (("B",), True)])
    assert (by_label["A"].n, by_label["A"].correct) == (2, 1)
    assert (by_label["B"].n, by_label["B"].correct) == (2, 2)


def test_judge_prompt_has_a_stable_hash_and_strict_schema() -> None:
    prompt = load_prompt("judge_m3")
    assert prompt.schema["properties"]["verdict"]["enum"] == ["yes", "no"]
    assert prompt.sha256 == load_prompt("judge_m3").sha256
    assert prompt.sha256 != load_prompt("judge_locomo").sha256
    text = prompt.messages(question="Q?", ground_truth="coffee", answer="They drink coffee.")[1]["content"]
    assert "Q?" in text and "coffee" in text and "$" not in text


def test_judge_verdicts_failures_and_empty_answers() -> None:
    chat = ScriptedChat([{"verdict": "yes"}, {"verdict": "no"}, "Yes, definitely.", "maybe", "nope"])
    judge = Judge(chat, retries=2)
    assert judge.judge("q", "gt", "a").correct is True
    assert judge.judge("q", "gt", "a").correct is False
    failed = judge.judge("q", "gt", "a")  # three replies that are not the verdict JSON
    assert failed.failed and failed.attempts == 3 and "not JSON" in (failed.error or "")
    empty = judge.judge("q", "gt", "   ")
    assert empty.correct is False and empty.attempts == 0
    assert judge.info()["prompt_sha256"] == load_prompt("judge_m3").sha256


def test_judge_endpoint_errors_are_judge_failures() -> None:
    class Down:
        name = "down"

        def chat(self, *args: object, **kwargs: object) -> None:
            raise EndpointError("cannot reach http://x")

    verdict = Judge(Down(), retries=1).judge("q", "gt", "answer")  # type: ignore[arg-type]
    assert verdict.failed and "EndpointError" in (verdict.error or "")


def test_jsonl_resumes_and_survives_a_torn_line(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    log.append({"question_id": "a", "x": 1})
    with log.path.open("a") as out:
        out.write('{"question_id": "b", "x"')  # a run killed mid-write
    assert [r["question_id"] for r in log.read()] == ["a"]
    log.append({"question_id": "c"})
    assert [r["question_id"] for r in log.read()] == ["a", "c"]


def test_replace_section_keeps_other_sections(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Store\n\nfast\n\n## LoCoMo retrieval\n\nold\n\n## Perception\n\nok\n")
    replace_section(doc, "LoCoMo retrieval", "new figures")
    text = doc.read_text()
    assert "new figures" in text and "old" not in text
    assert text.index("## Store") < text.index("## LoCoMo retrieval") < text.index("## Perception")
    replace_section(doc, "Other", "x")
    assert doc.read_text().rstrip().endswith("## Other\n\nx")


def _record(qid: str, types: list[str], correct: bool | None) -> dict[str, object]:
    return {
        "question_id": qid,
        "types": types,
        "correct": correct,
        "answered": correct is not None,
        "rounds": 2,
        "usage": {"total_tokens": 100},
        "judge_usage": {"total_tokens": 10},
        "latency_s": 1.0,
    }


def test_m3_summary_report_and_chart(tmp_path: Path) -> None:
    records = [
        _record("q1", ["Person Understanding"], True),
        _record("q2", ["Person Understanding", "Multi-Evidence Reasoning"], False),
        _record("q3", ["Multi-Evidence Reasoning"], True),
        _record("q4", ["Cross-Modal Reasoning"], None),  # judge failure: not a wrong answer
    ]
    summary = summarise_m3(records)
    assert summary["judged"] == 3 and summary["judge_failures"] == 1
    assert summary["accuracy"]["accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["accuracy_counting_judge_failures_wrong"] == 0.5
    assert summary["by_type"]["Person Understanding"]["n"] == 2
    assert "Cross-Modal Reasoning" not in summary["by_type"]
    summary.update(split="robot", environment={"judge": {"model": "m", "prompt": "judge_m3"}})
    write_m3_report(tmp_path, summary)
    assert (tmp_path / "accuracy_by_type.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (tmp_path / "report.md").read_text()
    assert "| Person Understanding | PU | 2 | 50.0%" in report
    assert "43.3%" in report  # the published M3-Agent PU figure for robot
    assert json.loads((tmp_path / "summary.json").read_text())["judged"] == 3
    assert markdown(summary) == report
