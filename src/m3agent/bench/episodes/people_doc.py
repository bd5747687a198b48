"""The "People and order" section of docs/benchmarks.md: one row per recorded run of ``m3agent bench episode``.

Runs are appended to ``bench/scores/people_eval.jsonl`` (the summary, not the answers) with a label, so the
section shows before and after a change side by side; the section is rewritten from all rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from m3agent.bench.episodes.people_eval import TYPES
from m3agent.bench.results_io import replace_section, section_pattern

HEADING = "People and order (evaluation episode)"
COMMAND = "m3agent bench episode --label LABEL"


def record_run(scores: Path, doc: Path, result: dict[str, Any], label: str, env: dict[str, Any]) -> None:
    """Append the run's summary to ``scores`` and rewrite the section of ``doc`` from every row."""
    row = {"label": label, "date": env["date"], "commit": env["git_commit"], "cpu": env["machine"]["cpu"],
           "cores": env["machine"]["cores"], **{k: v for k, v in result.items() if k != "answers"}}
    scores.parent.mkdir(parents=True, exist_ok=True)
    with scores.open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
    rows = [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines() if line.strip()]
    notes = notes_below_table(doc.read_text(encoding="utf-8")) if doc.exists() else ""
    replace_section(doc, HEADING, render(rows) + (f"\n\n{notes}" if notes else ""))


def notes_below_table(text: str) -> str:
    """What the section of ``text`` holds after its table: the readings written by hand beside the rows, which a
    new row must not erase."""
    section = section_pattern(HEADING).search(text)
    if section is None:
        return ""
    lines = section.group(1).splitlines()
    last_row = max((i for i, line in enumerate(lines) if line.startswith("|")), default=-1)
    return "\n".join(lines[last_row + 1:]).strip() if last_row >= 0 else ""


def render(rows: list[dict[str, Any]]) -> str:
    """The section body: what the set is, then one table row per run (judged accuracy per type, keyword in
    brackets), evidence hit rate, p50 latency and leaked ids."""
    head = ["run", "date / commit", "mode", *TYPES, "all", "evidence hit", "plan right", "p50 s", "leaks"]
    lines = [
        "A 125 s episode concatenated from 12 real parts of `../shared/media` (a debate, a still photo under a "
        "speech, talking heads, a dark screen under a voice, an interview, ...) and 46 questions about who is "
        "seen and heard when, in what order, how many and what they look or sound like "
        "(`src/m3agent/bench/data/episode_people_v1.json`; gold answers follow from the timeline). Cells: "
        "accuracy judged by the packaged model, keyword accuracy in brackets; *plan right*: the share of questions "
        "whose query plan names the operation the question asks (`ask` in the set; – before plans existed). "
        "Command: "
        f"`{COMMAND}` (default settings; the episode and its memory are cached under `~/.cache/m3agent/bench`).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def _cells(row: dict[str, Any]) -> list[str]:
    by_type = row.get("by_type", {})
    overall = row.get("overall", {})
    leaks = sum(len(v) for v in row.get("leaked_ids", {}).values())
    mode = f"{row.get('mode', '')}{'' if row.get('graph', True) else ', graph off'}"
    return [row["label"], f"{row['date']} / {str(row['commit'])[:10]}", mode,
            *(_accuracy(by_type.get(t, {})) for t in TYPES), _accuracy(overall),
            _number(overall.get("evidence_hit_rate")), _number(overall.get("plan_accuracy")),
            _number(overall.get("p50_latency_s")), str(leaks)]


def _accuracy(figures: dict[str, Any]) -> str:
    if not figures:
        return "–"
    judged, keyword = figures.get("judged_accuracy"), figures.get("keyword_accuracy")
    return f"{_number(judged)} ({_number(keyword)})" if judged is not None else f"– ({_number(keyword)})"


def _number(value: Any) -> str:
    return "–" if value is None else f"{value:g}"
