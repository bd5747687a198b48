"""Keyword search alone at scale: ``store.keyword_search`` over the calls the API's searches make.

For each size N (the stores of :mod:`search_scale`, copied) it runs the bench's questions through
``m3agent.open(path).search`` once, recording every ``keyword_search(query, k, filter)`` the searcher makes
(the questions' keyword text; the character filters and alias variants of ``character``, the video scope of
``video``), then replays them on a fresh read-only store: p50/p95 per kind. With the in-process keyword index
(code that has :mod:`m3agent.store.index.keyword`) it first waits for the index and reports its build time and
size; the FTS5 query is timed on the same calls (``fts5``) for comparison.

Usage: ``PYTHONPATH=src nice .venv/bin/python bench/keyword_scale.py --sizes 10000,100000 --label after``
(``PYTHONPATH`` picks the code measured); results go to ``bench/scores/keyword_scale.json``.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_scale import commit, fresh_copy, percentiles, query_set, record_store_calls

SCORES = Path(__file__).resolve().parent / "scores" / "keyword_scale.json"

def record_calls(path: Path, queries: dict[str, list[Any]]) -> dict[str, list[tuple[str, int, Any]]]:
    """The ``keyword_search`` calls of each kind's API searches."""
    return record_store_calls(path, queries, "keyword_search")


def replay(path: Path, calls: dict[str, list[tuple[str, int, Any]]]) -> dict[str, Any]:
    from m3agent.store import open_store

    out: dict[str, Any] = {}
    with open_store(str(path), readonly=True) as store:
        begin = time.perf_counter()
        store.keyword_search("warm up", 1)
        out["first_call_ms"] = round((time.perf_counter() - begin) * 1000, 1)
        synced = getattr(store, "_synced_keywords", None)
        if synced is not None:
            from m3agent.store.index.keyword import KeywordIndex

            begin = time.perf_counter()
            synced().wait()
            out["wait_build_s"] = round(time.perf_counter() - begin, 2)
            index = synced()
            out["index"] = {"ready": index.ready, "rows": index.n_alive, "terms": len(index.terms),
                            "mb": round(index.nbytes / 1e6, 1), "segments": len(index.segments)}
            fresh = KeywordIndex(store.path)  # type: ignore[attr-defined]
            begin = time.perf_counter()
            fresh.build(store._db)  # type: ignore[attr-defined]
            out["index"]["build_s"] = round(time.perf_counter() - begin, 2)
        for kind, items in calls.items():
            out[kind] = _timed(lambda q, k, f: store.keyword_search(q, k, f), items)
            out[kind]["calls"] = len(items)
        if synced is not None:
            from m3agent.store.sqlite import search as sqlite_search

            db = store._db  # type: ignore[attr-defined]
            for kind, items in calls.items():
                out[f"{kind}_fts5"] = _timed(lambda q, k, f: sqlite_search._ranked_rows(
                    db, sqlite_search._fts_ranking(db, sqlite_search.fts_terms(q), k, f), None), items)
    return out

def _timed(search: Any, items: list[tuple[str, int, Any]]) -> dict[str, float]:
    for q, k, f in items[:5]:
        search(q, k, f)
    seconds = []
    for q, k, f in items:
        begin = time.perf_counter()
        search(q, k, f)
        seconds.append(time.perf_counter() - begin)
    return percentiles(seconds) if seconds else {}

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=30, help="questions of each kind")
    parser.add_argument("--label", default="after")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"commit": commit(), "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "load_start": os.getloadavg()[0], "command": " ".join(sys.argv), "sizes": {}}
    workdir = Path(tempfile.mkdtemp(prefix="m3agent-keyword-scale-"))
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            path = fresh_copy(n, workdir)
            calls = record_calls(path, query_set(n, args.queries))
            entry = replay(fresh_copy(n, workdir), calls)
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
