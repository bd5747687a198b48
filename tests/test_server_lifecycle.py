"""Files and deletions through a real HTTP server: uploads leave with their cancelled job or forgotten video,
a forget leaves no deleted text in the database or its WAL, and a path job checks its path when it runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
import httpx

from m3agent.media.snippets import wav_bytes
from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from server_helpers import build_memory, live_server, until
from store_helpers import file_bytes

SECONDS, CLIP = 240.0, 0.4  # 600 short clips: a job lasts long enough to cancel it


def wav(seconds: float = SECONDS, hz: float = 220.0) -> bytes:
    t = np.arange(int(seconds * 8000)) / 8000
    return wav_bytes((0.2 * np.sin(2 * np.pi * hz * t)).astype(np.float32), 8000)


def settings_of(tmp_path: Path) -> Settings:
    (tmp_path / "media").mkdir(exist_ok=True)
    return load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                         media={"clip_seconds": CLIP}, perception={"voices": False, "faces": False},
                         server={"allowed_folders": [str(tmp_path / "media")]})


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[httpx.Client, Settings]]:
    settings = settings_of(tmp_path)
    with live_server(create_app(settings, mcp=False)) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, settings



def uploads(settings: Settings) -> list[Path]:
    folder = Path(str(settings.memory.path)).with_name("memory-server") / "uploads"
    return sorted(folder.iterdir()) if folder.exists() else []


def upload(client: httpx.Client, data: bytes, video_id: str) -> dict[str, Any]:
    answer = client.post("/api/jobs/upload", files={"file": ("long.wav", data, "audio/wav")},
                         data={"video_id": video_id})
    assert answer.status_code == 202, answer.text
    job: dict[str, Any] = answer.json()
    return job


def test_cancelled_jobs_take_their_uploads_with_them(served: tuple[httpx.Client, Settings]) -> None:
    client, settings = served
    running = upload(client, wav(), "first")
    queued = upload(client, wav(), "second")
    until(client, running["id"], lambda j: j["clips_done"] >= 2)
    assert len(uploads(settings)) == 2
    assert client.post(f"/api/jobs/{queued['id']}/cancel").json()["state"] == "cancelled"
    assert [p.name for p in uploads(settings)] == [Path(running["source"]).name]  # the queued one's is gone
    client.post(f"/api/jobs/{running['id']}/cancel")
    until(client, running["id"], lambda j: j["state"] == "cancelled")
    assert uploads(settings) == []


def test_forgetting_an_uploaded_video_deletes_the_upload_and_its_jobs(served: tuple[httpx.Client, Settings]) -> None:
    client, settings = served
    job = upload(client, wav(8.0), "short")
    assert until(client, job["id"], lambda j: j["state"] != "queued" and j["state"] != "running")["state"] == "done"
    assert len(uploads(settings)) == 1
    assert client.post("/api/forget", json={"video": "short"}).status_code == 200
    assert uploads(settings) == []
    assert client.get(f"/api/jobs/{job['id']}").status_code == 404
    assert client.get("/api/jobs").json()["total"] == 0


def test_forget_through_the_server_leaves_no_deleted_text_on_disk(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    built = build_memory(tmp_path / "memory.db")
    doomed = built.memories[2]  # "<face> chops onions on a wooden board"
    with live_server(create_app(settings, mcp=False)) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert "onions" in client.get(f"/api/memories/{doomed}").json()["text"]  # pooled readers now open
        assert client.post("/api/search", json={"query": "onions", "k": 3}).status_code == 200
        assert b"onions" in file_bytes(tmp_path / "memory.db")
        assert client.post("/api/forget", json={"memory": doomed}).status_code == 200
        assert b"onions" not in file_bytes(tmp_path / "memory.db")  # while the server still runs
        assert client.post("/api/forget", json={"video": "walk"}).status_code == 200
        assert b"walks a dog" not in file_bytes(tmp_path / "memory.db")


def test_a_path_job_checks_its_path_when_it_runs(served: tuple[httpx.Client, Settings], tmp_path: Path) -> None:
    client, _ = served
    media = tmp_path / "media"
    (media / "long.wav").write_bytes(wav())
    (media / "later.wav").write_bytes(wav(8.0))
    secret = tmp_path / "secret.wav"
    secret.write_bytes(wav(8.0, hz=660.0))
    running = client.post("/api/jobs", json={"path": str(media / "long.wav")}).json()
    later = client.post("/api/jobs", json={"path": str(media / "later.wav")}).json()
    until(client, running["id"], lambda j: j["clips_done"] >= 1)
    (media / "later.wav").unlink()
    (media / "later.wav").symlink_to(secret)  # swapped in after the job was accepted
    client.post(f"/api/jobs/{running['id']}/cancel")
    failed = until(client, later["id"], lambda j: j["state"] not in ("queued", "running"))
    assert failed["state"] == "failed" and "allowed folders" in failed["error"] + failed["hint"]
    assert client.get("/api/videos/later").status_code == 404


def test_a_checked_path_is_read_through_its_open_file_whatever_is_swapped_in_later(tmp_path: Path) -> None:
    from m3agent.errors import AccessDeniedError
    from m3agent.server.jobs import held_at_use

    media = tmp_path / "media"
    media.mkdir()
    kept, secret = media / "kept.wav", tmp_path / "secret.wav"
    kept.write_bytes(b"the checked file")
    secret.write_bytes(b"a secret outside")
    with held_at_use(str(kept), [media]) as readable:
        kept.unlink()
        kept.symlink_to(secret)  # swapped between the check and the read
        assert Path(readable).read_bytes() == b"the checked file"
    with pytest.raises(AccessDeniedError, match="allowed folders"), held_at_use(str(kept), [media]):
        pass
    fifo = media / "fifo.wav"
    os.mkfifo(fifo)
    with pytest.raises(AccessDeniedError, match="not a file"), held_at_use(str(fifo), [media]):
        pass


def test_a_path_job_records_its_path_not_the_open_file_it_read(served: tuple[httpx.Client, Settings],
                                                              tmp_path: Path) -> None:
    client, _ = served
    (tmp_path / "media" / "short.wav").write_bytes(wav(1.0))
    job = client.post("/api/jobs", json={"path": str(tmp_path / "media" / "short.wav")}).json()
    assert until(client, job["id"], lambda j: j["state"] not in ("queued", "running"))["state"] == "done"
    assert client.get("/api/videos/short").json()["source"] == str(tmp_path / "media" / "short.wav")
