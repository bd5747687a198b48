"""Crash-safety harness: run ``m3agent`` in a subprocess, kill it at a chosen point, compare memories.

Kills are real signals. The parent sends one after a delay (``after``), or the
child sends one to itself at an exact point, through a small wrapper around
the CLI: when its n-th SQL statement starts (``stmt``; an sqlite3 trace
callback), when the n-th COMMIT of a write transaction starts (``commit``), or
right after the n-th clip is marked done inside its still-open transaction
(``done``). The exact points reach the short windows a timer rarely hits: in
the middle of a clip's transaction, at its COMMIT, inside a ``delete``. Inside
a trace callback Python swallows a KeyboardInterrupt, so ``stmt`` and
``commit`` kill with SIGKILL only; ``done`` and ``after`` take SIGINT as well
(and run without the callback, so that the interrupt reaches the CLI).

:func:`fingerprint` reduces a memory to what an ingest must reproduce (clips,
memories with their texts, entities, faces, voices, links), with entity ids
replaced by their rank so that a re-ingest after ``delete`` compares equal.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Event = Literal["stmt", "commit", "done", "after"]

_HARNESS = r"""
import json, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even if started ignoring SIGINT
spec, note_path = json.loads(sys.argv[1]), sys.argv[2]
event, target, sig = spec["event"], spec["n"], getattr(signal, spec["signal"])
counts = {"stmt": 0, "commit": 0, "done": 0}
trace = open(note_path + ".trace", "w") if spec.get("record") else None

def hit(kind, where):
    counts[kind] += 1
    if event == kind and counts[kind] == target:
        with open(note_path, "w") as note:
            note.write(where)
        os.kill(os.getpid(), sig)

from m3agent.store.sqlite import schema as sqlite_schema
from m3agent.store.sqlite.store import SQLiteStore

_connect = sqlite_schema._connect_sqlite

def connect(path, readonly):
    conn = _connect(path, readonly)
    def seen(sql):
        where = ("in a transaction: " if conn.in_transaction else "") + sql[:100]
        if trace is not None:
            trace.write(json.dumps([conn.in_transaction, sql[:100]]) + "\n")
        hit("stmt", where)
        if sql == "COMMIT":
            hit("commit", "at COMMIT, statement %d" % counts["stmt"])
    if event in ("stmt", "commit") or trace is not None:  # a KeyboardInterrupt raised inside it is lost
        conn.set_trace_callback(seen)
    return conn

sqlite_schema._connect_sqlite = connect
_set_clip = SQLiteStore._set_clip

def set_clip(self, db, clip, status, reason):
    _set_clip(self, db, clip, status, reason)
    if status == "done":
        hit("done", "clip %d marked done, before its COMMIT" % clip.index)

SQLiteStore._set_clip = set_clip
from m3agent.cli.main import main
sys.argv = ["m3agent", *sys.argv[3:]]
main()
"""


@dataclass(frozen=True, slots=True)
class KillPoint:
    """Where a run is killed: ``event`` number ``n`` (seconds for ``after``), with ``signal``."""

    event: Event
    n: float
    signal: Literal["SIGKILL", "SIGINT"] = "SIGKILL"

    def __post_init__(self) -> None:
        if self.event in ("stmt", "commit") and self.signal != "SIGKILL":
            raise ValueError(f"{self.event} kill points need SIGKILL (a trace callback swallows SIGINT)")

    def __str__(self) -> str:
        unit = "s" if self.event == "after" else ""
        return f"{self.signal} {self.event} {self.n:g}{unit}"


@dataclass(slots=True)
class RunResult:
    """A finished (or killed) CLI run."""

    returncode: int
    killed: bool
    where: str
    stdout: str
    stderr: str
    trace: list[tuple[bool, str]] = field(default_factory=list)


def run_cli(args: list[str], *, kill: KillPoint | None = None, env: dict[str, str] | None = None,
            workdir: Path, record: bool = False, timeout_s: float = 900.0) -> RunResult:
    """Run ``m3agent ARGS`` in a subprocess, killed at ``kill``; ``record`` keeps its SQL statement trace."""
    note = workdir / f"kill-note-{time.monotonic_ns()}.txt"
    spec: dict[str, Any] = {"event": "none", "n": 0, "signal": "SIGKILL", "record": record}
    if kill is not None and kill.event != "after":
        spec.update(event=kill.event, n=int(kill.n), signal=kill.signal)
    command = [sys.executable, "-c", _HARNESS, json.dumps(spec), str(note), *args]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        where = ""
        if kill is not None and kill.event == "after":
            where = _kill_after(proc, kill)
        stdout, stderr = proc.communicate(timeout=timeout_s)
    signalled = proc.returncode in (-signal.SIGKILL, 130, -signal.SIGINT)
    if note.exists():
        where = note.read_text()
        note.unlink()
    trace = _read_trace(note) if record else []
    return RunResult(proc.returncode, signalled and bool(where), where, stdout, stderr, trace)


def _kill_after(proc: subprocess.Popen[str], kill: KillPoint) -> str:
    try:
        proc.wait(timeout=kill.n)
        return ""  # it ended before the kill
    except subprocess.TimeoutExpired:
        proc.send_signal(getattr(signal, kill.signal))
        return f"{kill.signal} after {kill.n:.2f} s"


def _read_trace(note: Path) -> list[tuple[bool, str]]:
    path = Path(str(note) + ".trace")
    if not path.exists():
        return []
    rows = [tuple(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    path.unlink()
    return [(bool(r[0]), str(r[1])) for r in rows]


# -- fingerprints -----------------------------------------------------------------

_TAG = re.compile(r"<(face|voice)_(\d+)>")


def fingerprint(db: Path, video_id: str) -> dict[str, list[Any]]:
    """What an ingest of ``video_id`` must reproduce, with entity ids replaced by their rank."""
    from m3agent.store import open_store

    with open_store(str(db), readonly=True, create=False) as store:
        entities = sorted(store.entities(), key=lambda e: e.id)
        label = {e.id: f"{e.kind.value}#{rank}" for rank, e in enumerate(entities)}

        def canon(text: str) -> str:
            return _TAG.sub(lambda m: f"<{label.get(int(m.group(2)), '?')}>", text)

        def who(entity_id: int | None) -> str:
            return "" if entity_id is None else label.get(entity_id, "?")

        known = any(v.video_id == video_id for v in store.videos())
        return {
            "clips": [[c.index, round(c.start_s, 3), round(c.end_s, 3), s.value, r]
                      for c, s, r in (store.clips(video_id) if known else [])],
            "memories": sorted([m.clip_index, m.kind.value, round(m.start_s, 2), round(m.end_s, 2), canon(m.text),
                                sorted(who(e) for e in m.entity_ids), round(m.weight, 3), m.last_clip_index]
                               for m in store.memories(video_id=video_id)),
            "entities": [[label[e.id], e.name, e.first_clip, e.last_clip, len(store.entity_bank(e.id))]
                         for e in entities],
            "faces": [[f.clip_index, round(f.time_s, 3), [round(v, 1) for v in
                       (f.bbox.x1, f.bbox.y1, f.bbox.x2, f.bbox.y2)], f.track, who(f.entity_id)]
                      for f in (store.faces(video_id) if known else [])],
            "voices": [[v.clip_index, round(v.start_s, 3), round(v.end_s, 3), v.text, who(v.entity_id)]
                       for v in (store.voices(video_id) if known else [])],
            "links": sorted([who(q.face_id), who(q.voice_id), round(q.confidence, 3), str(q.source)]
                           for q in store.links()),
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """A result against the uninterrupted reference."""

    identical: bool
    duplicates: int  # rows (memories, faces, voices) present more often than in the reference
    lost_memories: int  # reference memories missing from the result
    differences: tuple[str, ...]


def compare(reference: dict[str, list[Any]], result: dict[str, list[Any]]) -> Comparison:
    """How ``result`` differs from ``reference`` (both from :func:`fingerprint`)."""
    def counted(rows: list[Any]) -> Counter[str]:
        return Counter(json.dumps(r) for r in rows)

    duplicates = 0
    for part in ("memories", "faces", "voices"):
        want, have = counted(reference[part]), counted(result[part])
        duplicates += sum(max(0, n - max(want[row], 1)) for row, n in have.items())
    lost = sum((counted(reference["memories"]) - counted(result["memories"])).values())
    differences = tuple(f"{part}: reference has {len(reference[part])}, result {len(result[part])}"
                        + _first_difference(reference[part], result[part])
                        for part in reference if reference[part] != result[part])
    return Comparison(not differences, duplicates, lost, differences)


def _first_difference(a: list[Any], b: list[Any]) -> str:
    for x, y in zip(a, b, strict=False):
        if x != y:
            return f"; first difference: {x!r} vs {y!r}"
    return ""


def child_env(**extra: str) -> dict[str, str]:
    """The environment for CLI runs: this one, with m3agent's sources first on the path."""
    import m3agent

    src = str(Path(m3agent.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}
