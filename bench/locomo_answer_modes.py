"""LoCoMo QA with the embedded models: token F1 / EM (the paper's normalisation), abstention, seconds, tokens.

A fixed, seeded sample: ``--questions`` from categories 1-4 and ``--adversarial`` from category 5
(reported apart), drawn once with ``--seed`` from all ten conversations; ``--limit N`` answers only
the first N of each (a smaller run is a prefix of the full one). Each ``--run MODE=LLM`` is one row:
``select=none`` (today's default: the reranker quotes a memory), ``grounded=llamacpp:qwen-0.5b``,
``agent=llamacpp:qwen-0.5b``, ... Answers go to a resumable JSONL per row under the cache; rows and
their commands go to the "LoCoMo QA (answer modes)" section of docs/benchmarks.md. ``--scores bench/scores``
also keeps each row's scores without LoCoMo's text (committable), so that a row longer than one session
(the agent loop on 2 cores) resumes on a fresh machine.

    .venv/bin/python bench/locomo_answer_modes.py --run select=none --run grounded=llamacpp:qwen-0.5b \\
        --run grounded=llamacpp:qwen-1.5b --run agent=llamacpp:qwen-0.5b [--limit 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m3agent.bench.results_io import JsonlLog

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SECTION = "LoCoMo QA (answer modes)"
CORES = 2
"""Seconds on an idle 2-core machine are estimated as the process's CPU seconds / 2 (llama.cpp runs 2
threads): wall seconds on the shared machine measure the other users' load as much as ours."""


def draw(samples: list[Any], questions: int, adversarial: int, seed: int) -> list[tuple[Any, int, Any]]:
    """The fixed sample: (conversation, index, item), answerable first, then adversarial."""
    from m3agent.bench.locomo.data import ANSWERABLE_CATEGORIES

    pool = [(s, i, q) for s in samples for i, q in enumerate(s.qa)]
    rng = random.Random(seed)
    answerable = [x for x in pool if x[2].category in ANSWERABLE_CATEGORIES]
    bait = [x for x in pool if x[2].category == 5]
    return rng.sample(answerable, min(questions, len(answerable))) + rng.sample(bait, min(adversarial, len(bait)))


def run_row(
    mode: str, llm: str, items: list[tuple[Any, int, Any]], settings: Any, rounds: int | None,
    clip_k: int | None = None, scores: Path | None = None,
) -> list[dict[str, Any]]:
    """Answer ``items`` in ``mode`` with ``llm`` (resuming the row's JSONL); the records of ``items``."""
    from m3agent.bench.locomo.run import default_store, ensure_ingested
    from m3agent.bench.qa_metrics import score
    from m3agent.bench.results_io import JsonlLog
    from m3agent.control import AgentConfig, ask
    from m3agent.embed import create_embedder
    from m3agent.llm import chat_model_from_settings
    from m3agent.store import open_store

    embedder = create_embedder(settings.embedder)
    chat = chat_model_from_settings(settings, llm) if llm != "none" else None
    config = AgentConfig.from_settings(settings.control, llm, mode=mode, rounds=rounds, clip_k=clip_k)
    tag = f"{mode}-{llm.replace(':', '_').replace('/', '_')}" + (f"-r{rounds}" if rounds else "")
    tag += f"-c{clip_k}" if clip_k else ""
    # the cache folder keeps the script's former name, so the answers cached by earlier runs resume
    log = JsonlLog(settings.resolved_cache_dir() / "bench" / "locomo_qa" / f"{tag}.jsonl")
    done = {r["qid"]: r for r in log.read()}
    carried = _carry(JsonlLog(scores / f"{tag}.jsonl"), done) if scores else None
    db = default_store(settings, embedder)
    db.parent.mkdir(parents=True, exist_ok=True)
    with open_store(str(db)) as store:
        ensure_ingested(store, embedder, sorted({s for s, _, _ in items}, key=lambda s: s.sample_id), 30.0, False)
        for sample, index, item in interleaved(items):
            qid = f"{sample.sample_id}#{index}"
            if qid in done:
                continue
            started, cpu = time.perf_counter(), time.process_time()
            answer = ask(store, embedder, chat, item.question, video_id=sample.sample_id, config=config)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            text = answer.text if answer.answered else ""
            record = {"qid": qid, "category": item.category, "question": item.question, "gold": item.answer,
                      "answer": text, "seconds": round(seconds, 2), "cpu_s": round(cpu, 2),
                      "tokens": answer.usage.total_tokens, "abstained": abstained(text),
                      "rounds": answer.rounds, "model": answer.model, "failure": answer.failure,
                      "cited": [e.memory_id for e in answer.evidence if e.cited],
                      **score(item.category, text, item.answer)}  # fmt: skip
            log.append(record)
            if carried is not None:
                carried.append(scores_only(record))
            done[qid] = record
            print(f"[{tag}] {len(done)}/{len(items)} c{item.category} {seconds:.1f}s f1={record['f1']:.2f} "
                  f"{text[:60]!r} / {item.answer!r}", file=sys.stderr, flush=True)  # fmt: skip
    return [done[f"{s.sample_id}#{i}"] for s, i, _ in items]


SCORE_FIELDS = ("qid", "category", "f1", "em", "abstained", "seconds", "cpu_s", "tokens", "rounds", "model")


def abstained(answer: str) -> bool:
    return answer == "" or "does not say" in answer


def scores_only(record: dict[str, Any]) -> dict[str, Any]:
    """The record without LoCoMo's text (question, gold answer) or the model's answer: what ``summarise``
    needs, and safe to commit (the data's licence keeps its text out of the repo)."""
    return {"abstained": abstained(record.get("answer", "")), **{k: record[k] for k in SCORE_FIELDS if k in record},
            "failed": record.get("failure") is not None}  # fmt: skip


def _carry(carried: JsonlLog, done: dict[str, dict[str, Any]]) -> JsonlLog:
    """Merge the committed scores of a row (``--scores``) with this machine's log, both ways: a row too long
    for one session resumes on a fresh machine from the scores a previous one committed."""
    kept = {r["qid"]: r for r in carried.read()}
    for qid, record in kept.items():
        done.setdefault(qid, record)
    for qid, record in done.items():
        if qid not in kept:
            carried.append(scores_only(record))
    return carried


def interleaved(items: list[tuple[Any, int, Any]]) -> list[tuple[Any, int, Any]]:
    """``items`` in the order to answer them: adversarial ones spread among the others, so that a run
    stopped early holds a proportional prefix of both (a later ``--limit`` reuses it)."""
    answerable = [x for x in items if x[2].category != 5]
    bait = [x for x in items if x[2].category == 5]
    ranked = [((i + 1) / (len(answerable) + 1), x) for i, x in enumerate(answerable)]
    ranked += [((i + 1) / (len(bait) + 1) - 1e-9, x) for i, x in enumerate(bait)]
    return [x for _, x in sorted(ranked, key=lambda pair: pair[0])]


def summarise(mode: str, llm: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    from m3agent.bench.locomo.data import CATEGORY_NAMES

    answerable = [r for r in records if r["category"] != 5]
    bait = [r for r in records if r["category"] == 5]
    seconds = sorted(r["seconds"] for r in records)
    cpu = sorted(r.get("cpu_s", r["seconds"]) / CORES for r in records)

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 3) if values else 0.0

    return {
        "mode": mode, "llm": llm, "questions": len(answerable), "adversarial": len(bait),
        "f1": mean([r["f1"] for r in answerable]), "em": mean([r["em"] for r in answerable]),
        "by_category": {CATEGORY_NAMES[c]: mean([r["f1"] for r in answerable if r["category"] == c])
                        for c in (1, 2, 3, 4)},
        "abstention": mean([r["f1"] for r in bait]),
        "false_abstention": mean([float(r.get("abstained", abstained(r.get("answer", "")))) for r in answerable]),
        "p50_s": round(statistics.median(seconds), 2) if seconds else 0.0,
        "p95_s": round(seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 2) if seconds else 0.0,
        "idle_p50_s": round(statistics.median(cpu), 2) if cpu else 0.0,
        "idle_p95_s": round(cpu[min(len(cpu) - 1, int(0.95 * len(cpu)))], 2) if cpu else 0.0,
        "mean_tokens": round(mean([float(r["tokens"]) for r in records]), 1),
    }  # fmt: skip


def write_section(rows: list[dict[str, Any]], env: dict[str, Any], load: float, sample: str) -> None:
    """Rewrite the section's header and table: rows measured now replace rows of the same command, rows of
    other commands and the notes written under the table are kept (one row is often re-run alone)."""
    from m3agent.bench.results_io import replace_section, run_line

    doc = REPO / "docs" / "benchmarks.md"
    kept, notes = _existing(doc, {r["command"] for r in rows})
    lines = [run_line(env, "see the command of each row", load), "", sample, "",
             "| mode | LLM | questions | F1 (1-4) | EM | multi-hop | temporal | open-domain | single-hop "
             "| adversarial abstention | s/question p50 / p95 (wall, shared) | idle 2-core est. p50 / p95 "
             "| tokens / question | command |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", *kept]  # fmt: skip
    for r in rows:
        c = r["by_category"]
        lines.append(f"| {r['mode']} | {r['llm']} | {r['questions']} + {r['adversarial']} adv. | {r['f1']:.3f} "
                     f"| {r['em']:.3f} | {c['multi-hop']:.3f} | {c['temporal']:.3f} | {c['open-domain']:.3f} "
                     f"| {c['single-hop']:.3f} | {r['abstention']:.2f} | {r['p50_s']} / {r['p95_s']} "
                     f"| {r['idle_p50_s']} / {r['idle_p95_s']} "
                     f"| {r['mean_tokens']} | `{r['command']}` |")  # fmt: skip
    replace_section(doc, SECTION, "\n".join(lines + (["", *notes] if notes else [])))


def _existing(doc: Path, commands: set[str]) -> tuple[list[str], list[str]]:
    """The section's table rows whose command is not in ``commands``, and the lines after the table."""
    import re

    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    found = re.search(rf"^## {re.escape(SECTION)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    if not found:
        return [], []
    body = found.group(1).splitlines()
    table = [i for i, line in enumerate(body) if line.startswith("|")]
    if not table:
        return [], []
    rows = [body[i] for i in table[2:]]
    kept = [row for row in rows if not any(f"`{c}`" in row for c in commands)]
    notes = body[table[-1] + 1:]
    while notes and not notes[0].strip():
        notes.pop(0)
    return kept, notes


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.bench.locomo.data import default_locomo_path, load_locomo
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="MODE=LLM, e.g. grounded=llamacpp:qwen-0.5b")
    parser.add_argument("--questions", type=int, default=200, help="answerable questions (categories 1-4)")
    parser.add_argument("--adversarial", type=int, default=50, help="adversarial questions (category 5)")
    parser.add_argument("--limit", type=int, default=None, help="answer only the first N of each (smaller run)")
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=None, help="agent mode: most model turns")
    parser.add_argument("--clip-k", type=int, default=None, help="agent mode: clips per search_clip")
    parser.add_argument("--scores", type=Path, default=None,
                        help="folder of committable per-row scores (no LoCoMo text) to resume from and add to")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    settings = load_settings(shared_dir=SHARED)
    samples = list(load_locomo(default_locomo_path(settings.shared_dir)))
    items = draw(samples, args.questions, args.adversarial, args.seed)
    if args.limit:
        answerable, bait = items[: args.questions], items[args.questions:]
        items = answerable[: args.limit] + bait[: max(1, args.limit * args.adversarial // max(args.questions, 1))]
    load = round(os.getloadavg()[0], 2)
    rows = []
    for spec in args.run:
        mode, _, llm = spec.partition("=")
        agent = mode == "agent"
        records = run_row(mode, llm or "none", items, settings, args.rounds if agent else None,
                          args.clip_k if agent else None, args.scores)
        row = summarise(mode, llm or "none", records)
        extra = (f" --limit {args.limit}" if args.limit else "") + (
            f" --rounds {args.rounds}" if args.rounds and agent else "") + (
            f" --clip-k {args.clip_k}" if args.clip_k and agent else "")
        row["command"] = (f"python bench/locomo_answer_modes.py --run {spec} --questions {args.questions} "
                          f"--adversarial {args.adversarial} --seed {args.seed}{extra}")  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    if not args.no_write:
        sample = (f"Seeded sample (seed {args.seed}): {len(items)} questions of LoCoMo's 10 conversations"
                  + (f", the first {args.limit} of the full {args.questions} + {args.adversarial}" if args.limit
                     else "") + ". F1 and EM over categories 1-4; adversarial questions score abstention.")
        write_section(rows, environment(embedder=settings.embedder), load, sample)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
