"""``m3agent ask`` end to end, as a user runs it: one new process per question, wall seconds from start to exit.

Two sets of questions, each on its own memory: the LoCoMo latency questions (the first ``--locomo`` of the seeded
sample of ``bench/locomo_answer_modes.py``, on the LoCoMo memory it builds; the questions
``bench/answer_latency.py`` times inside one process) and the first ``--episode`` questions of the project's own
episode (``m3agent bench episode``, on its cached memory). Each question is asked in grounded mode with the
default model, twice, in turn (ABBA): with the model kept loaded between asks (``model_keep_alive_s``, the
default; the first ask of the run loads it and is counted) and without (``M3AGENT_MODEL_KEEP_ALIVE_S=0``: every
ask loads the model). The resident model lives in a private socket folder of this run, stopped at its end, so
a model the user keeps loaded is neither used nor stopped. Rows go to the section "Answer latency of m3agent
ask" of docs/benchmarks.md (every run kept: loads differ).

    .venv/bin/python bench/ask_latency.py --locomo 20 --episode 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SECTION = "Answer latency of m3agent ask"
M3AGENT = str(Path(sys.executable).parent / "m3agent")
SIDES = ("kept loaded", "loaded each time")


def locomo_questions(count: int) -> tuple[Path, list[tuple[str, str]]]:
    """The LoCoMo memory and the first ``count`` latency questions as (video id, question)."""
    sys.path.insert(0, str(REPO / "bench"))
    from answer_latency import sample
    from m3agent.bench.locomo.run import default_store, ensure_ingested
    from m3agent.embed import create_embedder
    from m3agent.settings import load_settings
    from m3agent.store import open_store

    items = sample(count)[:count]
    settings = load_settings(shared_dir=SHARED)
    embedder = create_embedder(settings.embedder)
    db = default_store(settings, embedder)
    with open_store(str(db)) as store:
        ensure_ingested(store, embedder, sorted({s for s, _, _ in items}, key=lambda s: s.sample_id), 30.0, False)
    return db, [(s.sample_id, q.question) for s, _, q in items]


def episode_questions(count: int) -> tuple[Path, list[tuple[str, str]]]:
    """The project's own episode's memory (built and ingested on first use) and its first ``count`` questions."""
    from m3agent.bench.episodes.people_eval import load_eval_set, render
    from m3agent.bench.episodes.people_run import build
    from m3agent.pipeline import ingest_source
    from m3agent.settings import load_settings
    from m3agent.store.location import parse_location

    settings = load_settings(shared_dir=SHARED)
    eval_set = load_eval_set()
    video, timeline = build(eval_set, settings)
    db = video.with_suffix(".db")
    if not db.is_file():  # the memory `m3agent bench episode` leaves; ingested here when it has not run
        ingest_source(settings.model_copy(update={"memory": parse_location(str(db))}), str(video),
                      video_id=eval_set.name, show_progress=True)
    return db, [(eval_set.name, render(q.question, timeline)) for q in eval_set.questions[:count]]


def ask(db: Path, video: str, question: str, env: dict[str, str]) -> dict[str, Any]:
    """One fresh ``m3agent ask`` process: its wall seconds, the Answer's own latency and text."""
    started = time.perf_counter()
    out = subprocess.run([M3AGENT, "ask", "-m", str(db), "--video", video, "--mode", "grounded", "--json", question],
                         capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"m3agent ask failed ({out.returncode}): {out.stderr[-2000:]}")
    answer = json.loads(out.stdout)
    return {"wall_s": round(wall, 2), "latency_s": answer.get("latency_s"), "answer": answer.get("text", ""),
            "load": os.getloadavg()[0]}


def measure(sets: dict[str, tuple[Path, list[tuple[str, str]]]]) -> list[dict[str, Any]]:
    """Every question of every set on both sides, in turn; one row per set and side."""
    folder = Path(tempfile.mkdtemp(prefix="m3lat-"))
    env = {k: v for k, v in os.environ.items() if k != "M3AGENT_MODEL_KEEP_ALIVE_S"} | {"XDG_RUNTIME_DIR": str(folder)}
    envs = {SIDES[0]: env, SIDES[1]: env | {"M3AGENT_MODEL_KEEP_ALIVE_S": "0"}}
    records: dict[tuple[str, str], list[dict[str, Any]]] = {}
    step = 0
    try:
        for name, (db, questions) in sets.items():
            for i, (video, question) in enumerate(questions):
                for side in SIDES if step % 2 == 0 else SIDES[::-1]:
                    record = ask(db, video, question, envs[side])
                    records.setdefault((name, side), []).append(record)
                    print(f"[{name}, {side}] {i + 1}/{len(questions)} {record['wall_s']} s "
                          f"(answer {record['latency_s']} s) load {record['load']:.1f}", file=sys.stderr, flush=True)
                step += 1
    finally:
        subprocess.run([M3AGENT, "models", "stop"], env=env, capture_output=True, timeout=120)
    return [summarise(name, side, rows) for (name, side), rows in records.items()]


def summarise(name: str, side: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = sorted(r["wall_s"] for r in rows)
    return {"set": name, "side": side, "questions": len(rows), "p50_s": round(statistics.median(walls), 2),
            "p95_s": walls[min(len(walls) - 1, int(0.95 * len(walls)))], "mean_s": round(statistics.fmean(walls), 2),
            "first_s": rows[0]["wall_s"],
            "answer_p50_s": round(statistics.median(float(r["latency_s"] or 0) for r in rows), 2),
            "load": f"{min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}"}


def write_section(rows: list[dict[str, Any]], command: str, load: float) -> None:
    """This run's table under the section's earlier runs."""
    from m3agent.bench.environment import environment
    from m3agent.bench.results_io import replace_section, run_line, section_pattern

    doc = REPO / "docs" / "benchmarks.md"
    found = section_pattern(SECTION).search(doc.read_text(encoding="utf-8"))
    kept = found.group(1).strip() if found else ""
    table = [run_line(environment(), command, load), "",
             "| questions | model | asks | p50 s (wall) | p95 s | mean s | first ask s | answer's own p50 s | load |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['set']} | {r['side']} | {r['questions']} | **{r['p50_s']}** | {r['p95_s']} | {r['mean_s']} "
                     f"| {r['first_s']} | {r['answer_p50_s']} | {r['load']} |")
    replace_section(doc, SECTION, "\n".join(([kept, ""] if kept else []) + table))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=int, default=20, help="LoCoMo latency questions (0: none)")
    parser.add_argument("--episode", type=int, default=20, help="questions of the project's own episode (0: none)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    load = round(os.getloadavg()[0], 2)
    sets = {}
    if args.locomo:
        sets["LoCoMo"] = locomo_questions(args.locomo)
    if args.episode:
        sets["episode"] = episode_questions(args.episode)
    rows = measure(sets)
    for row in rows:
        print(json.dumps(row), flush=True)
    if not args.no_write:
        write_section(rows, f"python bench/ask_latency.py --locomo {args.locomo} --episode {args.episode}", load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
