"""Nothing lost beside a served memory, and a server that starts: the bars of the "Nothing lost" issue.

1. Second writer: `tests/test_store_second_writer.py` run with `--rounds` rounds. Each round, beside a real
   `m3agent serve` process: API renames, a CLI rename, a second Python process renaming through the store API
   five times, a plain `sqlite3` write, another API rename and a CLI ingest; then a CLI delete and an API
   forget. Every acknowledged write must be in the file, `PRAGMA integrity_check` ok (the test's asserts).
2. Starts under load: `--starts` starts of `m3agent serve` on a small memory (three videos of memories) while
   `--load` processes keep every core busy; a start counts when `/health` answers within 120 s and the process
   is still alive.

Writes the "Server safety" section of docs/benchmarks.md.

    .venv/bin/python bench/server_safety.py [--rounds 20] [--starts 20] [--load 2] [--no-write]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).with_name("m3agent")


def second_writer(rounds: int) -> dict[str, Any]:
    """The second-writer test with ``rounds`` rounds: passed or not, and its seconds."""
    started = time.perf_counter()
    env = os.environ | {"M3AGENT_SECOND_WRITER_ROUNDS": str(rounds)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_store_second_writer.py"], cwd=REPO, env=env, capture_output=True, text=True)
    print(done.stdout[-2000:], flush=True)
    return {"rounds": rounds, "passed": done.returncode == 0, "seconds": round(time.perf_counter() - started, 1)}


def _burn() -> None:
    while True:
        pass


def small_memory(path: Path) -> None:
    """Three videos of ten memories each, embedded with the hashing embedder."""
    from m3agent.domain import Clip, Memory, MemoryKind, Video
    from m3agent.embed.hashing import HashingEmbedder
    from m3agent.store import open_store

    embedder = HashingEmbedder(256)
    with open_store(str(path)) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        for v in range(3):
            store.add_video(Video(f"v{v}", f"/nowhere/v{v}.mp4", 30.0))
            with store.clip(Clip(f"v{v}", 0, 0.0, 30.0)) as writer:
                for i in range(10):
                    text = f"someone in video {v} does thing number {i}"
                    writer.add_memory(Memory(MemoryKind.EPISODIC, text, f"v{v}", 0, i, i + 1, (),
                                             embedding=embedder.embed([text])[0]))


def one_start(memory: Path, log: Path) -> tuple[bool, float]:
    """Start `m3agent serve`, wait for /health, stop it: (started, seconds to /health)."""
    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")} | {
        "M3AGENT_LLM": "none", "M3AGENT_EMBEDDER": "hash"}
    started = time.perf_counter()
    with log.open("a") as out:
        proc = subprocess.Popen([str(BIN), "serve", "--memory", str(memory), "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    try:
        while time.perf_counter() - started < 120 and proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    return True, round(time.perf_counter() - started, 2)
            except httpx.TransportError:
                time.sleep(0.2)
        return False, round(time.perf_counter() - started, 2)
    finally:
        proc.terminate()
        proc.wait(60)


def starts_under_load(starts: int, load: int) -> dict[str, Any]:
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(load)]
    for burner in burners:
        burner.start()
    try:
        with tempfile.TemporaryDirectory(prefix="m3agent-starts-") as tmp:
            memory, log = Path(tmp) / "memory.db", Path(tmp) / "serve.log"
            small_memory(memory)
            results = [one_start(memory, log) for _ in range(starts)]
            failures = log.read_text().count("Traceback")
    finally:
        for burner in burners:
            burner.terminate()
    ok = [seconds for started, seconds in results if started]
    print(f"starts: {len(ok)}/{starts}", flush=True)
    return {"starts": starts, "load": load, "ok": len(ok), "tracebacks": failures,
            "median_s": sorted(ok)[len(ok) // 2] if ok else None, "max_s": max(ok) if ok else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the starts")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    from m3agent.bench.environment import environment

    load_average = round(os.getloadavg()[0], 2)
    writer = second_writer(args.rounds)
    starts = starts_under_load(args.starts, args.load)
    if not args.no_write:
        command = "python bench/server_safety.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(environment(), command, load_average, writer, starts)
    return 0 if writer["passed"] and starts["ok"] == starts["starts"] else 1


def write_section(env: dict[str, Any], command: str, load_average: float, writer: dict[str, Any],
                  starts: dict[str, Any]) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [
        run_line(env, command, load_average), "",
        "| check | target | result |", "|---|---|---|",
        f"| second writer beside `serve` ({writer['rounds']} rounds of API, CLI, store-API and sqlite3 writes) "
        f"| every acknowledged write kept, integrity ok | {'passed' if writer['passed'] else 'FAILED'} "
        f"({writer['seconds']} s) |",
        f"| `serve` starts with {starts['load']} busy processes beside | {starts['starts']} of {starts['starts']} "
        f"| {starts['ok']} of {starts['starts']} (to /health: median {starts['median_s']} s, max "
        f"{starts['max_s']} s; tracebacks in the log: {starts['tracebacks']}) |",
        "",
        "Before the fix (`store/sqlite_schema.connect` read the file's header with plain file calls at every "
        "connection), the second-writer test failed in its first round: the CLI's ingest found \"database disk "
        "image is malformed\".",
    ]
    replace_section(REPO / "docs" / "benchmarks.md", "Server safety", "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
