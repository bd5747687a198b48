"""Vector search alone at scale: the store's vector search over the calls the API's searches make, by phase.

For each size N (the stores of :mod:`search_scale`, copied) it runs the bench's questions through
``m3agent.open(path).search`` once, recording every ``vector_search_best(vectors, k, filter)`` (code before it:
``vector_search(vector, k, filter)``) the searcher makes
(the embedded variants; the character filters of ``character``, the video scope of ``video``), then replays
them on a fresh store with its graph built: p50/p95 per kind of the whole call (wall clock and CPU) and of
its phases (CPU: resolving the filter, the index's candidates, the unsynced tail, the exact re-scoring in
SQLite), and the rows the filter keeps. ``--check`` compares every result with a brute-force exact search.

Usage: ``PYTHONPATH=src nice .venv/bin/python bench/vector_scale.py --sizes 10000,100000 --label after``
(``PYTHONPATH`` picks the code measured); results go to ``bench/scores/vector_scale.json``.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_scale import commit, fresh_copy, percentiles, query_set, record_store_calls

SCORES = Path(__file__).resolve().parent / "scores" / "vector_scale.json"
Call = tuple[Any, int, Any]


def record_calls(path: Path, queries: dict[str, list[Any]]) -> dict[str, list[Call]]:
    """The vector search calls of each kind's API searches (each query a float32 matrix, one vector per row)."""
    from m3agent.store.sqlite.store import SQLiteStore

    if hasattr(SQLiteStore, "vector_search_best"):
        return record_store_calls(path, queries, "vector_search_best",
                                  lambda found: np.asarray(found, np.float32).reshape(len(found), -1).copy())
    return record_store_calls(path, queries, "vector_search", lambda query: np.asarray(query, np.float32)[None].copy())


def search(store: Any, queries: Any, k: int, flt: Any) -> Any:
    """One recorded call, through the method the code measured has."""
    if hasattr(store, "vector_search_best"):
        return store.vector_search_best(list(queries), k, flt)
    return store.vector_search(queries[0], k, flt)


class Phases:
    """Wraps the phases of :func:`sqlite_search.vector_search` with timers (the thread's CPU seconds per call:
    on loaded cores the wall clock adds the waits for a core)."""

    NAMES = ("mirror_filter", "candidates", "tail", "exact_rows")

    def __init__(self) -> None:
        from m3agent.store.index.memory_vectors import MemoryVectors
        from m3agent.store.sqlite import search as sqlite_search
        from m3agent.store.sqlite.store import SQLiteStore

        self.now: dict[str, float] = {}
        self.info: dict[str, Any] = {}
        self._undo: list[Callable[[], None]] = []
        for owner, name in ((SQLiteStore, "_mirror_filter"), (sqlite_search, "_tail_ids"),
                            (sqlite_search, "_exact_rows"), (MemoryVectors, "candidates")):
            self._wrap(owner, name)

    def _wrap(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)
        phase = {"_mirror_filter": "mirror_filter", "_tail_ids": "tail", "_exact_rows": "exact_rows"}.get(name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            begin = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                key = phase or name
                self.now[key] = self.now.get(key, 0.0) + time.thread_time() - begin

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def close(self) -> None:
        for undo in self._undo:
            undo()


def replay(path: Path, calls: dict[str, list[Call]], check: bool) -> dict[str, Any]:
    from m3agent.store import open_store
    from m3agent.store.index.vectors import MirrorFilter

    out: dict[str, Any] = {}
    with open_store(str(path)) as store:
        begin = time.perf_counter()
        store.build_vector_index()  # type: ignore[attr-defined]
        out["build_s"] = round(time.perf_counter() - begin, 1)
        index = store._synced_vectors()  # type: ignore[attr-defined]
        phases = Phases()
        try:
            for kind, items in calls.items():
                for q, k, f in items[:3]:
                    search(store, q, k, f)
                seconds: list[float] = []
                cpu: list[float] = []
                by_phase: dict[str, list[float]] = {n: [] for n in Phases.NAMES}
                kept: list[int] = []
                for q, k, f in items:
                    store._mirror_memo = None  # type: ignore[attr-defined]  # a new question resolves its filter
                    if hasattr(store, "_linked_memo"):  # and its person's memories (code that keeps them)
                        store._linked_memo = ((), {})
                    phases.now = {}
                    begin, begin_cpu = time.perf_counter(), time.thread_time()
                    search(store, q, k, f)
                    seconds.append(time.perf_counter() - begin)
                    cpu.append(time.thread_time() - begin_cpu)
                    for n in Phases.NAMES:
                        by_phase[n].append(phases.now.get(n, 0.0))
                    resolved = store._mirror_memo[1] if store._mirror_memo else None  # type: ignore[attr-defined]
                    if isinstance(resolved, MirrorFilter):
                        with index.lock:
                            kept.append(int(index.mirror.mask(resolved).sum()))
                entry: dict[str, Any] = {"calls": len(items), **percentiles(seconds), "cpu": percentiles(cpu)}
                for n, values in by_phase.items():
                    entry[n] = percentiles(values)
                if kept:
                    entry["filter_rows"] = {"p50": int(np.median(kept)), "max": int(max(kept))}
                if check:
                    entry["mismatches"] = _check(store, items)
                out[kind] = entry
        finally:
            phases.close()
    return out


def _check(store: Any, items: list[Call]) -> int:
    """Calls whose results differ from a brute-force exact search (ids and scores)."""
    from m3agent.store.sqlite import search as sqlite_search

    db = store._db
    bad = 0
    for q, k, f in items:
        got = search(store, q, k, f)
        all_ids = [int(r[0]) for r in db.execute("SELECT id FROM memories")]
        q_norm = q / np.linalg.norm(q, axis=1, keepdims=True)
        exact = q_norm if hasattr(store, "vector_search_best") else q_norm[0]  # the code before took one vector
        want = sqlite_search._exact_rows(db, all_ids, exact, f, k)
        if [(s.memory.id, round(s.score, 5)) for s in got] != [(s.memory.id, round(s.score, 5)) for s in want]:
            bad += 1
    return bad


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=30, help="questions of each kind")
    parser.add_argument("--label", default="after")
    parser.add_argument("--check", action="store_true", help="compare every result with an exact search")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"commit": commit(), "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "load_start": os.getloadavg()[0], "command": " ".join(sys.argv), "sizes": {}}
    workdir = Path(tempfile.mkdtemp(prefix="m3agent-vector-scale-"))
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            path = fresh_copy(n, workdir)
            calls = record_calls(path, query_set(n, args.queries))
            entry = replay(path, calls, args.check)
            entry["load_end"] = os.getloadavg()[0]
            result["sizes"][str(n)] = entry
            print(json.dumps({n: entry}), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    runs = json.loads(SCORES.read_text()) if SCORES.exists() else {}
    runs[args.label] = result
    SCORES.write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
