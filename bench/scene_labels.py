"""Scenes found by their description: the catalogue's labels resolved on generated dev episodes (issue 44).

A question names a scene by what it shows ("the split-screen debate", "the photo of a grey-haired man with a red tie
before a flag"); :func:`m3agent.graph.scenes.matching_scenes` reads the words into measured terms and returns the
scenes that fit best. This scores that step alone, against the episode's timeline: for each distinct label of a
generated dev episode, whether the earliest scene found lies in a part with that label ("first": what "when is X
first shown?" and order questions use), whether every scene found does ("all": nothing else fits as well) and
whether none was found. Episodes are built and ingested as ``m3agent bench episodes`` does (a cached memory is
used as it stands). Dev seeds only. One line per run goes to ``bench/scores/scene_labels.jsonl``; the section of
docs/benchmarks.md is written from every line.

    .venv/bin/python bench/scene_labels.py --seeds 1,2,3 --label "what changed" [--no-write]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SCORES = BENCH / "scores" / "scene_labels.jsonl"
DOC = REPO / "docs" / "benchmarks.md"
HEADING = "Scenes found by their description (issue 44)"
OVERLAP_S = 1.0
"""Seconds a found scene must share with a part of the label to count as that part (cuts are read to ~0.5 s)."""


def episode_labels(settings: Any, seed: int) -> list[dict[str, Any]]:
    """For each distinct label of dev episode ``seed``: its parts' spans and the spans of the scenes found."""
    from m3agent.bench.episodes.catalogue import load_catalogue
    from m3agent.bench.episodes.people_run import build
    from m3agent.bench.episodes.questions import episode_set, load_templates
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.scenes import describe, matching_scenes
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory
    from m3agent.store.location import parse_location

    episode, eval_set = episode_set(load_catalogue(), load_templates(), seed, 2.0, "dev")
    video, timeline = build(eval_set, settings)
    run = settings.model_copy(update={"memory": parse_location(str(video.with_suffix(".db")))})
    ingest_source(run, str(video), video_id=eval_set.name, show_progress=False)  # a no-op on a cached memory
    spans: dict[str, list[tuple[float, float]]] = {}
    for part in episode.parts:
        spans.setdefault(part.piece.label, []).append(timeline[part.part_id])
    out = []
    with open_memory(run, readonly=True, create=False) as store:
        graph = EntityGraph(store)
        for label, parts in spans.items():
            found = matching_scenes(graph, eval_set.name, describe(label))
            out.append({"seed": seed, "label": label, "parts": parts,
                        "found": [(round(s.start_s, 2), round(s.end_s, 2)) for s in found]})
    return out


def _inside(scene: tuple[float, float], parts: list[tuple[float, float]]) -> bool:
    return any(min(scene[1], end) - max(scene[0], start) > OVERLAP_S for start, end in parts)


def score(items: list[dict[str, Any]]) -> dict[str, int]:
    """Labels, first right, all right, none found."""
    first = sum(bool(i["found"]) and _inside(i["found"][0], i["parts"]) for i in items)
    every = sum(bool(i["found"]) and all(_inside(f, i["parts"]) for f in i["found"]) for i in items)
    return {"labels": len(items), "first": first, "all": every, "none": sum(not i["found"] for i in items)}


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "Each distinct scene label of a generated dev episode (the catalogue's own words, as questions name scenes) "
        "is read by `m3agent.graph.scenes.describe` and resolved by `matching_scenes` on the episode's memory "
        "(default settings). *First right*: the earliest scene found lies in a part with that label; *all right*: "
        "every scene found does; *none found*: nothing fits the description. The labels a memory cannot tell "
        "apart by what perception measures (\"the rap performance on stage\": no model here recognises a stage or "
        "a rap) stay unresolved or are resolved by chance. Command: `python bench/scene_labels.py --seeds ... "
        "--label ...` (dev seeds only).",
        "",
        "| run | date / commit | seeds | labels | first right | all right | none found |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        s = row["score"]
        commit = str(row["commit"])
        commit = "uncommitted" if commit.startswith("uncommitted") else commit[:10]
        lines.append(f"| {row['label']} | {row['date']} / {commit} | {row['seeds']} | {s['labels']} | "
                     f"{s['first']} | {s['all']} | {s['none']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", required=True, help="dev seeds, comma-separated")
    parser.add_argument("--label", required=True, help="what this run measures (the row's name)")
    parser.add_argument("--no-write", action="store_true", help="print only; record nothing")
    args = parser.parse_args(argv)
    from m3agent.bench.environment import environment
    from m3agent.bench.episodes.questions import load_templates
    from m3agent.bench.results_io import JsonlLog, replace_section
    from m3agent.settings import load_settings

    seeds = [int(s) for s in args.seeds.split(",")]
    test = set(load_templates().seeds["test"]) & set(seeds)
    if test:
        print(f"seeds {sorted(test)} are test seeds: the test split is not read label by label", file=sys.stderr)
        return 2
    settings = load_settings(shared_dir=REPO.parent / "shared")
    items = [item for seed in seeds for item in episode_labels(settings, seed)]
    result = score(items)
    for item in items:
        if not (item["found"] and all(_inside(f, item["parts"]) for f in item["found"])):
            print(f"  seed {item['seed']}: {item['label']!r} at {item['parts']}, found {item['found']}")
    print(result)
    if not args.no_write:
        env = environment()
        log = JsonlLog(SCORES)
        log.append({"label": args.label, "date": env["date"], "commit": env["git_commit"],
                    "cpu": env["machine"]["cpu"], "seeds": args.seeds, "score": result, "items": items})
        replace_section(DOC, HEADING, render(log.read()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
