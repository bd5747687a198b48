"""Plan accuracy of the packaged model: how often the query plan's operation is one a question accepts.

The plan call alone (no ingest, no answer): the dev episodes' questions (``m3agent bench episodes``' generator,
dev seeds only, 2 minutes each) and the 46-question regression set, each with the operations that read it right
(``asks``), as the model wrote it and after the plan's checks against the question's reading
(``control.people.plan.Plan``). A change to the plan prompt is kept only if this does not drop.
``--fresh-wording`` also asks the dev seeds' questions in the fresh wording (a later hand's phrasings of the
same facts), to show how far plans lean on the dev phrasings. Writes the "Plan accuracy" section of
docs/benchmarks.md and prints the questions whose checked plan missed.

    .venv/bin/python bench/plan_accuracy.py [--seeds 1 2 3] [--fresh-wording] [--llm llamacpp:qwen-1.5b] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def plan_rows(llm: str, seeds: list[int], fresh_wording: bool = False) -> list[dict[str, Any]]:
    """One row per question: its set, type, accepted asks, the plan's ask, right or not, seconds."""
    from m3agent.bench.episodes.catalogue import load_catalogue
    from m3agent.bench.episodes.people_eval import load_eval_set, render
    from m3agent.bench.episodes.people_run import build
    from m3agent.bench.episodes.questions import episode_set, load_templates
    from m3agent.control.people.plan import Plan
    from m3agent.control.replies import PlanReply
    from m3agent.llm import chat_model_from_settings
    from m3agent.llm.prompts import load_prompt_set
    from m3agent.settings import load_settings

    settings = load_settings(llm=llm)
    chat = chat_model_from_settings(settings)
    prompts = load_prompt_set("control_plan")
    catalogue, templates = load_catalogue(), load_templates()
    sets = [episode_set(catalogue, templates, s, 2.0, "dev")[1] for s in seeds] + [load_eval_set()]
    if fresh_wording:
        sets += [replace(episode_set(catalogue, templates, s, 2.0, "dev", "fresh")[1],
                         name=f"{sets[i].name} (fresh wording)") for i, s in enumerate(seeds)]
    rows = []
    for eval_set in sets:
        _, timeline = build(replace(eval_set, name=eval_set.name.removesuffix(" (fresh wording)")), settings)
        for q in eval_set.questions:
            text = render(q.question, timeline)
            messages = [{"role": "system", "content": prompts.render("system")},
                        {"role": "user", "content": prompts.render("user", question=text)}]
            started = time.perf_counter()
            reply = PlanReply.read(chat.chat(messages, schema=prompts.schema, max_tokens=160, temperature=0.0))
            ask, checked = reply.ask, Plan(reply, text).ask
            rows.append({"set": eval_set.name, "type": q.type, "question": text, "asks": list(q.asks), "plan": ask,
                         "ok": not q.asks or ask in q.asks, "checked": checked,
                         "checked_ok": not q.asks or checked in q.asks, "s": round(time.perf_counter() - started, 1)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="dev seeds only")
    parser.add_argument("--fresh-wording", action="store_true", help="also the same facts in the fresh wording")
    parser.add_argument("--llm", default="llamacpp:qwen-1.5b")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    load_average = round(os.getloadavg()[0], 2)
    rows = plan_rows(args.llm, args.seeds, args.fresh_wording)
    for row in rows:
        if not row["checked_ok"]:
            print(f"missed: {row['plan']} (checked: {row['checked']}) for {row['asks']}: {row['question']}", flush=True)
    by_set = {s: [r for r in rows if r["set"] == s] for s in dict.fromkeys(r["set"] for r in rows)}
    print({s: f"{sum(r['ok'] for r in rs)}/{len(rs)}, checked {sum(r['checked_ok'] for r in rs)}"
           for s, rs in by_set.items()})
    if not args.no_write:
        from m3agent.bench.environment import environment
        from m3agent.bench.results_io import replace_section, run_line

        command = "python bench/plan_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])
        lines = [run_line(environment(), command, load_average), "", f"Model: {args.llm}.", "",
                 "| set | questions | plan right | after the plan's checks |", "|---|---|---|---|"]
        lines += [f"| {s} | {len(rs)} | {sum(r['ok'] for r in rs)} | {sum(r['checked_ok'] for r in rs)} |"
                  for s, rs in by_set.items()]
        lines += [f"| all | {len(rows)} | {sum(r['ok'] for r in rows)} | {sum(r['checked_ok'] for r in rows)} |"]
        replace_section(REPO / "docs" / "benchmarks.md", "Plan accuracy", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
