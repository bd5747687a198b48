"""A served memory keeps every acknowledged write while other processes write beside the server.

The failure this guards against: a process that opened and closed the database file with plain file calls while
it held SQLite connections lost its POSIX locks (closing any descriptor of a file drops them all), so a CLI
command beside ``m3agent serve`` believed itself the file's last user, checkpointed and unlinked the WAL under the
server, and the server's next writes went to a deleted file ("disk I/O error", then "database disk image is
malformed"). Here a real ``m3agent serve`` process takes API writes between CLI writes (rename, delete, ingest),
writes of a second Python process through the store API and plain ``sqlite3`` writes; every write that was
acknowledged must be in the file and ``PRAGMA integrity_check`` must say ok. The same runs on PostgreSQL, whose
own server arbitrates its writers (the plain write there goes through psycopg).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from m3agent.media.snippets import wav_bytes
from server_helpers import build_memory

BIN = Path(sys.executable).with_name("m3agent")
ROUNDS = int(os.environ.get("M3AGENT_SECOND_WRITER_ROUNDS", "2"))  # the bar, 20: bench/server_safety.py


def env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
    return keep | {"M3AGENT_LLM": "none", "M3AGENT_EMBEDDER": "hash"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(db: str, log: Path) -> Iterator[httpx.Client]:
    """``m3agent serve`` on ``db`` in its own process, until the block ends."""
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN), "serve", "--memory", db, "--port", str(port), "--log-level",
                                 "warning"], stdout=out, stderr=subprocess.STDOUT, env=env())
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
            yield client
    finally:
        proc.terminate()
        proc.wait(60)


QUIET = {"M3AGENT_PERCEPTION__VOICES": "false", "M3AGENT_PERCEPTION__FACES": "false"}  # an ingest of seconds


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300, env=env() | QUIET)


SIDE_WRITER = """
import sys
from m3agent.store import open_store
db, entity, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(rounds):
    with open_store(db) as store:  # a new connection each round, as every CLI command opens one
        store.rename_entity(entity, f"side {i}")
print("ok")
"""


def raw_write(db: str, key: str, value: str) -> None:
    """A write below m3agent: plain ``sqlite3``, or psycopg on PostgreSQL."""
    if db.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES (%s, %s)", (key, value))
        return
    with sqlite3.connect(db, timeout=30) as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))


def raw_read(db: str, query: str) -> list[tuple[Any, ...]]:
    if db.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db) as conn:
            return [tuple(r) for r in conn.execute(query.replace("?", "%s")).fetchall()]
    with sqlite3.connect(db) as conn:
        return [tuple(r) for r in conn.execute(query).fetchall()]


def test_cli_and_other_processes_beside_serve_lose_nothing(store_url: Any, tmp_path: Path) -> None:
    db = store_url("memory")
    built = build_memory(db)
    media = tmp_path / "media"
    media.mkdir()
    tone = np.sin(2 * np.pi * 220 * np.arange(8000 * 4) / 8000).astype(np.float32) * 0.2
    expected_meta: dict[str, str] = {}
    with serving(db, tmp_path / "serve.log") as client:
        for i in range(ROUNDS):
            for who, name in ((built.face, f"api face {i}"), (built.voice, f"api voice {i}")):
                answer = client.patch(f"/api/entities/{who}", json={"name": name})
                assert answer.status_code == 200, answer.text
            done = cli("rename", str(built.face), f"cli face {i}", "--memory", db)
            assert done.returncode == 0, done.stderr
            side = subprocess.run([sys.executable, "-c", SIDE_WRITER, db, str(built.stranger), "5"],
                                  capture_output=True, text=True, timeout=300, env=env())
            assert side.returncode == 0, side.stderr
            raw_write(db, f"test-{i}", str(i))  # a plain writer too
            expected_meta[f"test-{i}"] = str(i)
            answer = client.patch(f"/api/entities/{built.voice}", json={"name": f"api voice again {i}"})
            assert answer.status_code == 200, answer.text
            (media / f"tone{i}.wav").write_bytes(wav_bytes(tone, 8000))
            done = cli("ingest", str(media / f"tone{i}.wav"), "--memory", db, "--perception-only")
            assert done.returncode == 0, done.stderr
        doomed = built.memories[0]
        done = cli("delete", "memory", str(doomed), "--memory", db, "--yes")
        assert done.returncode == 0, done.stderr
        assert client.post("/api/forget", json={"memory": built.memories[1]}).status_code == 200
        names = {who: client.get(f"/api/entities/{who}").json()["name"]
                 for who in (built.face, built.voice, built.stranger)}
        videos = {v["video_id"] for v in client.get("/api/videos").json()["items"]}
    last = ROUNDS - 1
    assert names == {built.face: f"cli face {last}", built.voice: f"api voice again {last}",
                     built.stranger: "side 4"}
    assert {f"tone{i}" for i in range(ROUNDS)} <= videos
    if not db.startswith("postgresql"):
        assert raw_read(db, "PRAGMA integrity_check") == [("ok",)]
    meta = dict(raw_read(db, "SELECT key, value FROM meta WHERE key LIKE 'test-%'"))
    gone = raw_read(db, f"SELECT count(*) FROM memories WHERE id IN ({built.memories[0]}, {built.memories[1]})")[0][0]
    assert meta == expected_meta
    assert gone == 0
    log = (tmp_path / "serve.log").read_text()
    assert "disk I/O error" not in log and "malformed" not in log, log
