"""The server's smaller promises: guessable tokens refused, wrong tokens throttled, answers that name no server
folder and echo no input whole, a job with failed clips that says so, a bounded job journal, a failed download
that leaves no file, a clear start on a bad memory, forget of a video this server ingests answered 409."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from m3agent.errors import ConfigError, StoreError
from m3agent.media.snippets import wav_bytes
from m3agent.server.app import create_app
from m3agent.server.failures import MAX_TEXT, public
from m3agent.server.jobs import JobRunner, JobState
from m3agent.server.security import GuessThrottle, check_bind
from m3agent.settings import Settings, load_settings
from server_helpers import build_memory, live_server, until

BIN = Path(sys.executable).with_name("m3agent")


def settings_of(tmp_path: Path, **server: Any) -> Settings:
    (tmp_path / "media").mkdir(exist_ok=True)
    return load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                         media={"clip_seconds": 0.5}, perception={"voices": False, "faces": False},
                         server={"allowed_folders": [str(tmp_path / "media")], **server})


def test_a_public_bind_refuses_a_token_that_is_easy_to_guess(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="easy to guess"):
        check_bind(settings_of(tmp_path, host="0.0.0.0", token="a" * 16).server)
    with pytest.raises(ConfigError, match="easy to guess"):
        check_bind(settings_of(tmp_path, host="0.0.0.0", token="abab" * 8).server)
    check_bind(settings_of(tmp_path, host="0.0.0.0", token="3f9a0c7e41b2d856").server)
    check_bind(settings_of(tmp_path, host="127.0.0.1", token="a" * 16).server)  # loopback: anything goes


def test_wrong_tokens_are_answered_one_at_a_time_right_ones_at_once() -> None:
    async def guesses(n: int) -> float:
        throttle = GuessThrottle(0.1)
        started = time.perf_counter()
        await asyncio.gather(*(throttle.failed() for _ in range(n)))
        return time.perf_counter() - started

    assert asyncio.run(guesses(10)) >= 0.95  # 10 at once still take 10 turns: 10 guesses a second at most


def test_guesses_through_the_api_and_the_login_form_are_throttled(tmp_path: Path) -> None:
    build_memory(tmp_path / "memory.db")
    token = "3f9a0c7e41b2d856a1"
    app = create_app(settings_of(tmp_path, token=token, failed_guess_delay_s=0.2), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        started = time.perf_counter()
        for guess in range(5):
            assert client.get("/api/videos", headers={"authorization": f"Bearer x{guess}"}).status_code == 401
        assert client.post("/login", data={"token": "nope"}).status_code == 401
        assert time.perf_counter() - started >= 1.1
        started = time.perf_counter()
        for _ in range(5):
            assert client.get("/api/videos", headers={"authorization": f"Bearer {token}"}).status_code == 200
        assert time.perf_counter() - started < 1.0


def test_answers_name_no_server_folder_and_echo_no_input_whole(tmp_path: Path) -> None:
    private = (str(tmp_path),)
    assert public(f"cannot read {tmp_path}/memory-server/uploads/x.mp4", private) == \
        "cannot read memory-server/uploads/x.mp4"
    assert len(public("x" * 60_000)) == MAX_TEXT
    build_memory(tmp_path / "memory.db")
    with TestClient(create_app(settings_of(tmp_path), mcp=False), base_url="http://127.0.0.1") as client:
        answer = client.post("/api/forget", json={"video": "v" * 200})
        assert answer.status_code == 404
        body = answer.json()
        assert str(tmp_path) not in json.dumps(body)
        answer = client.post("/api/jobs", json={"path": str(tmp_path / "media" / ("n" * 3000))})
        assert len(answer.json()["message"]) <= MAX_TEXT


def test_a_job_whose_clips_failed_ends_failed_and_says_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import m3agent.pipeline as pipeline

    real = pipeline.perceive_clip

    def flaky(media: Any, settings: Any) -> Any:
        if media.clip.index == 1:
            raise RuntimeError("a decoder hiccup")
        return real(media, settings)

    monkeypatch.setattr(pipeline, "perceive_clip", flaky)
    settings = settings_of(tmp_path)
    tone = (0.2 * np.sin(np.arange(8000 * 2) / 8000 * 2 * np.pi * 220)).astype(np.float32)
    with live_server(create_app(settings, mcp=False)) as url, httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/api/jobs/upload", files={"file": ("t.wav", wav_bytes(tone, 8000), "audio/wav")}).json()
        ended = until(client, job["id"], lambda j: j["state"] not in ("queued", "running"))
    assert ended["state"] == "failed" and ended["clips_failed"] == 1 and ended["clips_done"] == 3
    assert "clip 1" in ended["error"] and "retries only the failed clips" in ended["hint"]


def test_the_journal_keeps_the_newest_finished_jobs_and_every_active_one(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, jobs_kept=3)
    runner = JobRunner(settings, tmp_path / "server")
    runner.folder.mkdir()
    for i in range(8):
        job = runner.submit(f"/nowhere/{i}.mp4", "path", f"v{i}")
        if i < 6:
            runner._update(job.id, state=JobState.DONE, finished_at=1000.0 + i)
    kept = {j.video_id for j in runner.all()}
    assert kept == {"v3", "v4", "v5", "v6", "v7"}
    rows = json.loads((runner.folder / "jobs.json").read_text())
    assert len(rows) == 5


def test_forgetting_a_video_this_server_ingests_is_a_conflict(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    tone = (0.2 * np.sin(np.arange(8000 * 200) / 8000 * 2 * np.pi * 220)).astype(np.float32)
    with live_server(create_app(settings, mcp=False)) as url, httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/api/jobs/upload", files={"file": ("long.wav", wav_bytes(tone, 8000), "audio/wav")}).json()
        until(client, job["id"], lambda j: j["clips_done"] >= 1)
        answer = client.post("/api/forget", json={"video": "long"})
        assert answer.status_code == 409
        assert f"/api/jobs/{job['id']}/cancel" in answer.json()["hint"]
        client.post(f"/api/jobs/{job['id']}/cancel")
        until(client, job["id"], lambda j: j["state"] == "cancelled")
        assert client.post("/api/forget", json={"video": "long"}).status_code == 200


def test_a_failed_download_leaves_no_file(tmp_path: Path) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    class NotMedia(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"this is not a video" * 1000
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), NotMedia)
    Thread(target=http.serve_forever, daemon=True).start()
    settings = settings_of(tmp_path, allow_urls=True, url_allowed_networks=["127.0.0.0/8"])
    try:
        with live_server(create_app(settings, mcp=False)) as url, httpx.Client(base_url=url, timeout=60) as client:
            answer = client.post("/api/jobs", json={"url": f"http://127.0.0.1:{http.server_port}/clip.mp4"})
            assert answer.status_code == 202, answer.text
            ended = until(client, answer.json()["id"], lambda j: j["state"] not in ("queued", "running"))
    finally:
        http.shutdown()
    assert ended["state"] == "failed"
    assert str(tmp_path) not in ended["error"]
    uploads = tmp_path / "memory-server" / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []


def test_serve_names_a_bad_memory_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all" * 100)
    folder = tmp_path / "folder.db"
    folder.mkdir()
    for memory, words in ((bad, "not an SQLite file"), (folder, "is a folder")):
        done = subprocess.run([str(BIN), "serve", "--memory", str(memory), "--port", "0"], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode != 0
        assert words in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_folder_is_no_memory(tmp_path: Path) -> None:
    from m3agent.store import open_store

    with pytest.raises(StoreError, match="is a folder"):
        open_store(str(tmp_path))
