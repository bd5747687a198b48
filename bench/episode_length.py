"""Accuracy and answer latency against episode length: generated dev episodes of 2 to 20 minutes (issue 44).

The seed system exists for long video; this asks whether answering holds up as the memory grows. Each (seed,
length) is a generated episode (:mod:`m3agent.bench.episodes`), built, ingested into a fresh memory with the
default settings and asked its 30 questions, as ``m3agent bench episodes`` does. One episode per line goes to
``bench/scores/episode_length.jsonl`` (a rerun skips what is recorded; ``--again`` redoes it); the section of
docs/benchmarks.md and ``docs/episode_length.png`` are written from every line. Dev seeds only (the test split is
for ``bench episodes --split test``), by default in the fresh wording, the phrasings least worked on.

    .venv/bin/python bench/episode_length.py [--seeds 25] [--minutes 2,5,10,20] [--wording fresh|dev] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SCORES = BENCH / "scores" / "episode_length.jsonl"
DOC = REPO / "docs" / "benchmarks.md"
PLOT = REPO / "docs" / "episode_length.png"
HEADING = "Accuracy and answer latency against episode length (issue 44)"


def measure(settings: Any, seed: int, minutes: float, wording: str,
            ingested: dict[str, Any] | None = None) -> dict[str, Any]:
    """One episode through build, fresh ingest and answering; the line recorded for it. ``ingested``: a recorded
    line of the same episode whose memory is answered again as it stands (its ingest figures are kept)."""
    from m3agent.bench.environment import environment
    from m3agent.bench.episodes.catalogue import load_catalogue
    from m3agent.bench.episodes.people_run import run_eval_set
    from m3agent.bench.episodes.questions import episode_set, load_templates
    from m3agent.bench.episodes.run import report
    from m3agent.llm import chat_model_from_settings

    load = os.getloadavg()[0]
    _, eval_set = episode_set(load_catalogue(), load_templates(), seed, minutes, "dev",
                              "fresh" if wording == "fresh" else None)
    result = run_eval_set(settings, eval_set, chat=chat_model_from_settings(settings), fresh=ingested is None)
    scorer = report(result["answers"])["scorer"]
    env = environment()
    answers = [{"type": a["type"], "right": bool(a[scorer]), "latency_s": round(a["latency_s"], 2),
                "question": a["question"], "gold": a["gold"], "answer": a["answer"], "plan": a.get("plan")}
               for a in result["answers"]]  # dev questions only: reading them is allowed
    figures = ingested or result
    return {"seed": seed, "minutes": minutes, "wording": wording, "scorer": scorer,
            "episode_s": figures["episode_s"], "ingest_s": figures["ingest_s"], "memories": figures["memories"],
            "answers_again": ingested is not None, "llm": settings.llm, "date": env["date"],
            "commit": env["git_commit"], "cpu": env["machine"]["cpu"], "cores": env["machine"]["cores"],
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2), "answers": answers}


def latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last line of each (seed, length, wording): a memory answered again replaces its earlier answers."""
    last = {(r["seed"], r["minutes"], r["wording"]): r for r in rows}
    return list(last.values())


def by_length(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per (length, wording): questions, accuracy with its interval, latencies, ingest RTF."""
    from m3agent.bench.episodes.people_eval import TYPES
    from m3agent.bench.stats import bootstrap_accuracy

    groups: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for row in latest(rows):
        groups.setdefault((row["minutes"], row["wording"]), []).append(row)
    out = []
    for (minutes, wording), group in sorted(groups.items()):
        answers = [a for row in group for a in row["answers"]]
        latencies = sorted(a["latency_s"] for a in answers)
        out.append({
            "minutes": minutes, "wording": wording, "seeds": sorted(r["seed"] for r in group),
            "overall": bootstrap_accuracy([a["right"] for a in answers]).to_dict(),
            "by_type": {t: [sum(a["right"] for a in answers if a["type"] == t),
                            sum(1 for a in answers if a["type"] == t)] for t in TYPES},
            "p50_s": round(statistics.median(latencies), 2),
            "p90_s": round(latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))], 2),
            "ingest_rtf": round(sum(r["ingest_s"] for r in group) / sum(r["episode_s"] for r in group), 3),
            "memories_per_min": round(60 * sum(r["memories"] for r in group) / sum(r["episode_s"] for r in group), 1),
            "load": f"{min(r['load_before'] for r in group):.1f}-{max(r['load_after'] for r in group):.1f}",
        })
    return out


def render(rows: list[dict[str, Any]], summary: list[dict[str, Any]], command: str) -> str:
    """The section body from the recorded lines and their :func:`by_length` summary."""
    from m3agent.bench.episodes.people_eval import TYPES

    rows = latest(rows)
    first, last = min(rows, key=lambda r: r["date"]), max(rows, key=lambda r: r["date"])
    lines = [
        f"Machine: {last['cpu']}, {last['cores']} cores. Runs {first['date']} to {last['date']}, commits "
        f"{', '.join(sorted({_commit(r) for r in rows}))}. Model {last['llm']}, {last['scorer']} scoring. "
        f"Command: `{command}`.",
        "",
        "Generated dev episodes of seeds first ingested for this study, each ingested fresh with the default settings "
        "and asked 30 questions; "
        + ("answered again on the same memories after a change to answering (ingest figures of the first run). "
           if any(r.get("answers_again") for r in rows) else "")
        + "Accuracy: right / asked [bootstrap 95 % interval]; "
        "latency: one grounded answer, end to end; ingest RTF: ingest wall seconds (perception, memories, "
        "consolidation) / media seconds; load: the 1-minute load average before the first and after the last episode.",
        "",
        "| minutes | wording | seeds | accuracy | " + " | ".join(TYPES) + " | p50 s | p90 s | ingest RTF | "
        "memories / min | load |",
        "|" + "---|" * (9 + len(TYPES)),
    ]
    for s in summary:
        acc = s["overall"]
        lines.append(
            f"| {s['minutes']:g} | {s['wording']} | {','.join(map(str, s['seeds']))} | {acc['correct']}/{acc['n']} = "
            f"{acc['accuracy']:.2f} [{acc['ci95'][0]:.2f}-{acc['ci95'][1]:.2f}] | "
            + " | ".join(f"{s['by_type'][t][0]}/{s['by_type'][t][1]}" for t in TYPES)
            + f" | {s['p50_s']:g} | {s['p90_s']:g} | {s['ingest_rtf']:g} | {s['memories_per_min']:g} | {s['load']} |")
    lines += ["", f"![accuracy and latency against episode length]({PLOT.name})"]
    return "\n".join(lines)


def _commit(row: dict[str, Any]) -> str:
    commit = str(row["commit"])
    return commit if commit.startswith("uncommitted") else commit[:10]


def plot(summary: list[dict[str, Any]]) -> bool:
    """Accuracy (with its interval) and p50 / p90 latency against minutes, from :func:`by_length`'s summary; False
    without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", flush=True)
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    for wording in sorted({s["wording"] for s in summary}):
        mine = [s for s in summary if s["wording"] == wording]
        x = [s["minutes"] for s in mine]
        acc = [s["overall"]["accuracy"] for s in mine]
        low = [a - s["overall"]["ci95"][0] for a, s in zip(acc, mine, strict=True)]
        high = [s["overall"]["ci95"][1] - a for a, s in zip(acc, mine, strict=True)]
        left.errorbar(x, acc, yerr=[low, high], marker="o", capsize=3, label=f"{wording} wording")
        right.plot(x, [s["p50_s"] for s in mine], marker="o", label=f"p50 ({wording})")
        right.plot(x, [s["p90_s"] for s in mine], marker="s", linestyle="--", label=f"p90 ({wording})")
    left.set(xlabel="episode minutes", ylabel="accuracy", ylim=(0, 1), title="answers right")
    right.set(xlabel="episode minutes", ylabel="seconds", title="answer latency")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="25", help="dev seeds, comma-separated")
    parser.add_argument("--minutes", default="2,5,10,20", help="episode lengths, comma-separated (2 to 30)")
    parser.add_argument("--wording", choices=("fresh", "dev"), default="fresh")
    parser.add_argument("--again", action="store_true", help="measure recorded (seed, length) pairs again")
    parser.add_argument("--answer-again", action="store_true",
                        help="answer recorded episodes again on their cached memories (answering changed, not ingest)")
    parser.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md and the plot alone")
    args = parser.parse_args(argv)
    from m3agent.bench.results_io import JsonlLog, replace_section
    from m3agent.settings import load_settings

    settings = load_settings(shared_dir=REPO.parent / "shared")
    log = JsonlLog(SCORES)
    for minutes in (float(m) for m in args.minutes.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            done = [r for r in log.read() if r["seed"] == seed and r["minutes"] == minutes
                    and r["wording"] == args.wording]
            if done and not (args.again or args.answer_again):
                continue
            print(f"seed {seed}, {minutes:g} minutes ({args.wording} wording)", file=sys.stderr, flush=True)
            log.append(measure(settings, seed, minutes, args.wording,
                               done[-1] if done and args.answer_again else None))
    rows = log.read()
    summary = by_length(rows)
    for s in summary:
        print({k: s[k] for k in ("minutes", "wording", "seeds", "overall", "p50_s", "p90_s", "ingest_rtf")})
    if rows and not args.no_write:
        plot(summary)
        command = "python bench/episode_length.py " + " ".join(argv if argv is not None else sys.argv[1:])
        replace_section(DOC, HEADING, render(rows, summary, command.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
