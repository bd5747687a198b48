"""``m3agent bench episodes``: generated episodes of one split, each built (cached), ingested into a fresh memory
and asked its questions the way ``bench episode`` asks (:func:`~m3agent.bench.episodes.people_run.run_eval_set`).

The report gives accuracy per question type with a seeded bootstrap 95 % interval over all questions of the run
(judged when a judge model is given, by keywords otherwise), p50 answer latency, each episode's figures, and,
when the other split has a recorded run of the same length and scorer, the dev-test gap per type. Runs are
appended to ``bench/scores/episodes.jsonl`` and the section of docs/benchmarks.md is rewritten from all rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.bench.episodes.people_eval import TYPES
from m3agent.bench.results_io import JsonlLog, replace_section
from m3agent.bench.stats import bootstrap_accuracy

if TYPE_CHECKING:
    from m3agent.bench.episodes.questions import Split, Wording
    from m3agent.bench.judge import Judge
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings

HEADING = "Generated episodes (dev and test splits)"
DEFAULT_MINUTES = 3.0


def run_episodes(settings: Settings, split: Split, seeds: Sequence[int] | None = None,
                 minutes: float = DEFAULT_MINUTES, *, chat: ChatModel | None = None, judge: Judge | None = None,
                 show_progress: bool = True, wording: Wording | None = None) -> dict[str, Any]:
    """Every episode of ``seeds`` (default: the split's list) through build, fresh ingest and answering; the
    report of :func:`report` with each episode's figures under ``episodes`` and every answer under ``answers``.
    ``wording``: the phrasings asked (default: the split's; ``fresh`` for dev seeds)."""
    from m3agent.bench.episodes.catalogue import load_catalogue
    from m3agent.bench.episodes.people_run import run_eval_set
    from m3agent.bench.episodes.questions import episode_set, load_templates

    catalogue, templates = load_catalogue(), load_templates()
    episodes, answers = [], []
    for seed in seeds or templates.seeds[split]:
        _, eval_set = episode_set(catalogue, templates, seed, minutes, split, wording)
        result = run_eval_set(settings, eval_set, chat=chat, judge=judge, fresh=True, show_progress=show_progress)
        episodes.append({"seed": seed, "name": eval_set.name, **{k: result[k] for k in (
            "episode_s", "ingest_s", "ingest_rtf", "memories", "mode", "llm")}, "overall": result["overall"]})
        answers += [a | {"seed": seed} for a in result["answers"]]
    out = report(answers)
    out.update(split=split, wording=wording or split, seeds=[e["seed"] for e in episodes], minutes=minutes,
               catalogue=catalogue.digest,
               templates=templates.name, mode=episodes[0]["mode"] if episodes else None, llm=settings.llm,
               judge=None if judge is None else judge.info(), episodes=episodes, answers=answers)
    return out


def report(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy per type and overall with bootstrap 95 % intervals, and p50 latency. An answer counts as right
    by its judge's verdict when every answer was judged, by its keywords otherwise."""
    scorer = "judged" if answers and all(a["judged"] is not None for a in answers) else "keyword"
    right = [(a["type"], bool(a[scorer])) for a in answers]
    by_type = {t: bootstrap_accuracy([ok for kind, ok in right if kind == t]).to_dict()
               for t in TYPES if any(kind == t for kind, _ in right)}
    return {"scorer": scorer, "by_type": by_type, "overall": bootstrap_accuracy([ok for _, ok in right]).to_dict(),
            "p50_latency_s": round(statistics.median(a["latency_s"] for a in answers), 2) if answers else None,
            "questions": len(answers)}


def wording_of(row: dict[str, Any]) -> str:
    """The phrasings a recorded run asked (rows before the fresh wording name only their split)."""
    return str(row.get("wording") or row.get("split"))


def gap(rows: list[dict[str, Any]], result: dict[str, Any]) -> dict[str, float] | None:
    """Dev accuracy minus test accuracy per type (and ``all``), against the latest recorded run of the other
    split with the same length and scorer; for a run in the fresh wording, the latest dev-wording run of the same
    seeds minus it. None when there is no such run."""
    fresh = wording_of(result) == "fresh"
    other = "dev" if fresh or result["split"] == "test" else "test"
    same = [r for r in rows if wording_of(r) == other and r.get("minutes") == result["minutes"]
            and r.get("scorer") == result["scorer"] and (not fresh or r.get("seeds") == result.get("seeds"))]
    if not same:
        return None
    dev, test = (result, same[-1]) if other == "test" else (same[-1], result)
    out = {t: round(dev["by_type"][t]["accuracy"] - test["by_type"][t]["accuracy"], 3)
           for t in TYPES if t in dev["by_type"] and t in test["by_type"]}
    out["all"] = round(dev["overall"]["accuracy"] - test["overall"]["accuracy"], 3)
    return out


def record_run(scores: Path, doc: Path, result: dict[str, Any], label: str, env: dict[str, Any]) -> dict[str, Any]:
    """Append the run's summary to ``scores`` and rewrite the section of ``doc``; returns the row written."""
    log = JsonlLog(scores)
    keys = ("split", "wording", "seeds", "minutes", "scorer", "by_type", "overall", "p50_latency_s", "questions",
            "catalogue", "templates", "mode", "llm", "judge", "gap")
    row = {"label": label, "date": env["date"], "commit": env["git_commit"], "cpu": env["machine"]["cpu"],
           "cores": env["machine"]["cores"], **{k: result.get(k) for k in keys},
           "episodes": [{k: e[k] for k in ("seed", "episode_s", "ingest_s", "memories")} for e in result["episodes"]]}
    log.append(row)
    replace_section(doc, HEADING, render(log.read()))
    return row


def render(rows: list[dict[str, Any]]) -> str:
    """The section body: what the benchmark is, one row per run, and the latest dev-test gap."""
    head = ["run", "date / commit", "split", "seeds × min", "scorer", *TYPES, "all", "p50 s"]
    lines = [
        "Episodes generated by seed from a hand-annotated catalogue of the real pieces of `../shared/media` "
        "(`src/m3agent/bench/data/catalogue_v1.json`): split screens, stills under voices, voices over a dark "
        "screen, the same person in two pieces, recurring pieces. 30 questions per episode (5 per type; fewer speech "
        "ones when an episode holds little transcribed speech) are written from the timeline by templates "
        "(`episode_templates_v1.json`), scored like `bench episode`; dev and test have disjoint seeds and "
        "disjoint phrasings. Test seeds and phrasings are reported, never debugged question by question. A dev run "
        "in the fresh wording (`--fresh-wording`) asks the same facts in a later hand's phrasings. Cells: "
        "accuracy [bootstrap 95 % interval] over all questions of the run. Command: "
        "`m3agent bench episodes --split dev|test [--seeds ...] [--minutes N]` (default settings, a fresh memory "
        "per episode).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    latest = {s: [r for r in rows if wording_of(r) == s] for s in ("dev", "test")}
    if latest["dev"] and latest["test"]:
        dev, test = latest["dev"][-1], latest["test"][-1]
        if dev.get("minutes") == test.get("minutes") and dev.get("scorer") == test.get("scorer"):
            gaps = gap([test], dev) or {}
            lines += ["", "Dev – test gap (latest runs): " + ", ".join(f"{k} {v:+.2f}" for k, v in gaps.items())]
    return "\n".join(lines)


def _cells(row: dict[str, Any]) -> list[str]:
    by_type = row.get("by_type", {})
    seeds = row.get("seeds") or []
    split = str(row.get("split")) + (" (fresh wording)" if wording_of(row) == "fresh" else "")
    return [row["label"], f"{row['date']} / {str(row['commit'])[:10]}", split,
            f"{len(seeds)} ({','.join(map(str, seeds))}) × {row.get('minutes'):g}", str(row.get("scorer")),
            *(_accuracy(by_type.get(t)) for t in TYPES), _accuracy(row.get("overall")),
            "–" if row.get("p50_latency_s") is None else f"{row['p50_latency_s']:g}"]


def _accuracy(figures: dict[str, Any] | None) -> str:
    if not figures:
        return "–"
    low, high = figures["ci95"]
    return f"{figures['accuracy']:.2f} [{low:.2f}–{high:.2f}]"
