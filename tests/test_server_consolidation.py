"""Consolidation in the server while it is idle, on a real recording (JFK's 11 s "ask not", cut into 4 s clips,
voices and tiny.en ASR only) with the scripted model configured as ``memorize.consolidate_llm``.

After an ingest job the worker consolidates the clips one unit at a time: facts are written with their
sources and every clip is recorded. The model is loaded when first needed (a model that cannot load is a
recorded failure, retried after a back-off, not a crashed worker), a job submitted meanwhile starts after
at most one unit, a video another process holds is left alone, and without a model nothing happens.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
from fastapi.testclient import TestClient

from m3agent.llm.scripted import ScriptedChat
from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from m3agent.store import open_store

VIDEO = "jfk"
CLIPS = 3  # 11 s in 4 s clips
SENSES_OFF = {"shots": False, "text": False, "objects": False, "sounds": False}
NO_FACTS = json.dumps([{"facts": []}] * 20)


@pytest.fixture(scope="module")
def jfk(media_dir: Path) -> Path:
    return media_dir / "audio" / "asr" / "jfk.flac"


def settings_for(db: Path, jfk: Path, **changes: Any) -> Settings:
    server = {"allowed_folders": [str(jfk.parent)], "consolidate_idle_s": 0.05, "consolidate_retry_s": 0.3,
              **changes.pop("server", {})}
    # every unit is a model call (the pre-check would skip the clips without a cue: "ask not what your country")
    changes["memorize"] = {"consolidate_precheck": False, **changes.get("memorize", {})}
    return load_settings(memory=str(db), embedder="hash", llm="none", media={"clip_seconds": 4.0},
                         perception={"faces": False, "asr_model": "tiny.en"}, senses=SENSES_OFF, server=server,
                         **changes)


@pytest.fixture(scope="module")
def ingested(jfk: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recording ingested once, not consolidated (tests copy it)."""
    from m3agent.pipeline import ingest_source

    db = tmp_path_factory.mktemp("jfk") / "memory.db"
    report = ingest_source(settings_for(db, jfk), str(jfk), show_progress=False, consolidate=False)
    assert report.clips_done == CLIPS and not report.clips_failed
    return db


def copy_of(ingested: Path, tmp_path: Path) -> Path:
    db = tmp_path / "memory.db"
    shutil.copy(ingested, db)
    return db


def scripted_app(db: Path, jfk: Path, replies: Path, text: str | None = NO_FACTS) -> Any:
    """A server app whose consolidation model replays ``replies`` (written with ``text`` unless None)."""
    if text is not None:
        replies.write_text(text)
    return create_app(settings_for(db, jfk, memorize={"consolidate_llm": f"scripted:{replies}"}), mcp=False)


def until(client: TestClient, path: str, done: Callable[[dict[str, Any]], bool], timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(path).json()
        if done(body):
            return body
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached the condition: {body}")


def job_done(client: TestClient, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = until(client, f"/api/jobs/{job_id}", lambda j: j["state"] not in ("queued", "running"))
    assert job["state"] == "done", job
    return job


def consolidated(db: Path, video_id: str = VIDEO) -> list[int]:
    with open_store(str(db), readonly=True, create=False) as store:
        return sorted(store.consolidated_clips(video_id))


def place_replies(client: TestClient) -> dict[int, tuple[str, int]]:
    """Per clip with speech: a place fact naming a word of its first memory, citing that memory."""
    memories = client.get("/api/memories", params={"video_id": VIDEO, "kind": "episodic"}).json()["items"]
    first: dict[int, dict[str, Any]] = {}
    for memory in memories:
        first.setdefault(memory["clip"], memory)
    return {clip: (max(re.findall(r"[a-z]{4,}", m["raw_text"].split("says:", 1)[-1].lower()), key=len), m["id"])
            for clip, m in sorted(first.items())}


def test_after_an_ingest_job_the_server_consolidates_when_idle(jfk: Path, tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"  # written once the clips are known: loading the model fails until then
    db = tmp_path / "memory.db"
    app = scripted_app(db, jfk, replies, text=None)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/api/consolidation").json()["state"] == "idle"
        job = client.post("/api/jobs", json={"path": str(jfk), "max_clips": CLIPS}).json()
        assert job_done(client, job["id"])["clips_done"] == CLIPS
        failed = until(client, "/api/consolidation", lambda s: s["state"] == "failed")
        (failure,) = failed["failures"]
        assert failure["video_id"] is None and "cannot read scripted replies" in failure["error"]
        assert failed["pending_clips"] == CLIPS and failed["units_done"] == 0 and failed["enabled"]
        assert consolidated(db) == [], "the job left consolidation to the idle worker"
        wanted = place_replies(client)
        assert len(wanted) >= 2, wanted
        replies.write_text(json.dumps([{"facts": [{"person": "none", "kind": "place", "value": word,
                                                   "sources": ["m1"]}]}
                                       for word, _ in wanted.values()]))  # m1: each unit's first memory
        status = until(client, "/api/consolidation", lambda s: s["state"] == "idle" and s["pending_clips"] == 0)
    assert status["units_done"] == CLIPS and status["failures"] == [] and status["video_id"] == VIDEO
    report = status["last_report"]
    words = {word for word, _ in wanted.values()}
    assert report["clips_consolidated"] == CLIPS and report["calls"] == len(wanted)
    # JFK states no place ("what your country can do"): each unit's place fact is read, checked and dropped
    # with its reason (facts written with their sources: tests/test_consolidate.py, the same unit code)
    assert report["facts_written"] == 0 and report["model"] == "scripted"
    assert len(report["dropped"]) == len(wanted), report
    assert all("no one says they are in" in note for note in report["dropped"]), report["dropped"]
    chat = app.state.ctx._consolidation_chat
    assert isinstance(chat, ScriptedChat) and len(chat.calls) == len(wanted) and chat.remaining == 0, "loaded once"
    assert consolidated(db) == list(range(CLIPS))
    with open_store(str(db), readonly=True, create=False) as store:
        notes = [note for clip in store.consolidated_clips(VIDEO).values() for note in clip.notes]
    assert len(notes) == len(wanted) and all(any(w in n for n in notes) for w in words), notes


def test_a_job_submitted_while_consolidating_starts_after_one_unit(jfk: Path, ingested: Path, tmp_path: Path) -> None:
    db = copy_of(ingested, tmp_path)
    app = scripted_app(db, jfk, tmp_path / "replies.json")
    ctx = app.state.ctx
    committed: list[float] = []
    submitted: list[str] = []

    def after_unit(report: Any) -> None:
        committed.append(time.time())
        if not submitted:  # a user submits a job while the first video is being consolidated
            submitted.append(ctx.require_jobs().submit(str(jfk.resolve()), "path", "again", max_clips=1).id)

    ctx.consolidator.on_unit = after_unit
    with TestClient(app, base_url="http://127.0.0.1") as client:
        until(client, "/api/consolidation", lambda s: s["units_done"] == CLIPS + 1 and s["pending_clips"] == 0)
        job = job_done(client, submitted[0])
    before_job = [t for t in committed if t < job["started_at"]]
    assert len(before_job) == 1, f"the job waited for {len(before_job)} units, not one"
    assert job["finished_at"] < committed[1], "the rest of the video waited for the job"
    assert consolidated(db) == list(range(CLIPS)) and consolidated(db, "again") == [0]


def test_a_failing_video_is_recorded_and_retried_after_a_back_off(jfk: Path, ingested: Path,
                                                                 tmp_path: Path) -> None:
    db = copy_of(ingested, tmp_path)
    # one reply, then the endpoint "goes away": every later call fails
    app = scripted_app(db, jfk, tmp_path / "replies.json", json.dumps([{"facts": []}]))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        failed = until(client, "/api/consolidation", lambda s: s["state"] == "failed")
        time.sleep(1.0)
        later = client.get("/api/consolidation").json()
        job = client.post("/api/jobs", json={"path": str(jfk)}).json()
        assert job_done(client, job["id"])["clips_done"] == 0, "the worker still runs jobs"
    (failure,) = later["failures"]
    assert failure["video_id"] == VIDEO and "ran out of replies" in failure["error"] and failure["hint"]
    assert 1 <= failure["failures"] <= 3, "retried after 0.3 s, then 0.6 s...: never in a tight loop"
    assert later["last_error"].startswith(f"video {VIDEO!r}: ") and failed["units_done"] == later["units_done"]
    done = later["units_done"]
    assert later["pending_clips"] == CLIPS - done and consolidated(db) == list(range(done))


def test_a_video_held_by_another_process_is_left_until_it_is_free(jfk: Path, ingested: Path,
                                                                  tmp_path: Path) -> None:
    db = copy_of(ingested, tmp_path)
    app = scripted_app(db, jfk, tmp_path / "replies.json")
    with open_store(str(db)) as other, ExitStack() as held:  # as an `m3agent ingest` of it in another process
        held.enter_context(other.video_lock(VIDEO))
        with TestClient(app, base_url="http://127.0.0.1") as client:
            skipped = until(client, "/api/consolidation", lambda s: s["updated_at"] is not None)
            assert skipped["state"] == "idle" and skipped["pending_clips"] == CLIPS and skipped["failures"] == []
            assert consolidated(db) == []
            held.close()  # that ingest ends; the next job's end wakes the worker
            job = client.post("/api/jobs", json={"path": str(jfk)}).json()  # nothing new: its clips are done
            assert job_done(client, job["id"])["clips_done"] == 0
            done = until(client, "/api/consolidation", lambda s: s["pending_clips"] == 0)
    assert done["units_done"] == CLIPS and consolidated(db) == list(range(CLIPS))


def test_an_answer_being_written_delays_consolidation_only_until_it_ends(jfk: Path, ingested: Path,
                                                                        tmp_path: Path) -> None:
    db = copy_of(ingested, tmp_path)
    app = scripted_app(db, jfk, tmp_path / "replies.json")
    lock = app.state.ctx.chat_lock
    with TestClient(app, base_url="http://127.0.0.1") as client, lock:  # as /api/ask holds it while answering
        time.sleep(0.5)
        assert consolidated(db) == [] and client.get("/api/consolidation").json()["units_done"] == 0
        lock.release()
        try:
            until(client, "/api/consolidation", lambda s: s["pending_clips"] == 0, timeout=10)  # not a 60 s poll
        finally:
            lock.acquire()
    assert consolidated(db) == list(range(CLIPS))


@pytest.mark.parametrize("changes", [{}, {"memorize": {"consolidate_llm": "scripted:/nowhere.json"},
                                          "server": {"consolidate_when_idle": False}}],
                         ids=["llm-none", "idle-consolidation-off"])
def test_without_a_model_or_when_off_the_server_does_nothing_when_idle(jfk: Path, ingested: Path, tmp_path: Path,
                                                                       changes: dict[str, Any]) -> None:
    db = copy_of(ingested, tmp_path)
    app = create_app(settings_for(db, jfk, **changes), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        job = client.post("/api/jobs", json={"path": str(jfk)}).json()
        job_done(client, job["id"])
        time.sleep(0.5)  # ten idle delays
        status = client.get("/api/consolidation").json()
    assert status["state"] == "off" and not status["enabled"] and status["units_done"] == 0
    assert status["pending_clips"] == CLIPS and consolidated(db) == []
