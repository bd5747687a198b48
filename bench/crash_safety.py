"""Crash-safety benchmark: kill `m3agent ingest` and `delete` at seeded random points, resume, compare.

Input: `video/whitehouse_short_hamilton_clip.mp4` (10 s, 44.1 kHz AAC, faces and speech) cut into five
2 s clips, ASR tiny.en, perception-only writer. One uninterrupted ingest is the reference; a second one
checks that uninterrupted runs agree. Each benchmark run starts from an empty memory, kills the real CLI
with a real signal (see `m3agent.bench.crash`) at a seeded random point, of one of these kinds:

- stmt: SIGKILL as the K-th SQL statement of the run starts (K uniform over a whole ingest);
- commit: SIGKILL as the COMMIT of a random clip's transaction starts;
- done: SIGINT or SIGKILL right after a random clip is marked done, before its COMMIT;
- after: SIGINT or SIGKILL after a random delay;
- chain: two or three of the above, each in the run resumed after the previous kill;
- delete: a finished memory, `delete video` SIGKILLed at a random statement; it must leave the video
  whole or gone; then the delete is finished and the video ingested again;

then reruns `ingest` to completion (it must exit 0) and compares clips, memory texts, entities, faces,
voices and links with the reference (entity ids by rank). Writes the "Crash safety" section of
docs/benchmarks.md.

    .venv/bin/python bench/crash_safety.py [--runs 24] [--seed 14] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VIDEO = SHARED / "media" / "video" / "whitehouse_short_hamilton_clip.mp4"
VIDEO_ID = "whitehouse_short_hamilton_clip"
ENV = {"M3AGENT_PERCEPTION__ASR_MODEL": "tiny.en", "M3AGENT_MEDIA__CLIP_SECONDS": "2"}
KINDS = ("stmt", "commit", "done", "after", "chain", "delete")


@dataclass
class Reference:
    print: dict[str, list[Any]]
    statements: int
    commits: list[int]  # numbers (among COMMITs) of the clip transactions' commits
    seconds: float
    db: Path
    delete_statements: int = 0


@dataclass
class Outcome:
    run: int
    kind: str
    kills: list[str] = field(default_factory=list)
    hit: bool = True
    atomic: bool = True
    resume_rc: int = 0
    identical: bool = False
    duplicates: int = 0
    lost_memories: int = 0
    differences: list[str] = field(default_factory=list)
    seconds: float = 0.0


def ingest(db: Path, work: Path, kill: Any = None, record: bool = False) -> Any:
    from m3agent.bench.crash import child_env, run_cli

    return run_cli(["ingest", str(VIDEO), "-m", str(db), "--json"], kill=kill, env=child_env(**ENV), workdir=work,
                   record=record)


def make_reference(work: Path) -> Reference:
    from m3agent.bench.crash import child_env, fingerprint, run_cli

    db = work / "reference.db"
    started = time.perf_counter()
    run = ingest(db, work, record=True)
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"reference ingest failed: {run.stderr[-2000:]}")
    sql = [s for _, s in run.trace]
    commit_numbers = [n for n, i in enumerate((i for i, s in enumerate(sql) if s == "COMMIT"), 1)
                      if any(s.startswith("INSERT INTO clips") for s in sql[:i][-3:])]
    probe = work / "delete-probe.db"
    shutil.copy(db, probe)
    deleted = run_cli(["delete", "video", VIDEO_ID, "--yes", "-m", str(probe)], env=child_env(), workdir=work,
                      record=True)
    return Reference(fingerprint(db, VIDEO_ID), len(sql), commit_numbers, seconds, db, len(deleted.trace))


def random_kill(rng: random.Random, ref: Reference, kind: str, share: float = 1.0, fresh: bool = True) -> Any:
    """A kill point of ``kind`` for a run that has ``share`` of the reference's clips left (``fresh``: no file)."""
    from m3agent.bench.crash import KillPoint

    signal: Literal["SIGINT", "SIGKILL"] = "SIGINT" if rng.random() < 0.5 else "SIGKILL"
    clips = len(ref.print["clips"])
    if kind == "stmt":
        return KillPoint("stmt", rng.randint(1, max(1, int(ref.statements * share))))
    if kind == "commit":  # in a fresh file these COMMITs are clips'; a resumed run commits add_video, then clips
        left = max(1, round(clips * share))
        return KillPoint("commit", rng.choice(ref.commits) if fresh else rng.randint(2, 1 + left))
    if kind == "done":
        return KillPoint("done", rng.randint(1, max(1, round(clips * share))), signal)
    return KillPoint("after", round(rng.uniform(0.5, max(1.0, 0.8 * ref.seconds * share)), 2), signal)


def remaining_share(db: Path, ref: Reference) -> float:
    from m3agent.bench.crash import fingerprint

    if not db.exists():
        return 1.0
    done = sum(bool(c[3] == "done") for c in fingerprint(db, VIDEO_ID)["clips"])
    return max(0.0, 1.0 - done / len(ref.print["clips"]))


def run_one(number: int, kind: str, rng: random.Random, ref: Reference, work: Path) -> Outcome:
    from m3agent.bench.crash import compare, fingerprint

    out = Outcome(number, kind)
    started = time.perf_counter()
    db = work / f"run-{number}.db"
    if kind == "delete":
        _killed_delete(rng, ref, db, work, out)
    else:
        kinds = [rng.choice(KINDS[:4]) for _ in range(rng.randint(2, 3))] if kind == "chain" else [kind]
        for each in kinds:
            share = remaining_share(db, ref)
            if share == 0.0:
                break
            kill = random_kill(rng, ref, each, share, fresh=not db.exists())
            result = ingest(db, work, kill)
            out.kills.append(describe(kill, result.where, db, ref))
            out.hit = out.hit and result.killed
    final = ingest(db, work)
    out.resume_rc = final.returncode
    comparison = compare(ref.print, fingerprint(db, VIDEO_ID))
    out.identical, out.duplicates = comparison.identical and final.returncode == 0, comparison.duplicates
    out.lost_memories, out.differences = comparison.lost_memories, list(comparison.differences)
    out.seconds = round(time.perf_counter() - started, 1)
    return out


def describe(kill: Any, where: str, db: Path, ref: Reference) -> str:
    """The kill point, where it landed, and how many clips were stored when it did."""
    if not where:
        return f"{kill}: the run ended first"
    done = round((1.0 - remaining_share(db, ref)) * len(ref.print["clips"]))
    landed = where if kill.event == "after" else f"{kill}: {where}"
    return f"{landed} ({done} clips stored)"


def _killed_delete(rng: random.Random, ref: Reference, db: Path, work: Path, out: Outcome) -> None:
    from m3agent.bench.crash import KillPoint, child_env, fingerprint, run_cli

    shutil.copy(ref.db, db)
    delete = ["delete", "video", VIDEO_ID, "--yes", "-m", str(db)]
    kill = KillPoint("stmt", rng.randint(1, ref.delete_statements))
    result = run_cli(delete, kill=kill, env=child_env(), workdir=work)
    out.kills.append(f"delete, {kill}: {result.where or 'run ended first'}")
    out.hit = result.killed
    after = fingerprint(db, VIDEO_ID)
    gone = not any(after[p] for p in ("clips", "memories", "entities", "faces", "voices", "links"))
    out.atomic = gone or after == ref.print
    if not gone:
        run_cli(delete, env=child_env(), workdir=work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=24, help="kill runs (at least 20)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if not VIDEO.is_file():
        print(f"shared media not found at {VIDEO}", file=sys.stderr)
        return 2
    from m3agent.bench.crash import compare, fingerprint
    from m3agent.bench.environment import environment

    rng = random.Random(args.seed)
    kinds = [KINDS[i % len(KINDS)] for i in range(args.runs)]
    rng.shuffle(kinds)
    results: dict[str, Any] = {"environment": environment(settings=ENV), "seed": args.seed,
                               "load_average": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="m3agent-bench-crash-") as tmp:
        work = Path(tmp)
        ref = make_reference(work)
        repeat = work / "repeat.db"
        ingest(repeat, work)
        results["uninterrupted_repeat_identical"] = compare(ref.print, fingerprint(repeat, VIDEO_ID)).identical
        results["reference"] = {"memories": len(ref.print["memories"]), "clips": len(ref.print["clips"]),
                                "entities": len(ref.print["entities"]), "statements": ref.statements,
                                "seconds": round(ref.seconds, 1)}
        outcomes = []
        for number, kind in enumerate(kinds, 1):
            outcome = run_one(number, kind, rng, ref, work)
            outcomes.append(outcome)
            print(json.dumps(asdict(outcome)), flush=True)
    results["runs"] = [asdict(o) for o in outcomes]
    results["summary"] = {
        "runs": len(outcomes), "identical": sum(o.identical for o in outcomes),
        "duplicates": sum(o.duplicates for o in outcomes), "lost_memories": sum(o.lost_memories for o in outcomes),
        "kills_hit": sum(o.hit for o in outcomes), "deletes": sum(o.kind == "delete" for o in outcomes),
        "deletes_atomic": sum(o.atomic for o in outcomes if o.kind == "delete")}
    print(json.dumps({**results["summary"], "repeat_identical": results["uninterrupted_repeat_identical"]}))
    if not args.no_write:
        write_section(results, "python bench/crash_safety.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    ok = results["summary"]
    return 0 if ok["identical"] == ok["runs"] and not ok["duplicates"] and not ok["lost_memories"] else 1


def write_section(results: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    s, ref = results["summary"], results["reference"]
    lines = [
        run_line(results["environment"], command, results["load_average"]),
        "",
        f"Input: whitehouse_short_hamilton_clip.mp4 in {ref['clips']} clips of 2 s (ASR tiny.en, perception-only "
        f"writer); reference: {ref['memories']} memories, {ref['entities']} entities, {ref['statements']} SQL "
        f"statements, {ref['seconds']} s. Seed {results['seed']}. A second uninterrupted ingest is identical to "
        f"the first: {'yes' if results['uninterrupted_repeat_identical'] else 'NO'}.",
        "",
        "| runs | identical to uninterrupted (target: all) | duplicates (target 0) | lost memories (target 0) "
        "| kills that hit their point | killed deletes left whole or gone |",
        "|---|---|---|---|---|---|",
        f"| {s['runs']} | {s['identical']}/{s['runs']} | {s['duplicates']} | {s['lost_memories']} "
        f"| {s['kills_hit']}/{s['runs']} | {s['deletes_atomic']}/{s['deletes']} |",
        "",
        "| run | kind | kill points (where each landed) | identical | duplicates | lost | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        kills = "; ".join(k.replace("|", "/") for k in r["kills"])
        lines.append(f"| {r['run']} | {r['kind']} | {kills} | {'yes' if r['identical'] else 'NO'} "
                     f"| {r['duplicates']} | {r['lost_memories']} | {r['seconds']} |")
    lines += ["", "Kinds: stmt = SIGKILL at the K-th SQL statement; commit = SIGKILL as a clip's COMMIT starts; "
              "done = signal right after a clip is marked done inside its open transaction; after = signal after a "
              "delay; chain = several kills in successive resumed runs; delete = `delete video` SIGKILLed at a "
              "statement, then finished and the video ingested again. After the kills, `ingest` is rerun to "
              "completion and the memory compared with the reference (entity ids by rank)."]
    replace_section(REPO / "docs" / "benchmarks.md", "Crash safety", "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
