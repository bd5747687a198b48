"""Answer selection on LoCoMo: does select mode's chosen memory hold the answer's evidence?

For evenly spaced single-hop LoCoMo questions (category 4), select mode answers from one
`search_memory` retrieval. Scored: is the top retrieved memory, the reranker's first candidate, or
the memory the model chose (with --llm) one of the question's gold evidence turns; and is any gold
turn among the candidates shown (the ceiling). Decides the embedded default `llm` (see README).
Writes the "Answer selection" section of docs/benchmarks.md.

    .venv/bin/python bench/answer_select.py [--questions 80] [--llm llamacpp:smollm2] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def evaluate(questions: int, llm: str | None, settings: Any) -> dict[str, Any]:
    from m3agent.bench.locomo.data import default_locomo_path, load_locomo
    from m3agent.bench.locomo.ingest import dia_id_of
    from m3agent.bench.locomo.run import default_store, ensure_ingested
    from m3agent.control import AgentConfig, ask
    from m3agent.control.retrieval.rerank import rank_candidates
    from m3agent.embed import create_embedder
    from m3agent.llm import create_chat_model
    from m3agent.store import open_store

    embedder = create_embedder(settings.embedder)
    samples = load_locomo(default_locomo_path(settings.shared_dir))
    items = [(s, q) for s in samples for q in s.qa if q.category == 4]
    items = items[:: max(1, len(items) // questions)][:questions]
    chat = create_chat_model(llm) if llm else None
    config = AgentConfig.from_settings(mode="select")
    counts = {"retrieval_top": 0, "reranker": 0, "model_choice": 0, "gold_among_shown": 0, "answered": 0}
    seconds = []
    db = default_store(settings, embedder)
    db.parent.mkdir(parents=True, exist_ok=True)
    with open_store(str(db)) as store:
        ensure_ingested(store, embedder, samples, settings.media.clip_seconds, False)
        for sample, item in items:
            gold = set(item.evidence)
            started = time.perf_counter()
            answer = ask(store, embedder, chat, item.question, video_id=sample.sample_id, config=config)
            seconds.append(time.perf_counter() - started)
            hits = answer.searches[0].hits if answer.searches else ()
            shown = rank_candidates(answer.searches[0], item.question, config.select_k) if answer.searches else []
            chosen = answer.evidence[0] if answer.answered and answer.evidence and answer.evidence[0].cited else None
            counts["retrieval_top"] += bool(hits) and dia_id_of(hits[0].memory) in gold
            counts["reranker"] += bool(shown) and shown[0].hit is not None and dia_id_of(shown[0].hit.memory) in gold
            counts["gold_among_shown"] += any(c.hit is not None and dia_id_of(c.hit.memory) in gold for c in shown)
            counts["model_choice"] += chosen is not None and dia_id_of(store.get_memory(chosen.memory_id)) in gold
            counts["answered"] += answer.answered
    return {"questions": len(items), "llm": llm or "none (reranker)", **counts,
            "mean_s": round(sum(seconds) / max(len(seconds), 1), 2), "max_s": round(max(seconds, default=0.0), 2)}


def write_section(results: list[dict[str, Any]], env: dict[str, Any], command: str, load: float) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [run_line(env, command, load), "",
             "Single-hop LoCoMo questions, evenly spaced; a pick counts when it is one of the question's gold "
             "evidence turns.", "",
             "| chooser | questions | top retrieved | reranker first | chosen | gold among the 6 shown "
             "| answered | mean s / max s |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['llm']} | {r['questions']} | {r['retrieval_top']} | {r['reranker']} | {r['model_choice']} "
                     f"| {r['gold_among_shown']} | {r['answered']} | {r['mean_s']} / {r['max_s']} |")
    replace_section(REPO / "docs" / "benchmarks.md", "Answer selection", "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=80)
    parser.add_argument("--llm", action="append", default=None,
                        help="also let this model choose (repeatable), e.g. llamacpp:smollm2")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if not (SHARED / "data").is_dir():
        print(f"shared data not found at {SHARED / 'data'}", file=sys.stderr)
        return 2
    settings = load_settings(shared_dir=SHARED)
    load = round(os.getloadavg()[0], 2)
    results = [evaluate(args.questions, llm, settings) for llm in [None, *(args.llm or [])]]
    env = environment(embedder=settings.embedder)
    print(json.dumps({"results": results, "environment": env}, indent=2))
    if not args.no_write:
        command = "python bench/answer_select.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(results, env, command, load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
