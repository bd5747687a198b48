"""Search at scale on realistic memories: latency through the Python API and the server, 10^2..10^6 memories.

For each size N it builds (once, cached under ``~/.cache/m3agent/bench``) a SQLite memory of N memories
from real text (:mod:`search_corpus`: LoCoMo turns, captions and facts, ASR transcripts; 4 named people
per video; MiniLM vectors), copies it (so every run starts without a vector snapshot, as a new memory
does) and measures, with real questions (LoCoMo, M3-Bench) embedded by the default MiniLM:

* the Python API (``m3agent.open(path).search``: the hybrid vector + BM25 search the agent's
  ``search_memory`` tool runs): the first call (cold) and p50/p95 over the queries of each kind:
  ``plain`` (the question over the whole memory), ``character`` (the question about a named person:
  the searcher restricts it to that character's memories), ``video`` (the question within one video up
  to a random clip, as an answer about a video searches);
* the server (``m3agent serve`` as a child process, ``POST /api/search``): seconds from start to the
  first answered search, p50/p95 with one client per kind, and throughput with ``--clients`` clients.

Run once per code version with ``--label`` (``PYTHONPATH`` picks the code: ``/work/main/src`` for the code
before); results go to ``bench/scores/search_scale.json``; ``--write`` renders the section "Search at
scale" of ``docs/benchmarks.md`` and the plot ``docs/search_scaling.png`` from every label recorded.

Usage: ``nice .venv/bin/python bench/search_scale.py --sizes 100,1000,10000,100000 --label after [--write]``
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_corpus as sc

REPO = Path(__file__).resolve().parents[1]
SCORES = REPO / "bench" / "scores" / "search_scale.json"
SECTION = "Search at scale"
KINDS = ("plain", "character", "video")


def store_for(n: int) -> Path:
    """The pristine corpus store of ``n`` memories (built on first use)."""
    path = sc.cache_dir() / f"search-{n}.db"
    if not path.exists():
        corpus = sc.Corpus(sc.load_sources())
        partial = path.with_suffix(".partial.db")
        for stale in partial.parent.glob(partial.name + "*"):
            stale.unlink()
        info = sc.build_store(partial, n, corpus)
        partial.rename(path)
        path.with_suffix(".json").write_text(json.dumps(info))
    return path


def fresh_copy(n: int, workdir: Path) -> Path:
    """A copy of the pristine store, opened once for writing: the code measured applies its migrations (a
    read-only open refuses a file that needs one, as the API's and the server's read stores are)."""
    from m3agent.store import open_store

    target = workdir / f"run-{n}.db"
    for stale in workdir.glob(target.name + "*"):
        stale.unlink()
    shutil.copyfile(store_for(n), target)
    open_store(str(target)).close()
    return target


def query_set(n: int, count: int) -> dict[str, list[sc.Query]]:
    """``count`` queries of each kind for a store of ``n`` memories."""
    sources = sc.load_sources()
    videos = max(1, -(-n // (sc.PER_CLIP * sc.CLIPS_PER_VIDEO)))
    clips = min(sc.CLIPS_PER_VIDEO, -(-n // sc.PER_CLIP))
    rng = random.Random(11)
    plain = sc.queries(sources, videos, count, character=False)
    scoped = [sc.Query(q.text, f"video{rng.randrange(videos):04d}", rng.randrange(clips)) for q in
              sc.queries(sources, videos, count, character=False, seed=9)]
    return {"plain": plain, "character": sc.queries(sources, videos, count, character=True), "video": scoped}


def record_store_calls(path: Path, queries: dict[str, list[Any]], method: str,
                       keep: Callable[[Any], Any] = lambda q: q) -> dict[str, list[tuple[Any, int, Any]]]:
    """The calls of ``SQLiteStore.<method>`` (query, k, filter) each kind's API searches make, the query kept as
    ``keep`` returns it (a copy of a vector the caller may reuse)."""
    import m3agent
    from m3agent.store.sqlite.store import SQLiteStore

    calls: dict[str, list[tuple[Any, int, Any]]] = {kind: [] for kind in KINDS}
    original = getattr(SQLiteStore, method)
    current: list[tuple[Any, int, Any]] = []

    def spy(self: SQLiteStore, query: Any, k: int, flt: Any = None) -> Any:
        current.append((keep(query), k, flt))
        return original(self, query, k, flt)

    setattr(SQLiteStore, method, spy)
    try:
        with m3agent.open(path, llm="none") as agent:
            for kind, items in queries.items():
                current.clear()
                for q in items:
                    agent.search(q.text, 10, video_id=q.video_id, before_clip=q.before_clip)
                calls[kind] = list(current)
    finally:
        setattr(SQLiteStore, method, original)
    return calls


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000.0
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1)}


# the Python API -------------------------------------------------------------------------------------
def measure_api(path: Path, queries: dict[str, list[sc.Query]]) -> dict[str, Any]:
    """The first search on the memory as built (no vector snapshot yet), the snapshot's build (as ``m3agent
    serve`` starts it), then each kind's queries on a warm agent."""
    import m3agent
    from m3agent.store import open_store

    first = queries["plain"][0]
    with m3agent.open(path, llm="none") as agent:
        begin = time.perf_counter()
        agent.search(first.text, 10)
        out: dict[str, Any] = {"cold_s": round(time.perf_counter() - begin, 2)}
    begin = time.perf_counter()
    with open_store(str(path)) as store:
        store.build_vector_index()  # type: ignore[attr-defined]
    out["snapshot_s"] = round(time.perf_counter() - begin, 1)
    with m3agent.open(path, llm="none") as agent:
        agent.search(first.text, 10)
        keywords = getattr(agent._store(), "_keywords", None)  # code with the in-process keyword index
        if keywords is not None:
            begin = time.perf_counter()
            keywords.wait()  # the first search started its build (FTS5 answers meanwhile): measure it built
            out["keyword_index_s"] = round(time.perf_counter() - begin, 1)
        for kind, items in queries.items():
            seconds, cpu = [], []
            for q in items:
                begin, begin_cpu = time.perf_counter(), time.process_time()
                agent.search(q.text, 10, video_id=q.video_id, before_clip=q.before_clip)
                seconds.append(time.perf_counter() - begin)
                cpu.append(time.process_time() - begin_cpu)
            out[kind] = {**percentiles(seconds), "cpu_p50_ms": round(float(np.median(cpu)) * 1000, 1)}
    return out


# the server -----------------------------------------------------------------------------------------
class Server:
    """``m3agent serve`` in a child process on a free loopback port (``extra`` = more CLI arguments)."""

    def __init__(self, memory: Path, workers: int = 0) -> None:
        import m3agent

        env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
        env.update(M3AGENT_LLM="none", PYTHONPATH=str(Path(m3agent.__file__).resolve().parents[1]))
        if workers:
            env["M3AGENT_SERVER__SEARCH_WORKERS"] = str(workers)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.started = time.perf_counter()
        binary = Path(sys.executable).with_name("m3agent")
        self.proc = subprocess.Popen([str(binary), "serve", "--memory", str(memory), "--port", str(port),
                                      "--log-level", "warning"], env=env)

    def first_answer(self, query: str, timeout: float = 1800) -> float:
        """Seconds from start until a search is answered (200)."""
        import httpx

        while time.perf_counter() - self.started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError("the server exited")
            try:
                if httpx.post(f"{self.url}/api/search", json={"query": query, "k": 10}, timeout=5).status_code == 200:
                    return time.perf_counter() - self.started
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the server did not answer")

    def workers_up(self, timeout: float = 1800) -> float:
        """Seconds from start until ``/ready`` reports the search workers (0 when it never does: older code)."""
        import httpx

        while time.perf_counter() - self.started < timeout:
            ready = httpx.get(f"{self.url}/ready", timeout=30).json()
            if "search_workers" not in ready:
                return 0.0
            if ready["search_workers"]:
                return time.perf_counter() - self.started
            time.sleep(1)
        raise RuntimeError("the search workers did not start")

    def warm(self, timeout: float = 1800) -> float | None:
        """Seconds from start until ``/ready`` lists no search index still being built (None: older code, which
        does not say)."""
        import httpx

        while time.perf_counter() - self.started < timeout:
            ready = httpx.get(f"{self.url}/ready", timeout=30).json()
            if "indexes_building" not in ready:
                return None
            if not ready["indexes_building"]:
                return time.perf_counter() - self.started
            time.sleep(0.5)
        raise RuntimeError("the search indexes were not built")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _body(q: sc.Query) -> dict[str, Any]:
    body: dict[str, Any] = {"query": q.text, "k": 10}
    if q.video_id is not None:
        body.update(video_id=q.video_id, before_clip=q.before_clip)
    return body


def _cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid`` and its children (the search workers); 0 without psutil."""
    try:
        import psutil
    except ImportError:
        return 0.0
    parent = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [parent, *parent.children(recursive=True)])


async def _drive(url: str, items: list[sc.Query], clients: int, seconds: float | None) -> dict[str, Any]:
    """``clients`` loops over ``items``: once through (``seconds`` None) or for ``seconds``."""
    import httpx

    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + (seconds or 1e9)
    position = iter(range(10**9))

    async def client() -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            while time.perf_counter() < deadline:
                i = next(position)
                if seconds is None and i >= len(items):
                    return
                begin = time.perf_counter()
                try:
                    ok = (await http.post("/api/search", json=_body(items[i % len(items)]))).status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - begin)
                errors += 0 if ok else 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    return {**percentiles(latencies), "requests": len(latencies), "errors": errors,
            "req_per_s": round(len(latencies) / wall, 1)}


def _timed_load(server: Server, mixed: list[sc.Query], clients: int, seconds: float) -> dict[str, Any]:
    """The clients' figures and the server's CPU per request (its processes' CPU seconds over the phase)."""
    cpu = _cpu_seconds(server.proc.pid)
    found = asyncio.run(_drive(server.url, mixed, clients, seconds))
    used = _cpu_seconds(server.proc.pid) - cpu
    return {**found, "server_cpu_ms_per_request": round(1000 * used / max(found["requests"], 1), 1)}


def measure_server(path: Path, queries: dict[str, list[sc.Query]], clients: int, seconds: float,
                   workers: int) -> dict[str, Any]:
    """First answer, one client per kind, then ``clients`` clients; with ``workers`` search workers also the
    clients again once they run (``/ready`` says so)."""
    server = Server(path, workers)
    mixed = [q for trio in zip(*queries.values(), strict=True) for q in trio]
    try:
        out: dict[str, Any] = {"first_answer_s": round(server.first_answer(queries["plain"][0].text), 1)}
        if (warm := server.warm()) is not None:  # timed phases at full speed: the background builds are done
            out["warm_s"] = round(warm, 1)
        for kind, items in queries.items():
            out[kind] = asyncio.run(_drive(server.url, items, 1, None))
        asyncio.run(_drive(server.url, mixed, clients, 3.0))  # warm-up
        out["clients"] = {"clients": clients, **_timed_load(server, mixed, clients, seconds)}
        if workers and (up := server.workers_up()):
            asyncio.run(_drive(server.url, mixed, clients, 3.0))
            out["workers"] = {"clients": clients, "workers": workers, "up_s": round(up, 1),
                              **_timed_load(server, mixed, clients, seconds)}
    finally:
        server.stop()
    return out


# reporting ------------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    return {"cpu": cpu, "cores": os.cpu_count(), "load_start": os.getloadavg()[0]}


def commit() -> str:
    import m3agent

    src = Path(m3agent.__file__).resolve().parents[2]
    found = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "src"], capture_output=True, text=True)
    return found.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from m3agent.store import open_store

    workdir = Path(tempfile.mkdtemp(prefix="m3agent-search-scale-"))
    result: dict[str, Any] = {"machine": machine(), "commit": commit(), "date": dt.datetime.now(dt.UTC)
                              .strftime("%Y-%m-%d %H:%M UTC"), "command": " ".join(sys.argv), "sizes": {}}
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            queries = query_set(n, args.queries)
            entry: dict[str, Any] = {"store": json.loads(store_for(n).with_suffix(".json").read_text())}
            if not args.no_api:
                entry["api"] = measure_api(fresh_copy(n, workdir), queries)
                print(json.dumps({n: entry}), file=sys.stderr, flush=True)
            if not args.no_server:
                served = fresh_copy(n, workdir)
                if args.saved_index:
                    with open_store(str(served)) as store:
                        store.build_vector_index()  # type: ignore[attr-defined]
                    entry["saved_index"] = True
                entry["server"] = measure_server(served, queries, args.clients, args.seconds, args.search_workers)
            entry["load_end"] = os.getloadavg()[0]
            result["sizes"][str(n)] = entry
            print(json.dumps({n: entry}), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def record(label: str, result: dict[str, Any]) -> dict[str, Any]:
    runs = json.loads(SCORES.read_text()) if SCORES.exists() else {}
    known = runs.setdefault(label, {"sizes": {}})
    known.update({k: v for k, v in result.items() if k != "sizes"})
    known["sizes"].update(result["sizes"])
    SCORES.write_text(json.dumps(runs, indent=1) + "\n")
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--queries", type=int, default=60, help="queries of each kind")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0, help="the many-clients phase")
    parser.add_argument("--label", default="after", help="the code version measured (before/after)")
    parser.add_argument("--search-workers", type=int, default=0, help="server.search_workers of the server")
    parser.add_argument("--no-api", action="store_true")
    parser.add_argument("--no-server", action="store_true")
    parser.add_argument("--saved-index", action="store_true",
                        help="save the vector index before the server starts (a restart on a memory it has served: "
                             "no graph is built in the background during the phases)")
    parser.add_argument("--write", action="store_true", help="render docs/benchmarks.md and the plot")
    args = parser.parse_args(argv)
    runs = record(args.label, run(args)) if args.sizes else json.loads(SCORES.read_text())
    if args.write:
        from search_report import write

        write(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
