"""Search latency on a memory that already has its vector snapshot: the corpus questions through a warm API.

``bench/search_scale.py`` copies the pristine corpus store for every run, so each run also rebuilds the vector
snapshot (28 minutes at 10^6 on 2 cores). To compare code versions on the same large memory, build the snapshot
once in a copy (``--build`` does it, or any earlier ``m3agent serve`` / search on it) and time the searches
here, one process per code version (``PYTHONPATH`` picks the code). The questions are ``search_scale``'s for the
memory's size: ``plain``, ``character`` (restricted to a named person) and ``video`` (one video up to a clip);
the keyword index is built before timing (the first search starts it), and a few plain searches warm up.

    cp ~/.cache/m3agent/bench/search-1000000.db /tmp/m6.db
    .venv/bin/python bench/search_warm.py /tmp/m6.db --size 1000000 --build
    PYTHONPATH=/path/to/other/checkout/src .venv/bin/python bench/search_warm.py /tmp/m6.db --size 1000000
    .venv/bin/python bench/search_warm.py /tmp/m6.db --size 1000000 --profile character

Prints one JSON line: p50 / p95 / max milliseconds per kind, the load average and the code's path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_scale import KINDS, query_set


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("memory", type=Path, help="a copy of a corpus store (it gains a vector snapshot)")
    parser.add_argument("--size", type=int, required=True, help="the corpus size it was built at (picks questions)")
    parser.add_argument("--queries", type=int, default=30, help="questions of each kind")
    parser.add_argument("--build", action="store_true", help="build and save the vector snapshot first")
    parser.add_argument("--profile", choices=KINDS, help="print cProfile's top functions for this kind only")
    args = parser.parse_args(argv)
    import m3agent
    from m3agent.store import open_store

    if args.build:
        begin = time.perf_counter()
        with open_store(str(args.memory)) as store:
            store.build_vector_index()  # type: ignore[attr-defined]
        print(f"snapshot built in {time.perf_counter() - begin:.0f} s", file=sys.stderr)
    questions = query_set(args.size, args.queries)
    out: dict[str, object] = {"code": str(Path(m3agent.__file__).parent), "load": round(os.getloadavg()[0], 2)}
    with m3agent.open(args.memory, llm="none") as agent:
        agent.search(questions["plain"][0].text, 10)
        keywords = getattr(agent._store(), "_keywords", None)
        if keywords is not None:
            keywords.wait()
        for q in questions["plain"][:3]:
            agent.search(q.text, 10)
        for kind in [args.profile] if args.profile else KINDS:
            out[kind] = _timed(agent, questions[kind], profile=bool(args.profile))
    print(json.dumps(out))
    return 0


def _timed(agent: Any, items: Sequence[Any], *, profile: bool) -> dict[str, float]:
    """p50 / p95 / max milliseconds of the searches (with cProfile's report on stderr when ``profile``)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile() if profile else None
    seconds = []
    if profiler is not None:
        profiler.enable()
    for q in items:
        begin = time.perf_counter()
        agent.search(q.text, 10, video_id=q.video_id, before_clip=q.before_clip)
        seconds.append(time.perf_counter() - begin)
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    ms = np.asarray(seconds) * 1000.0
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
            "max_ms": round(float(ms.max()), 1)}


if __name__ == "__main__":
    sys.exit(main())
