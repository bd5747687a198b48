"""Ingest jobs in the server: progress, cancellation (queued and running), and resuming after a restart.

A real WAV is ingested with perception switched off, cut into many short clips, so each clip is quick
but the job lasts long enough to watch, cancel and interrupt it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
from fastapi.testclient import TestClient

from m3agent.media.snippets import wav_bytes
from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from server_helpers import until

SECONDS, CLIP = 240.0, 0.4  # 600 clips


@pytest.fixture()
def setup(tmp_path: Path) -> tuple[Settings, Path]:
    media = tmp_path / "media"
    media.mkdir()
    t = np.arange(int(SECONDS * 8000)) / 8000
    (media / "long.wav").write_bytes(wav_bytes((0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 8000))
    settings = load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                             media={"clip_seconds": CLIP}, perception={"voices": False, "faces": False},
                             server={"allowed_folders": [str(media)]})
    return settings, media / "long.wav"



def test_progress_and_cancelling_a_queued_and_a_running_job(setup: tuple[Settings, Path]) -> None:
    settings, wav = setup
    with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1") as client:
        first = client.post("/api/jobs", json={"path": str(wav)}).json()
        second = client.post("/api/jobs", json={"path": str(wav), "video_id": "again"}).json()
        running = until(client, first["id"], lambda j: j["clips_done"] >= 3)
        assert running["state"] == "running" and running["clips_total"] == 600 and running["rtf"] > 0
        queued = client.post(f"/api/jobs/{second['id']}/cancel").json()
        assert queued["state"] == "cancelled" and queued["started_at"] is None
        client.post(f"/api/jobs/{first['id']}/cancel")
        stopped = until(client, first["id"], lambda j: j["state"] != "running")
        assert stopped["state"] == "cancelled" and 3 <= stopped["clips_done"] < 600
        video = client.get("/api/videos/long").json()
        assert video["clips_done"] == stopped["clips_done"]  # the clips done before the cancel are kept
        assert client.get("/api/videos/again").status_code == 404
        assert client.post("/api/jobs/nope/cancel").status_code == 404


def test_a_restart_resumes_an_interrupted_job_after_its_last_clip(setup: tuple[Settings, Path]) -> None:
    settings, wav = setup
    with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1") as client:
        job = client.post("/api/jobs", json={"path": str(wav)}).json()
        until(client, job["id"], lambda j: j["clips_done"] >= 5)
    # the server stopped mid-job: the journal still says running
    with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1") as client:
        resumed = until(client, job["id"], lambda j: j["state"] not in ("queued", "running"), timeout=300)
        assert resumed["state"] == "done" and resumed["resumed"] == 1
        assert resumed["clips_already_done"] >= 5 and resumed["clips_already_done"] + resumed["clips_done"] == 600
        assert client.get("/api/videos/long").json()["clips_done"] == 600


def test_a_url_source_is_ingested_over_http(setup: tuple[Settings, Path]) -> None:
    import functools
    import http.server
    import threading

    settings, wav = setup
    server = {**settings.server.model_dump(), "allow_urls": True, "url_allowed_networks": ["127.0.0.1/32"]}
    settings = settings.model_copy(update={"server": type(settings.server).model_validate(server)})
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(wav.parent))
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{files.server_address[1]}/{wav.name}"
        with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1") as client:
            job = client.post("/api/jobs", json={"url": url, "max_clips": 20}).json()
            assert job["source_kind"] == "url" and job["video_id"] == "long"
            done = until(client, job["id"], lambda j: j["state"] not in ("queued", "running"))
            assert done["state"] == "done" and done["clips_done"] == 20
            copy = Path(client.get("/api/videos/long").json()["source"])  # the download, read as a local file
            assert copy.parent.name == "uploads" and copy.read_bytes() == wav.read_bytes()
            assert client.post("/api/jobs", json={"url": url, "video_id": "a/b"}).status_code == 422
    finally:
        files.shutdown()
