"""M3-Bench summary (accuracy with bootstrap intervals, cost per question) and its Markdown report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from m3agent.bench.m3.data import PUBLISHED_M3_AGENT, TYPE_CODES
from m3agent.bench.stats import DEFAULT_SEED, accuracy_by_label, bootstrap_accuracy

CHART_FILE = "accuracy_by_type.png"


def summarise_m3(records: Sequence[dict[str, Any]], seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Accuracy over judged questions (overall and per type), judge failures and cost figures."""
    judged = [r for r in records if r.get("correct") is not None]
    failures = [r for r in records if r.get("correct") is None]
    overall = bootstrap_accuracy([bool(r["correct"]) for r in judged], seed=seed)
    by_type = accuracy_by_label(((r["types"], bool(r["correct"])) for r in judged), seed=seed)
    return {
        "questions": len(records),
        "judged": len(judged),
        "judge_failures": len(failures),
        "judge_failure_ids": [r["question_id"] for r in failures],
        "agent_failures": sum(1 for r in records if not r.get("answered")),
        "accuracy": overall.to_dict(),
        "accuracy_counting_judge_failures_wrong": round(overall.correct / len(records), 4) if records else 0.0,
        "by_type": {label: acc.to_dict() for label, acc in by_type.items()},
        "per_question": _cost(records),
    }


def _cost(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    n = max(1, len(records))

    def mean(values: list[float]) -> float:
        return round(sum(values) / n, 3)

    return {
        "rounds": mean([float(r.get("rounds") or 0) for r in records]),
        "agent_tokens": mean([float((r.get("usage") or {}).get("total_tokens", 0)) for r in records]),
        "judge_tokens": mean([float((r.get("judge_usage") or {}).get("total_tokens", 0)) for r in records]),
        "latency_s": mean([float(r.get("latency_s") or 0) for r in records]),
        "judge_latency_s": mean([float(r.get("judge_latency_s") or 0) for r in records]),
    }


def write_m3_report(out: Path, summary: dict[str, Any]) -> None:
    """``summary.json``, ``report.md`` and the per-type bar chart in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    bar_chart(out / CHART_FILE, summary)
    (out / "report.md").write_text(markdown(summary), encoding="utf-8")


def markdown(summary: dict[str, Any]) -> str:
    env = summary.get("environment", {})
    lines = [f"# M3-Bench {summary.get('split', '')}: accuracy", "", *_header_lines(summary, env), ""]
    lines += _table_lines(summary)
    lines += ["", f"![accuracy by type]({CHART_FILE})", "", "## Cost per question", ""]
    lines += [f"- {k}: {v}" for k, v in summary["per_question"].items()]
    lines += ["", "## Run", "", *_run_lines(summary, env)]
    return "\n".join(lines) + "\n"


def _header_lines(summary: dict[str, Any], env: dict[str, Any]) -> list[str]:
    judge = env.get("judge", {})
    models = env.get("models", {})
    acc = summary["accuracy"]
    skipped = len(summary.get("skipped_no_memory", []))
    return [
        f"- Questions: {summary['questions']} scored ({summary['judged']} judged, "
        f"{summary['judge_failures']} judge failures, {summary['agent_failures']} without an answer); "
        f"{skipped} skipped for lack of memory.",
        f"- Accuracy: **{_pct(acc['accuracy'])}** (95% bootstrap CI {_ci(acc)}); counting judge failures "
        f"as wrong: {_pct(summary['accuracy_counting_judge_failures_wrong'])}.",
        f"- Agent: `{models.get('agent', '?')}` (embedder `{models.get('embedder', '?')}`); "
        f"judge: `{judge.get('model', '?')}` "
        f"with prompt `{judge.get('prompt', '?')}` (sha256 `{str(judge.get('prompt_sha256', ''))[:12]}`), "
        f'temperature {judge.get("temperature")}, verdict schema `{{"verdict": "yes"|"no"}}`.',
    ]


def _table_lines(summary: dict[str, Any]) -> list[str]:
    published = PUBLISHED_M3_AGENT.get(summary.get("split", ""), {})
    lines = [
        "| type | code | n | accuracy | 95% CI | M3-Agent (published, GPT-4o judge) |",
        "|---|---|---|---|---|---|",
    ]
    rows = [(label, TYPE_CODES.get(label, ""), row) for label, row in summary["by_type"].items()]
    rows.append(("**all**", "All", summary["accuracy"]))
    for label, code, row in rows:
        ref = published.get(code)
        shown = "" if ref is None else f"{ref:.1f}%"
        lines.append(f"| {label} | {code} | {row['n']} | {_pct(row['accuracy'])} | {_ci(row)} | {shown} |")
    return lines


def _ci(row: dict[str, Any]) -> str:
    return f"{_pct(row['ci95'][0])}-{_pct(row['ci95'][1])}"


def _run_lines(summary: dict[str, Any], env: dict[str, Any]) -> list[str]:
    machine = env.get("machine", {})
    packages = ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items())
    return [
        f"- Annotations: `{summary.get('annotations')}`; memories: `{summary.get('memories')}`.",
        f"- Run: {summary.get('questions_run_now')} answered now, {summary.get('questions_resumed')} resumed "
        f"from the JSONL; concurrency {summary.get('concurrency')}; wall {summary.get('wall_s')} s.",
        f"- Machine: {machine.get('cpu')}, {machine.get('cores')} cores, {machine.get('ram_gib')} GiB RAM, "
        f"{machine.get('os')}, Python {machine.get('python')}.",
        f"- Packages: {packages}.",
        f"- Commit: {env.get('git_commit')}; date {env.get('date')}.",
    ]


def bar_chart(path: Path, summary: dict[str, Any]) -> None:
    """Per-type accuracy with 95% intervals as a PNG (matplotlib, Agg backend)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        from m3agent.errors import MissingExtraError

        raise MissingExtraError("the benchmark report chart", "bench", package="matplotlib") from None
    rows = [*summary["by_type"].items(), ("All", summary["accuracy"])]
    labels = [TYPE_CODES.get(label, label) for label, _ in rows]
    values = [100 * row["accuracy"] for _, row in rows]
    errors = [
        [100 * (row["accuracy"] - row["ci95"][0]) for _, row in rows],
        [100 * (row["ci95"][1] - row["accuracy"]) for _, row in rows],
    ]
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    axes.bar(labels, values, yerr=errors, capsize=4, color="#4C72B0")
    axes.set_ylim(0, 100)
    axes.set_ylabel("accuracy (%)")
    axes.set_title(f"M3-Bench {summary.get('split', '')} (n={summary['accuracy']['n']})")
    figure.tight_layout()
    figure.savefig(path)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"
