"""Server load benchmark: concurrent clients searching and asking a memory of 10^5 memories over loopback,
then the same searches while an ingest job runs in the server.

It builds (once, kept with ``--memory``) a real SQLite memory of N synthetic memories (short sentences
about 3 people per video, 20 memories per 30 s clip, embedded with the hashing embedder, so no model is
needed), starts ``m3agent serve`` on it as a separate process (as a user would), and drives it with
``--clients`` concurrent httpx clients for ``--seconds``: 80 % ``POST /api/search`` (k=10), 20 %
``POST /api/ask`` (select mode, no LLM). Phase 2 submits an ingest job of a real shared video and keeps
searching until the job is done. p50/p95 latency, throughput and errors go to ``docs/benchmarks.md``
(section "Server").

Usage: ``nice .venv/bin/python bench/serve_load.py [--memories 100000] [--clients 8] [--seconds 30]``
(the client runs on the same 2 cores as the server: figures include that contention).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
SECTION = "Server"
PER_CLIP = 20
CLIPS_PER_VIDEO = 250
NAMES = ["chef", "doctor", "pilot", "teacher", "farmer", "singer", "lawyer", "painter"]
VERBS = ["cooks", "reads", "repairs", "paints", "discusses", "carries", "sells", "buys", "cleans", "opens"]
THINGS = ["soup", "bicycle", "letter", "garden", "piano", "car", "window", "book", "cake", "boat", "map", "phone"]
PLACES = ["kitchen", "park", "office", "market", "station", "beach", "school", "library", "bridge", "harbour"]
QUERIES = ["who cooks soup in the kitchen", "repairs the bicycle at the station", "the piano in the library",
           "sells a cake at the market", "opens the window of the office", "boat near the harbour",
           "what did the doctor read", "who paints the bridge"]


def sentence(rng: random.Random, who: int) -> str:
    from m3agent import tags

    return (f"{tags.face(who)} the {rng.choice(NAMES)} {rng.choice(VERBS)} the {rng.choice(THINGS)} "
            f"in the {rng.choice(PLACES)} with a {rng.choice(THINGS)}")


def build_memory(path: Path, n: int) -> float:
    """Write ``n`` memories clip by clip; returns the seconds it took."""
    from m3agent.domain import Clip, EntityKind, Memory, MemoryKind, Video
    from m3agent.embed.hashing import HashingEmbedder
    from m3agent.store import open_store

    embedder, rng, started = HashingEmbedder(256), random.Random(0), time.perf_counter()
    store = open_store(str(path))
    store.set_embedding_model(embedder.name, embedder.dim)
    face = np.eye(256, dtype=np.float32)[0]  # as the default face_embedder (dlib+sface: 128 + 128 values)
    with store:
        for start in range(0, n, PER_CLIP):
            video, index = divmod(start // PER_CLIP, CLIPS_PER_VIDEO)
            video_id = f"video{video:03d}"
            if index == 0:
                store.add_video(Video(video_id, f"/synthetic/{video_id}.mp4", CLIPS_PER_VIDEO * 30.0))
            clip = Clip(video_id, index, index * 30.0, index * 30.0 + 30.0)
            with store.clip(clip) as writer:
                if index == 0:
                    for _ in range(3):
                        writer.add_entity(EntityKind.FACE, [face])
                first = video * 3 + 1
                texts = [sentence(rng, first + j % 3) for j in range(min(PER_CLIP, n - start))]
                vectors = embedder.embed(texts)
                for j, text in enumerate(texts):
                    kind = MemoryKind.SEMANTIC if j % 4 == 0 else MemoryKind.EPISODIC
                    writer.add_memory(Memory(kind, text, video_id, index, clip.start_s + j, clip.start_s + j + 1,
                                             (first + j % 3,), embedding=vectors[j]))
            if start % 10000 == 0:
                print(f"  built {start:,} / {n:,}", file=sys.stderr)
    return time.perf_counter() - started


class Server:
    """``m3agent serve`` in a child process, on a free loopback port."""

    def __init__(self, memory: Path, allow: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
        env.update(M3AGENT_EMBEDDER="hash", M3AGENT_LLM="none", PYTHONPATH=str(REPO / "src"))
        binary = Path(sys.executable).with_name("m3agent")
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([str(binary), "serve", "--memory", str(memory), "--port", str(port),
                                      "--allow-folder", str(allow), "--log-level", "warning"], env=env)

    def wait_ready(self, timeout: float = 600) -> float:
        started = time.perf_counter()
        while time.perf_counter() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError("the server exited")
            try:
                if httpx.get(f"{self.url}/ready", timeout=5).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("the server did not become ready")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


async def drive(url: str, clients: int, seconds: float, ask_share: float, until: Any = None) -> dict[str, Any]:
    """``clients`` loops of search/ask requests for ``seconds`` (or while ``until()`` is False)."""
    latencies: dict[str, list[float]] = {"search": [], "ask": []}
    errors: dict[str, int] = {"search": 0, "ask": 0}
    deadline = time.perf_counter() + seconds

    async def client(seed: int) -> None:
        rng = random.Random(seed)
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            while time.perf_counter() < deadline and not (until and await until(http)):
                op = "ask" if rng.random() < ask_share else "search"
                query = rng.choice(QUERIES)
                body = {"question": query} if op == "ask" else {"query": query, "k": 10}
                begin = time.perf_counter()
                try:
                    response = await http.post(f"/api/{op}", json=body)
                    ok = response.status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies[op].append(time.perf_counter() - begin)
                errors[op] += 0 if ok else 1

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    wall = time.perf_counter() - started
    return {op: summary(latencies[op], errors[op], wall) for op in latencies}


def summary(seconds: list[float], errors: int, wall: float) -> dict[str, Any]:
    ms = np.array(seconds) * 1000 if seconds else np.zeros(1)
    return {"requests": len(seconds), "errors": errors, "p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p95_ms": round(float(np.percentile(ms, 95)), 1), "max_ms": round(float(ms.max()), 1),
            "per_s": round(len(seconds) / wall, 1)}


async def drop_streams(url: str, n: int) -> int:
    """Open ``n`` answer streams at once and hang up on each after its first event (a client gone mid-answer);
    returns how many gave an event before the hang-up."""
    async def one(http: httpx.AsyncClient, i: int) -> bool:
        try:
            async with http.stream("POST", "/api/ask/stream", json={"question": QUERIES[i % len(QUERIES)]}) as r:
                async for _ in r.aiter_bytes():
                    return True
        except httpx.HTTPError:
            return False
        return False

    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        return sum(await asyncio.gather(*(one(http, i) for i in range(n))))


async def with_dropped_streams(url: str, clients: int, seconds: float, drops: int) -> dict[str, Any]:
    """The steady load, with ``drops`` answer streams opened and dropped half-way through; then every listing
    must still answer (the stall this guards against: a dropped stream holding a store or the model lock)."""
    load = asyncio.create_task(drive(url, clients, seconds, 0.2))
    await asyncio.sleep(seconds / 2)
    dropped = await drop_streams(url, drops)
    result = await load
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        begin = time.perf_counter()
        after = (await http.get("/api/videos")).status_code
        after_ms = round((time.perf_counter() - begin) * 1000, 1)
    return {**result, "drops": drops, "dropped_with_an_event": dropped, "after_status": after, "after_ms": after_ms}


async def during_ingest(url: str, video: Path, clients: int) -> dict[str, Any]:
    """Search (only) while the server ingests ``video``; returns the latencies and the job."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        body = {"path": str(video), "video_id": f"live-ingest-{int(time.time())}"}  # new id: a real ingest
        job = (await http.post("/api/jobs", json=body)).json()
    state: dict[str, Any] = {"job": job, "checked": 0.0}

    async def finished(http: httpx.AsyncClient) -> bool:
        if time.perf_counter() - state["checked"] > 1.0:
            state["checked"] = time.perf_counter()
            state["job"] = (await http.get(f"/api/jobs/{job['id']}")).json()
        return state["job"]["state"] not in ("queued", "running")

    started = time.perf_counter()
    result = await drive(url, clients, 900, 0.0, until=finished)
    return {"search": result["search"], "job": state["job"], "job_wall_s": round(time.perf_counter() - started, 1)}


def render(results: dict[str, Any], command: str) -> str:
    r = results
    lines = [
        f"Machine: {r['cpu']}, {r['cores']} cores. Date: {r['date']}. Command: `{command}`.",
        f"Load while measuring (1-min load average at start): {r['load']:.2f} (other engineers share the cores; "
        "the load generator runs on the same cores as the server).",
        "",
        f"Memory: {r['memories']:,} synthetic memories in {r['videos']} videos (hashing embedder, 256-d), "
        f"built in {r['build_s']:.0f} s{' (reused)' if not r['build_s'] else ''}; server ready after "
        f"{r['ready_s']:.1f} s (start-up brings the vector snapshot up to date and builds the character index; "
        f"the first start on a new memory builds the snapshot); first search {r['first_s'] * 1000:.0f} ms.",
        "",
        "| phase | clients | request | requests | errors | p50 ms | p95 ms | req/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for op, s in r["single"].items():
        lines.append(f"| one client, {r['seconds'] / 2:.0f} s | 1 | {op} | {s['requests']} | {s['errors']} | "
                     f"{s['p50_ms']} | {s['p95_ms']} | {s['per_s']} |")
    for op, s in r["steady"].items():
        lines.append(f"| steady, {r['seconds']:.0f} s | {r['clients']} | {op} | {s['requests']} | {s['errors']} | "
                     f"{s['p50_ms']} | {s['p95_ms']} | {s['per_s']} |")
    drop = r["dropped"]
    for op in ("search", "ask"):
        s = drop[op]
        lines.append(f"| steady, {drop['drops']} answer streams dropped half-way | {r['clients']} | {op} | "
                     f"{s['requests']} | {s['errors']} | {s['p50_ms']} | {s['p95_ms']} | {s['per_s']} |")
    ingest = r["ingest"]
    s = ingest["search"]
    lines.append(f"| during ingest job | {r['clients']} | search | {s['requests']} | {s['errors']} | {s['p50_ms']} | "
                 f"{s['p95_ms']} | {s['per_s']} |")
    job = ingest["job"]
    lines += [
        "",
        f"Ingest job during phase 2: `{r['video']}` ({job['state']}, {job['clips_done']} clips, "
        f"{job['memories_written']} memories, RTF {job['rtf']}, {ingest['job_wall_s']} s wall including model "
        "loading); searches kept answering throughout (errors above).",
        f"Dropped streams: {drop['drops']} `POST /api/ask/stream` opened at once half-way through a steady "
        f"phase, each closed after its first event ({drop['dropped_with_an_event']} gave one); the slowest "
        f"request of that phase took {max(drop['search']['max_ms'], drop['ask']['max_ms'])} ms, and "
        f"`GET /api/videos` right after answered {drop['after_status']} in {drop['after_ms']} ms.",
        "`search` is `POST /api/search` (hybrid vector + BM25, k=10; the character index is cached until the "
        "memory changes; the synthetic text has a vocabulary of about 50 words, so BM25 posting lists are long); "
        "`ask` is "
        "`POST /api/ask` in select mode without an LLM (seed search + rerank + evidence). 3 s of warm-up "
        "requests precede the steady phase. During the ingest job every committed clip changes the memory, so "
        "the cached character index is rebuilt after each clip.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--memory", type=Path, default=None, help="keep/reuse the built memory here")
    parser.add_argument("--video", type=Path,
                        default=REPO.parent / "shared" / "media" / "video" / "iianet_debate_trump_clinton.mp4")
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--drops", type=int, default=50, help="answer streams dropped in the middle of a phase")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="m3agent-serve-load-"))
    memory = args.memory or workdir / "memory.db"
    build_s = 0.0
    if not memory.exists():
        build_s = build_memory(memory, args.memories)
    load = os.getloadavg()[0]
    server = Server(memory, args.video.parent, args.port)
    try:
        ready_s = server.wait_ready()
        first = time.perf_counter()
        httpx.post(f"{server.url}/api/search", json={"query": QUERIES[0], "k": 10}, timeout=600)
        first_s = time.perf_counter() - first
        asyncio.run(drive(server.url, args.clients, 3.0, 0.2))  # warm-up, not counted
        single = asyncio.run(drive(server.url, 1, args.seconds / 2, 0.2))
        steady = asyncio.run(drive(server.url, args.clients, args.seconds, 0.2))
        dropped = asyncio.run(with_dropped_streams(server.url, args.clients, args.seconds, args.drops))
        ingest = asyncio.run(during_ingest(server.url, args.video, args.clients))
    finally:
        server.stop()
        if args.memory is None:
            shutil.rmtree(workdir, ignore_errors=True)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    results = {"cpu": cpu, "cores": os.cpu_count(), "date": dt.date.today().isoformat(), "load": load,
               "memories": args.memories, "videos": -(-args.memories // (PER_CLIP * CLIPS_PER_VIDEO)),
               "build_s": build_s,
               "ready_s": ready_s, "first_s": first_s, "clients": args.clients, "seconds": args.seconds,
               "single": single, "steady": steady, "dropped": dropped, "ingest": ingest, "video": args.video.name}
    command = "nice .venv/bin/python bench/serve_load.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(results, command.strip())
    print(text)
    if not args.no_write:
        from m3agent.bench.results_io import replace_section

        replace_section(REPO / "docs" / "benchmarks.md", SECTION, text)
    clean = all(s["errors"] == 0 for phase in (steady, dropped) for s in phase.values() if isinstance(s, dict))
    return 0 if clean and dropped["after_status"] == 200 and ingest["search"]["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
