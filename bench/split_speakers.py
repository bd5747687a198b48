"""Who speaks in a split screen, line by line: the entity graph's "who is speaking at T?" over every attributed line.

A generated episode asks one or two who-speaks questions of a split-screen piece, so a seed's score says little
about the operation. This asks it of **every** line the catalogue attributes to a person in every split-screen
piece of the given dev episodes (the debate's lines: Trump on the left, Clinton on the right), at the line's
middle, with the plan written directly (no model: the operation is measured, not the reading), and counts an
answer right when it names the speaker's side and not the other's. The episodes' memories are those
``m3agent bench episodes`` caches (ingested here when missing). Dev seeds only: the test split stays unread.

    .venv/bin/python bench/split_speakers.py --seeds 46,47,48,49,50,51,53,56,60 [--no-write]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SECTION = "Who speaks in a split screen, line by line (dev episodes)"


def line_answers(seed: int, settings: Any) -> list[dict[str, Any]]:
    """The graph's answer at the middle of every attributed line of the split-screen pieces of dev ``seed``."""
    from m3agent.bench.episodes.catalogue import load_catalogue
    from m3agent.bench.episodes.people_run import build
    from m3agent.bench.episodes.questions import episode_set, load_templates
    from m3agent.control.people.graph_answers import graph_answer
    from m3agent.control.people.plan import Plan
    from m3agent.control.replies import PlanRef, PlanReply
    from m3agent.graph.operators import EntityGraph
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory
    from m3agent.store.location import parse_location
    from m3agent.text import clock

    catalogue, templates = load_catalogue(), load_templates()
    episode, eval_set = episode_set(catalogue, templates, seed, 2.0, "dev", "dev")
    video, timeline = build(eval_set, settings)
    run = settings.model_copy(update={"memory": parse_location(str(video.with_suffix(".db")))})
    ingest_source(run, str(video), video_id=eval_set.name, show_progress=False)  # a no-op when cached
    rows = []
    with open_memory(run, readonly=True, create=False) as store:
        graph = EntityGraph(store)
        for part in episode.parts:
            piece = part.piece
            if not piece.split_screen or piece.lines is None:
                continue
            side = {p.who: p.position for p in piece.people}
            start = timeline[part.part_id][0]
            for line in piece.lines:
                if line.who is None or side.get(line.who) not in ("left", "right"):
                    continue
                at = clock(start + (line.start + line.end) / 2)
                question = f"At {at}, is the person on the left or the one on the right speaking?"
                reply = PlanReply(ask="who_speaks", direction="any", sense="heard",
                                  person=PlanRef(kind="none", place="any", time=at))
                answer = graph_answer(graph, eval_set.name, Plan(reply, question))
                text = answer.text if answer is not None else ""
                gold = side[line.who]
                wrong = "left" if gold == "right" else "right"
                named = text.split(":")[0] if text.startswith("Most likely") else text.split(";")[0]
                rows.append({"seed": seed, "piece": piece.id, "at": at, "side": gold, "answer": text,
                             "right": gold in named and wrong not in named})
    return rows


def render(rows: list[dict[str, Any]], command: str, env: dict[str, Any]) -> str:
    right = sum(r["right"] for r in rows)
    seeds = sorted({r["seed"] for r in rows})
    moving = [r["right"] and "mouth moves more above its own usual" in r["answer"] for r in rows]
    likely = [r["right"] and r["answer"].startswith("Most likely") and not m for r, m in zip(rows, moving, strict=True)]
    by = {"most likely (lips or elimination)": sum(likely), "most likely (a mouth moving above its usual)": sum(moving),
          "a linked face": sum(r["right"] and not r["answer"].startswith("Most likely") for r in rows)}
    wrong = [r for r in rows if not r["right"]]
    lines = [f"Machine: {env['cpu']}, {env['cores']} cores. Command: `{command}`. Dev seeds {seeds}; the plan is "
             "written directly (no model), so this measures the operation, not the reading.", "",
             f"**{right}/{len(rows)}** attributed lines answered with the speaker's side "
             f"({', '.join(f'{v} by {k}' for k, v in by.items())}).", "",
             "| seed | piece | at | speaker's side | answer (start) |", "|---|---|---|---|---|"]
    lines += [f"| {r['seed']} | {r['piece']} | {r['at']} | {r['side']} | {r['answer'][:90]} |" for r in wrong]
    return "\n".join(lines) + ("\n\nThe rows are the lines answered wrong." if wrong else "")


def main() -> int:
    from m3agent.bench.environment import machine
    from m3agent.bench.results_io import replace_section
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="46,47,48,49,50,51,53,56,60", help="dev seeds, comma-separated")
    parser.add_argument("--no-write", action="store_true", help="print, do not write docs/benchmarks.md")
    args = parser.parse_args()
    settings = load_settings(shared_dir=REPO.parent / "shared")
    rows = [r for seed in (int(s) for s in args.seeds.split(",")) for r in line_answers(seed, settings)]
    body = render(rows, "python bench/split_speakers.py --seeds " + args.seeds, machine())
    print(body)
    print(json.dumps({"right": sum(r["right"] for r in rows), "lines": len(rows)}), file=sys.stderr)
    if not args.no_write:
        replace_section(REPO / "docs" / "benchmarks.md", SECTION, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
