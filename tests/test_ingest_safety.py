"""Ingest safety on real media, in subprocesses with real signals: concurrent ingests, kills, failures.

Every run is the real ``m3agent`` CLI on a real multi-clip video (10 s of 44.1 kHz
AAC, cut into five 2 s clips); kills land at exact points through
:mod:`m3agent.bench.crash` (inside a clip's transaction, at its COMMIT, at its
done mark, inside ``delete``) or after a delay. The result after a resume must
equal the uninterrupted ingest: same clips, memory texts, entities, faces,
voices and links, no duplicates.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from m3agent.bench.crash import KillPoint, RunResult, child_env, compare, fingerprint, run_cli
from m3agent.domain import ClipStatus
from m3agent.errors import M3AgentError
from m3agent.store import open_store

pytestmark = pytest.mark.slow

VIDEO_ID = "whitehouse_short_hamilton_clip"
OTHER_ID = "WDA_KatieHill_000"
ENV = {"M3AGENT_PERCEPTION__ASR_MODEL": "tiny.en", "M3AGENT_MEDIA__CLIP_SECONDS": "2"}
CLI = [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
       "from m3agent.cli.main import main; sys.argv[0] = 'm3agent'; main()"]  # Ctrl-C works even under nohup


def start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``m3agent ARGS`` in a subprocess, output captured."""
    return subprocess.Popen([*CLI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@dataclass(frozen=True)
class Reference:
    video: str
    db: Path
    print: dict[str, list[Any]]
    trace: list[tuple[bool, str]]


@pytest.fixture(scope="module")
def reference(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """One uninterrupted ingest, with its SQL statement trace."""
    video = str(media_dir / "video" / "whitehouse_short_hamilton_clip.mp4")
    work = tmp_path_factory.mktemp("reference")
    db = work / "reference.db"
    run = run_cli(["ingest", video, "-m", str(db), "--json"], env=child_env(**ENV), workdir=work, record=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["clips_done"] == 5
    result = Reference(video, db, fingerprint(db, VIDEO_ID), run.trace)
    assert len(result.print["memories"]) > 5 and result.print["voices"] and result.print["faces"]
    return result


def ingest(ref: Reference, db: Path, work: Path, kill: KillPoint | None = None, video: str | None = None) -> RunResult:
    return run_cli(["ingest", video or ref.video, "-m", str(db), "--json"], kill=kill, env=child_env(**ENV),
                   workdir=work)


def killed(ref: Reference, db: Path, work: Path, kill: KillPoint) -> RunResult:
    run = ingest(ref, db, work, kill)
    assert run.killed, f"{kill} did not hit: rc {run.returncode}, {run.stderr[-500:]}"
    return run


def assert_same(ref: Reference, db: Path) -> None:
    comparison = compare(ref.print, fingerprint(db, VIDEO_ID))
    assert comparison.identical, comparison.differences
    assert comparison.duplicates == 0 and comparison.lost_memories == 0


def statement_in_clip(ref: Reference, clip: int, fraction: float) -> int:
    """The number of a statement ``fraction`` of the way through the transaction of clip ``clip``.

    Each clip transaction writes its clips row more than once (created, pending, done): a clip's transaction
    begins at the first clips row written after the previous COMMIT; clips run in order.
    """
    begins, open_clip = [], False
    for i, (_, sql) in enumerate(ref.trace, 1):
        if sql == "COMMIT":
            open_clip = False
        elif sql.startswith("INSERT INTO clips") and not open_clip:
            begins.append(i)
            open_clip = True
    begin = begins[clip]
    end = next(i for i, (_, sql) in enumerate(ref.trace, 1) if sql == "COMMIT" and i > begin)
    return begin + int((end - begin) * fraction)


# -- 2. resume after SIGKILL / SIGINT reproduces the uninterrupted ingest ---------------------


def test_resume_after_kills_at_many_points_equals_the_uninterrupted_ingest(reference: Reference,
                                                                           tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    killed(reference, db, tmp_path, KillPoint("stmt", statement_in_clip(reference, 1, 0.5)))  # mid-transaction
    assert [c[0] for c in fingerprint(db, VIDEO_ID)["clips"]] == [0]
    killed(reference, db, tmp_path, KillPoint("done", 1, "SIGINT"))  # Ctrl-C as clip 1 is marked done
    killed(reference, db, tmp_path, KillPoint("commit", 2))  # SIGKILL as clip 1's COMMIT starts (1: add_video)
    killed(reference, db, tmp_path, KillPoint("commit", 3))  # clip 1 committed, killed at clip 2's COMMIT
    assert [c[0] for c in fingerprint(db, VIDEO_ID)["clips"]] == [0, 1]
    killed(reference, db, tmp_path, KillPoint("done", 2))  # SIGKILL inside clip 3's open transaction
    run = ingest(reference, db, tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["clips_already_done"] == 3
    assert_same(reference, db)
    again = ingest(reference, db, tmp_path)  # a rerun of a finished video writes nothing, not even a tail clip
    assert again.returncode == 0 and json.loads(again.stdout)["clips_done"] == 0
    assert_same(reference, db)


def test_resume_after_a_real_ctrl_c_equals_the_uninterrupted_ingest(reference: Reference, tmp_path: Path) -> None:
    db = tmp_path / "interrupted.db"
    proc = start("ingest", reference.video, "-m", str(db), "--json", env=child_env(**ENV))
    try:
        _wait_for_done_clips(db, 2, proc)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err, err[-800:]
    final = ingest(reference, db, tmp_path)
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["clips_already_done"] >= 2
    assert_same(reference, db)


def _wait_for_done_clips(db: Path, count: int, proc: subprocess.Popen[str], timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the ingest ended before it could be interrupted"
        if db.exists():
            with contextlib.suppress(M3AgentError), open_store(str(db), readonly=True, create=False) as store:
                if sum(s == ClipStatus.DONE for _, s, _ in store.clips(VIDEO_ID)) >= count:
                    return
        time.sleep(0.05)
    raise AssertionError("the ingest made no progress")


# -- kills during delete ---------------------------------------------------------------------


def test_a_killed_delete_leaves_the_video_whole_or_gone_and_reingests_identically(reference: Reference,
                                                                                  tmp_path: Path) -> None:
    probe = tmp_path / "probe.db"
    shutil.copy(reference.db, probe)
    delete = ["delete", "video", VIDEO_ID, "--yes"]
    traced = run_cli([*delete, "-m", str(probe)], env=child_env(), workdir=tmp_path, record=True)
    assert traced.returncode == 0, traced.stderr
    statements = list(range(1, len(traced.trace) + 1))
    inside = [i for i, (in_tx, sql) in enumerate(traced.trace, 1) if in_tx and sql.startswith("DELETE")]
    commit = max(i for i, (_, sql) in enumerate(traced.trace, 1) if sql == "COMMIT")
    points = sorted({inside[0], inside[-1], commit, commit + 1, statements[-1]})
    for number in points:
        db = tmp_path / f"delete-{number}.db"
        shutil.copy(reference.db, db)
        run = run_cli([*delete, "-m", str(db)], env=child_env(), workdir=tmp_path, kill=KillPoint("stmt", number))
        assert run.killed, f"statement {number} of {len(statements)} not reached"
        after = fingerprint(db, VIDEO_ID)
        gone = not any(after[part] for part in ("clips", "memories", "entities", "faces", "voices", "links"))
        assert after == reference.print or gone, f"killed at {run.where}: half-deleted"
        assert gone == (number > commit), run.where
    db = tmp_path / f"delete-{inside[-1]}.db"  # still whole: delete it for real, then ingest again
    assert run_cli([*delete, "-m", str(db)], env=child_env(), workdir=tmp_path).returncode == 0
    assert ingest(reference, db, tmp_path).returncode == 0
    assert_same(reference, db)


# -- 1. concurrent ingests -------------------------------------------------------------------


def test_two_ingests_of_one_video_at_once_store_it_once(reference: Reference, tmp_path: Path) -> None:
    db = tmp_path / "both.db"
    procs = [start("ingest", reference.video, "-m", str(db), "--json", env=child_env(**ENV)) for _ in range(2)]
    outputs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-800:] for _, err in outputs]
    reports = [json.loads(out) for out, _ in outputs]
    assert sorted((r["clips_done"], r["clips_already_done"], r["clips_failed"]) for r in reports) == [
        (0, 5, []), (5, 0, [])]
    with open_store(str(db), readonly=True, create=False) as store:
        assert [s for _, s, _ in store.clips(VIDEO_ID)] == [ClipStatus.DONE] * 5
    assert_same(reference, db)
    rerun = ingest(reference, db, tmp_path)
    assert rerun.returncode == 0 and json.loads(rerun.stdout)["clips_done"] == 0
    assert_same(reference, db)


def test_a_second_ingest_waits_for_the_first_and_says_so(reference: Reference, tmp_path: Path) -> None:
    db = tmp_path / "held.db"
    with open_store(str(db)) as store, store.video_lock(VIDEO_ID):
        proc = start("ingest", reference.video, "-m", str(db), "--json", env=child_env(**ENV))
        waiting = _first_line_containing(proc, "waiting", timeout_s=300)
        assert f"another ingest of '{VIDEO_ID}' is running (pid " in waiting
        assert store.clips(VIDEO_ID) == [] and proc.poll() is None
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    assert json.loads(out)["clips_done"] == 5
    assert_same(reference, db)


def _first_line_containing(proc: subprocess.Popen[str], text: str, timeout_s: float) -> str:
    found: list[str] = []
    seen: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if text in line:
                found.append(line)
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    assert found, f"no line with {text!r} on stderr: {''.join(seen)[-800:]}"
    return found[0]


def test_ingests_of_different_videos_run_side_by_side(reference: Reference, media_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    other = str(media_dir / "video" / "hdtf_talking_heads" / "WDA_KatieHill_000.mp4")
    procs = [start("ingest", video, "-m", str(db), "--json", env=child_env(**ENV))
             for video in (reference.video, other)]
    outputs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-800:] for _, err in outputs]
    assert not any("waiting" in err for _, err in outputs)
    assert [json.loads(out)["clips_done"] for out, _ in outputs] == [5, 4]
    with open_store(str(db), readonly=True, create=False) as store:
        assert [s for _, s, _ in store.clips(VIDEO_ID)] == [ClipStatus.DONE] * 5
        assert [s for _, s, _ in store.clips(OTHER_ID)] == [ClipStatus.DONE] * 4
        assert len(store.memories(video_id=VIDEO_ID)) == len(reference.print["memories"])
        for video_id in (VIDEO_ID, OTHER_ID):
            rows = [(m.clip_index, m.start_s, m.text) for m in store.memories(video_id=video_id)]
            assert len(rows) == len(set(rows)), "duplicated memories"


# -- 3. failed clips make a failed run ------------------------------------------------------------


@pytest.fixture
def endpoint() -> Iterator[Any]:
    from test_llm_openai import FakeServer, completion

    server = FakeServer()
    reply = {"episodic": ["A man performs on a stage."], "semantic": ["The show is a poetry evening."],
             "equivalences": []}
    server.script.append(completion(json.dumps(reply)))  # clip 0 gets a valid reply; every later call a 500
    yield server
    server.close()


def test_a_run_with_failed_clips_exits_6_and_names_them(reference: Reference, endpoint: Any,
                                                         tmp_path: Path) -> None:
    db = tmp_path / "failing.db"
    env = child_env(M3AGENT_PERCEPTION__ASR_MODEL="tiny.en", M3AGENT_MEDIA__CLIP_SECONDS="5")
    command = [*CLI, "ingest", reference.video, "-m", str(db), "--json"]
    run = subprocess.run([*command, "--writer", "mllm", "--llm", endpoint.url + "?model=omni"], env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 6, run.stderr
    report = json.loads(run.stdout)  # --json prints the whole report as before
    assert report["clips_done"] == 1 and [f["clip"] for f in report["clips_failed"]] == [1]
    assert "500" in report["clips_failed"][0]["reason"]
    assert "1 of 2 clips" in run.stderr and "clip 1: " in run.stderr and "rerun" in run.stderr
    with open_store(str(db), readonly=True, create=False) as store:
        assert [(c.index, s) for c, s, _ in store.clips(VIDEO_ID)] == [(0, ClipStatus.DONE), (1, ClipStatus.FAILED)]
    ok = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)  # retried, perception writer
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["clips_done"] == 1


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 16 MiB filesystem (tmpfs) that a test can fill up."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                                                capture_output=True).returncode == 0
    if not made:
        pytest.skip("a real full disk needs a small tmpfs, and mounting one needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_disk_that_fills_up_mid_ingest_fails_the_run_with_6_and_a_rerun_completes_it(
        reference: Reference, small_disk: Path, tmp_path: Path) -> None:
    db = small_disk / "memory.db"
    proc = start("ingest", reference.video, "-m", str(db), "--json", env=child_env(**ENV))
    try:
        _wait_for_done_clips(db, 1, proc)
    except AssertionError:
        proc.kill()
        raise
    filler = small_disk / "filler"
    with filler.open("wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(os.urandom(1 << 16))
    out_text, err = proc.communicate(timeout=900)
    assert proc.returncode == 6, err[-800:]
    report = json.loads(out_text)
    assert report["clips_done"] >= 1 and len(report["clips_failed"]) == 1, report
    assert "memory store is full" in report["clips_failed"][0]["reason"]
    assert any(p.startswith("stopped after clip") for p in report["problems"])
    assert f"clip {report['clips_failed'][0]['clip']}: memory store is full" in err
    filler.unlink()
    final = ingest(reference, db, tmp_path)
    assert final.returncode == 0, final.stderr
    assert_same(reference, db)
