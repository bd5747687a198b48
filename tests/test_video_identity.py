"""One video id names one file: a different file under a stored id is refused, or (an id derived from the
file's name) gets the next free id; the same file again resumes under its id. Both stores, the pipeline, the
server's uploads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from m3agent.domain import Video
from m3agent.errors import VideoMismatchError
from m3agent.media.fingerprint import file_fingerprint
from m3agent.media.snippets import wav_bytes
from m3agent.pipeline import ingest_source
from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from server_helpers import live_server, until

MakeStore = Callable[[], Any]


def wav(hz: float, seconds: float = 3.0) -> bytes:
    t = np.arange(int(seconds * 8000)) / 8000
    return wav_bytes((0.2 * np.sin(2 * np.pi * hz * t)).astype(np.float32), 8000)


def settings_of(tmp_path: Path) -> Settings:
    return load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                         media={"clip_seconds": 1.0}, perception={"voices": False, "faces": False})


def test_the_fingerprint_tells_files_apart_not_names(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two, copy = tmp_path / "a" / "meeting.wav", tmp_path / "b" / "meeting.wav", tmp_path / "copy.wav"
    one.write_bytes(wav(220))
    two.write_bytes(wav(330))
    copy.write_bytes(one.read_bytes())
    assert file_fingerprint(one) == file_fingerprint(copy) != file_fingerprint(two)
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(3 << 20))
    changed = bytearray(big.read_bytes())
    changed[-10] = 1  # only the last mebibyte differs
    (tmp_path / "big2.bin").write_bytes(bytes(changed))
    assert file_fingerprint(big) != file_fingerprint(tmp_path / "big2.bin")
    assert file_fingerprint("rtsp://camera.local/stream") == ""
    assert file_fingerprint(tmp_path / "missing.wav") == ""


def test_the_store_refuses_another_file_under_a_stored_id(make_store: MakeStore) -> None:
    store = make_store()
    store.add_video(Video("meeting", "/a/meeting.mp4", 60.0, fingerprint="v1:10:aa"))
    store.add_video(Video("meeting", "/moved/meeting.mp4", 60.0, fingerprint="v1:10:aa"))  # the same file, moved
    with pytest.raises(VideoMismatchError, match="already holds another file"):
        store.add_video(Video("meeting", "/b/meeting.mp4", 30.0, fingerprint="v1:20:bb"))
    kept = store.get_video("meeting")
    assert (kept.source, kept.duration_s, kept.fingerprint) == ("/moved/meeting.mp4", 60.0, "v1:10:aa")
    store.add_video(Video("stream", "rtsp://camera/live"))  # no fingerprint: a stream, never refused
    store.add_video(Video("stream", "rtsp://camera/live", fingerprint=""))
    store.add_video(Video("old", "/old.mp4"))  # stored before fingerprints: the next ingest stamps it
    store.add_video(Video("old", "/old.mp4", fingerprint="v1:1:cc"))
    assert store.get_video("old").fingerprint == "v1:1:cc"


def test_ingest_never_mixes_two_files_under_one_id(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tmp_path / "a" / "meeting.wav", tmp_path / "b" / "meeting.wav"
    first.write_bytes(wav(220))
    second.write_bytes(wav(330, seconds=4.0))
    report = ingest_source(settings, str(first), show_progress=False, max_clips=2)
    assert report.video_id == "meeting" and report.clips_done == 2
    with pytest.raises(VideoMismatchError):
        ingest_source(settings, str(second), show_progress=False)
    other = ingest_source(settings, str(second), show_progress=False, new_id_on_clash=True)
    assert other.video_id == "meeting-2" and other.clips_done == 4 and other.clips_already_done == 0
    assert any("'meeting' already names another file" in p for p in other.problems)
    again = ingest_source(settings, str(first), show_progress=False, new_id_on_clash=True)
    assert (again.video_id, again.clips_already_done, again.clips_done) == ("meeting", 2, 1)  # resumed
    from m3agent.store import open_memory

    with open_memory(settings) as store:
        sources = {v.video_id: v.source for v in store.videos()}
        clips = {vid: len(store.clips(vid)) for vid in sources}
    assert sources == {"meeting": str(first), "meeting-2": str(second)}
    assert clips == {"meeting": 3, "meeting-2": 4}


def test_two_uploads_of_one_name_become_two_videos(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    with live_server(create_app(settings, mcp=False)) as url, httpx.Client(base_url=url, timeout=60) as client:
        jobs = []
        for hz in (220, 330):
            answer = client.post("/api/jobs/upload", files={"file": ("meeting.wav", wav(hz), "audio/wav")})
            assert answer.status_code == 202, answer.text
            jobs.append(answer.json())
        finished = [until(client, job["id"], lambda j: j["state"] not in ("queued", "running")) for job in jobs]
        assert [j["state"] for j in finished] == ["done", "done"]
        assert [j["video_id"] for j in finished] == ["meeting", "meeting-2"]
        answer = client.post("/api/jobs/upload", files={"file": ("other.wav", wav(440), "audio/wav")},
                             data={"video_id": "meeting"})  # an id asked for is never moved: refused
        refused = until(client, answer.json()["id"], lambda j: j["state"] not in ("queued", "running"))
        assert refused["state"] == "failed" and "already holds another file" in refused["error"]
        videos = client.get("/api/videos").json()["items"]
        assert sorted(v["video_id"] for v in videos) == ["meeting", "meeting-2"]
        assert len({v["source"] for v in videos}) == 2
