"""The REST API over a real SQLite memory (the ASGI app in-process, lifespan included)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
from fastapi.testclient import TestClient

from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from server_helpers import Built, build_memory


def make_settings(tmp_path: Path, **server: Any) -> Settings:
    return load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                         server={"allowed_folders": [str(tmp_path / "media")], **server})


@pytest.fixture()
def built(tmp_path: Path) -> Built:
    (tmp_path / "media").mkdir()
    return build_memory(tmp_path / "memory.db", tmp_path / "media")


@pytest.fixture()
def client(tmp_path: Path, built: Built) -> Iterator[TestClient]:
    app = create_app(make_settings(tmp_path), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        yield c


def test_health_ready_and_docs_list_every_route(client: TestClient) -> None:
    assert client.get("/health").json()["status"] == "ok"
    ready = client.get("/ready").json()
    assert ready == {**ready, "ready": True, "videos": 2, "embedding_model": "hash-256/256", "jobs_active": 0}
    spec = client.get("/openapi.json").json()
    routes = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    for expected in [("/api/videos", "get"), ("/api/jobs", "post"), ("/api/jobs/upload", "post"),
                     ("/api/jobs/{job_id}/cancel", "post"), ("/api/entities/{entity_id}/media/{index}", "get"),
                     ("/api/entities/{entity_id}/split", "post"), ("/api/characters/{character_id}", "patch"),
                     ("/api/search", "post"), ("/api/ask/stream", "post"), ("/api/forget", "post")]:
        assert expected in routes
    docs = client.get("/docs")
    assert docs.status_code == 200 and "openapi.json" in docs.text


def test_videos_clips_and_memories_paginate_and_404_with_hints(client: TestClient, built: Built) -> None:
    page = client.get("/api/videos", params={"limit": 1}).json()
    assert page["total"] == 2 and len(page["items"]) == 1 and page["limit"] == 1
    talk = client.get("/api/videos/talk").json()
    assert [c["index"] for c in talk["clips"]] == [0, 1] and talk["memories"] == 4
    clip = client.get("/api/videos/talk/clips/0").json()
    assert {m["id"] for m in clip["memories"]} == set(built.memories[:2])
    assert clip["faces"][0]["entity"] == built.face and clip["voices"][0]["text"] == "the soup needs more salt"
    assert clip["memories"][0]["text"].startswith("<character_1>")
    missing = client.get("/api/videos/nope")
    assert missing.status_code == 404 and missing.json()["hint"]
    assert client.get("/api/videos/talk/clips/7").status_code == 404
    semantic = client.get("/api/memories", params={"kind": "semantic"}).json()
    assert semantic["total"] == 1 and "chef" in semantic["items"][0]["text"]
    assert client.get(f"/api/memories/{built.memories[0]}").json()["video_id"] == "talk"
    assert client.get("/api/memories/999999").status_code == 404


def test_entity_crops_are_jpeg_and_snippets_wav(client: TestClient, built: Built) -> None:
    face = client.get(f"/api/entities/{built.face}").json()
    assert face["kind"] == "face" and face["media"] == 4 and len(face["observations_list"]) == 4
    crop = client.get(f"/api/entities/{built.face}/media/0")
    assert crop.headers["content-type"] == "image/jpeg" and crop.content[:2] == b"\xff\xd8"
    snippet = client.get(f"/api/entities/{built.voice}/media/0")
    assert snippet.headers["content-type"] == "audio/wav" and snippet.content[:4] == b"RIFF"
    assert client.get(f"/api/entities/{built.voice}/media/3").status_code == 404
    entities = client.get("/api/entities", params={"kind": "voice"}).json()
    assert [e["id"] for e in entities["items"]] == [built.voice]


def test_rename_character_shows_everywhere_then_merge_and_split(client: TestClient, built: Built) -> None:
    before = client.post("/api/search", json={"query": "soup salt", "k": 2}).json()  # caches the character index
    assert "Gina" not in str(before)
    renamed = client.patch("/api/characters/1", json={"name": "Gina"}).json()
    after = client.post("/api/search", json={"query": "soup salt", "k": 2}).json()
    assert "Gina" in str(after), "a rename must reach the searches (the cached index is rebuilt)"
    assert renamed["name"] == "Gina" and set(renamed["entities"]) == {built.face, built.voice}
    assert client.get(f"/api/memories/{built.memories[0]}").json()["text"].startswith("Gina (<character_1>)")
    detail = client.get("/api/characters/1").json()
    assert [f["id"] for f in detail["facts"]] == [built.memories[3]] and detail["events"] == 3
    assert [(a["video_id"], a["clip_index"]) for a in detail["appearances"]] == [("talk", 0), ("talk", 1)]
    assert client.patch("/api/characters/1", json={"name": "  "}).status_code == 422

    merged = client.post(f"/api/entities/{built.face}/merge", json={"absorb": built.stranger}).json()
    assert merged["observations"] == 5
    assert client.get(f"/api/entities/{built.stranger}").status_code == 404
    walk_face = [o["id"] for o in client.get(f"/api/entities/{built.face}").json()["observations_list"]
                 if o["video_id"] == "walk"]
    new = client.post(f"/api/entities/{built.face}/split", json={"observation_ids": walk_face})
    assert new.status_code == 201 and new.json()["observations"] == 1 and new.json()["kind"] == "face"
    assert client.post(f"/api/entities/{built.face}/merge", json={"absorb": built.face}).status_code == 409
    [record] = client.get("/api/merges").json()["items"]
    assert (record["keep"], record["absorbed"], record["source"], record["undone_at"]) == (
        built.face, built.stranger, "manual", None)
    restored = client.post(f"/api/merges/{record['id']}/undo")
    assert restored.status_code == 200 and restored.json()["id"] == built.stranger
    assert client.get("/api/merges").json()["items"][0]["undone_at"]
    assert client.post(f"/api/merges/{record['id']}/undo").status_code == 409
    assert client.post("/api/merges/999/undo").status_code == 404


def test_a_face_and_a_voice_are_linked_by_hand_and_each_line_has_its_audio(client: TestClient, built: Built) -> None:
    assert client.get(f"/api/entities/{built.stranger}").json()["character"] != built.face
    linked = client.post("/api/links", json={"face": built.stranger, "voice": built.voice})
    assert linked.status_code == 201 and {built.stranger, built.voice} <= set(linked.json()["entities"])
    assert client.get(f"/api/entities/{built.stranger}").json()["character"] == linked.json()["id"]
    wrong = client.post("/api/links", json={"face": built.voice, "voice": built.face})
    assert wrong.status_code == 409 and "face_id (a face)" in wrong.json()["message"] and wrong.json()["hint"]
    assert client.post("/api/links", json={"face": 999, "voice": built.voice}).status_code == 404

    [line] = client.get("/api/videos/talk/clips/0").json()["voices"]
    audio = client.get(f"/api/voices/{line['id']}/audio")
    assert audio.status_code == 200 and audio.headers["content-type"] == "audio/wav" and audio.content[:4] == b"RIFF"
    missing = client.get("/api/voices/999/audio")
    assert missing.status_code == 404 and missing.json()["hint"]


def test_search_and_ask_return_evidence_and_the_stream_emits_typed_steps(client: TestClient, built: Built) -> None:
    found = client.post("/api/search", json={"query": "salt in the soup", "k": 3}).json()
    hits = [h for clip in found["clips"] for h in clip["hits"]] if "clips" in found else found["hits"]
    assert hits and hits[0]["memory_id"] == built.memories[1]
    only_walk = client.post("/api/search", json={"query": "salt in the soup", "video_id": "walk"}).json()
    walk_hits = [h for clip in only_walk.get("clips", []) for h in clip["hits"]] or only_walk.get("hits", [])
    assert all(h["video_id"] == "walk" for h in walk_hits)
    assert client.post("/api/search", json={"query": ""}).status_code == 422
    assert client.post("/api/search", json={"query": "x", "video_id": "nope"}).status_code == 404

    answer = client.post("/api/ask", json={"question": "What does the soup need?"}).json()
    assert answer["type"] == "answer" and answer["mode"] == "select" and answer["answered"]
    assert any(e["memory_id"] == built.memories[1] for e in answer["evidence"])

    with client.stream("POST", "/api/ask/stream", json={"question": "What does the soup need?"}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("event: ") for line in stream.iter_lines() if line.startswith("event: ")]
    assert events[-1] == "answer" and len(events) >= 2
    assert client.post("/api/ask/stream", json={"question": "x", "video_id": "nope"}).status_code == 404


def test_forget_video_entity_memory_delete_everything_derived(client: TestClient, built: Built) -> None:
    assert client.post("/api/forget", json={"memory": built.memories[0]}).json() == {
        "deleted": "memory", "id": str(built.memories[0])}
    assert client.get(f"/api/memories/{built.memories[0]}").status_code == 404
    assert client.post("/api/forget", json={"video": "walk", "memory": 1}).status_code == 422
    assert client.delete("/api/videos/walk").json()["deleted"] == "video"
    assert client.get("/api/videos").json()["total"] == 1
    assert client.delete(f"/api/entities/{built.voice}").status_code == 200
    assert client.get(f"/api/entities/{built.voice}/media/0").status_code == 404
    assert client.post("/api/forget", json={"video": "walk"}).status_code == 404


def wait_job(client: TestClient, job_id: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still running after {timeout} s")


def test_jobs_refuse_paths_outside_allowed_folders_and_symlink_escapes(client: TestClient, tmp_path: Path) -> None:
    secret = tmp_path / "secret.mp4"
    secret.write_bytes(b"not for you")
    (tmp_path / "media" / "link.mp4").symlink_to(secret)
    for path in (str(secret), str(tmp_path / "media" / ".." / "secret.mp4"), str(tmp_path / "media" / "link.mp4"),
                 "/etc/passwd"):
        refused = client.post("/api/jobs", json={"path": path})
        assert refused.status_code == 403, path
        assert "outside the allowed folders" in refused.json()["message"]
        assert "allowed_folders" in refused.json()["hint"]
    folder = client.post("/api/jobs", json={"path": str(tmp_path / "media")})
    assert folder.status_code == 403 and "not a file" in folder.json()["message"]
    assert client.post("/api/jobs", json={"url": "file:///etc/passwd"}).status_code == 400
    assert client.post("/api/jobs", json={"path": "a", "url": "http://x"}).status_code == 422
    assert client.get("/api/jobs").json()["total"] == 0


def test_a_job_on_an_unreadable_file_fails_with_a_hint(client: TestClient, tmp_path: Path) -> None:
    bad = tmp_path / "media" / "broken.mp4"
    bad.write_bytes(b"\x00" * 1000)
    job = client.post("/api/jobs", json={"path": str(bad)})
    assert job.status_code == 202 and job.json()["video_id"] == "broken"
    done = wait_job(client, job.json()["id"])
    assert done["state"] == "failed" and done["error"] and done["hint"]


def test_uploads_are_limited_by_size_and_type(tmp_path: Path, built: Built) -> None:
    app = create_app(make_settings(tmp_path, max_upload_mb=0.01), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        big = client.post("/api/jobs/upload", files={"file": ("big.mp4", b"\x00" * (3 << 20), "video/mp4")})
        assert big.status_code == 413 and big.json()["hint"]
        chunked = client.post("/api/jobs/upload", files={"file": ("big.mp4", b"\x00" * 20000, "video/mp4")})
        assert chunked.status_code == 413
        wrong = client.post("/api/jobs/upload", files={"file": ("notes.txt", b"hello", "text/plain")})
        assert wrong.status_code == 415
        fake = client.post("/api/jobs/upload", files={"file": ("fake.mp4", b"\x00" * 1000, "video/mp4")})
        assert fake.status_code == 415 and "readable" in fake.json()["message"]
    assert not any((tmp_path / "memory-server" / "uploads").iterdir())


def test_token_is_required_when_set_and_host_header_is_checked(tmp_path: Path, built: Built) -> None:
    token = "t" * 32
    app = create_app(make_settings(tmp_path, token=token), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/health").status_code == 200
        denied = client.get("/api/videos")
        assert denied.status_code == 401 and denied.headers["www-authenticate"] == "Bearer"
        assert client.get("/api/videos", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/openapi.json").status_code == 401
        ok = client.get("/api/videos", headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.json()["total"] == 2
        assert client.get("/api/videos", headers={"host": "evil.example"}).status_code == 421


def test_jobs_resume_after_a_restart(tmp_path: Path, built: Built) -> None:
    settings = make_settings(tmp_path)
    folder = tmp_path / "memory-server"
    folder.mkdir()
    missing = tmp_path / "media" / "gone.mp4"
    journal = [{"id": "abc", "source": str(missing), "source_kind": "path", "video_id": "gone",
                "state": "running", "created_at": 1.0}]
    (folder / "jobs.json").write_text(json.dumps(journal))
    with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1") as client:
        job = wait_job(client, "abc")
    assert job["resumed"] == 1 and job["state"] == "failed"  # it ran again (the file is gone, so it failed)
    saved = json.loads((folder / "jobs.json").read_text())
    assert saved[0]["state"] == "failed"


def test_the_inspector_asks_a_browser_for_the_token_once(tmp_path: Path, built: Built) -> None:
    token = "k" * 24
    app = create_app(make_settings(tmp_path, token=token), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        page = client.get("/characters", headers={"accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"] == "/login"
        assert client.post("/login", data={"token": "wrong"}).status_code == 401
        signed = client.post("/login", data={"token": token})
        assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
        assert client.get("/characters", headers={"accept": "text/html"}).status_code == 200  # the cookie
        assert client.get("/api/videos").status_code == 200


def test_only_media_inside_allowed_folders_is_served_with_byte_ranges(tmp_path: Path, built: Built) -> None:
    from m3agent.domain import Video
    from m3agent.store import open_store

    (tmp_path / "media" / "talk.mp4").write_bytes(bytes(range(256)) * 40)
    with open_store(str(tmp_path / "memory.db")) as store:
        store.add_video(Video("secret", "/etc/passwd"))
    app = create_app(make_settings(tmp_path), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        part = client.get("/api/videos/talk/media", headers={"range": "bytes=256-511"})
        assert part.status_code == 206 and part.content == bytes(range(256))
        assert client.get("/api/videos/talk").json()["playable"] is True
        assert client.get("/api/videos/secret/media").status_code == 404
        assert client.get("/api/videos/walk/media").status_code == 404  # its file does not exist


def test_cors_is_off_unless_origins_are_configured(tmp_path: Path, built: Built) -> None:
    origin = {"origin": "http://app.example"}
    with TestClient(create_app(make_settings(tmp_path), mcp=False), base_url="http://127.0.0.1") as client:
        assert "access-control-allow-origin" not in client.get("/api/videos", headers=origin).headers
    configured = create_app(make_settings(tmp_path, cors_origins=["http://app.example"]), mcp=False)
    with TestClient(configured, base_url="http://127.0.0.1") as client:
        allowed = client.get("/api/videos", headers=origin)
        assert allowed.headers["access-control-allow-origin"] == "http://app.example"


def test_off_loopback_needs_a_token_and_then_answers_401_without_it(tmp_path: Path, built: Built) -> None:
    import httpx

    from m3agent.errors import ConfigError
    from m3agent.server.security import check_bind
    from server_helpers import live_server

    with pytest.raises(ConfigError, match="token is required"):
        check_bind(make_settings(tmp_path, host="0.0.0.0").server)
    check_bind(make_settings(tmp_path, host="::1").server)  # loopback needs none
    token = "z" * 20
    settings = make_settings(tmp_path, host="0.0.0.0", token=token)
    with live_server(create_app(settings, mcp=False), host="0.0.0.0") as url:
        assert httpx.get(f"{url}/api/videos").status_code == 401
        assert httpx.get(f"{url}/api/videos", headers={"authorization": f"Bearer {token}"}).status_code == 200
        assert httpx.get(f"{url}/health").status_code == 200


def test_start_leaves_the_index_and_the_query_model_loaded(tmp_path: Path, built: Built) -> None:
    """The first search after start reads nothing the start already read: the vector index the start loaded stays
    with the read stores (an index is freed with the last store holding it), and the query embedder is loaded."""
    from m3agent.server.context import ServerContext
    from m3agent.store.index.memory_vectors import shared_vectors

    settings = make_settings(tmp_path)
    ctx = ServerContext(settings)
    ctx.start()
    try:
        assert settings.memory.path is not None
        index = shared_vectors(settings.memory.path, "hash-256", 256)
        assert index.loaded and index.mirror.n_alive > 0  # the start's index, not a new empty one
        assert ctx._embedder is not None
        with ctx.stores.read() as store:
            assert ctx.embedder(store) is ctx._embedder
    finally:
        ctx.stop()


def test_ready_lists_the_search_indexes_still_building(tmp_path: Path, built: Built) -> None:
    """``/ready`` names the background builds searches are waiting for, and none once they are done."""
    from m3agent.store.index.keyword import shared_keywords

    app = create_app(make_settings(tmp_path), mcp=False, inspector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/ready").json()["indexes_building"] == []  # a small memory: FTS5, no graph
        keywords = shared_keywords(Path(str(app.state.ctx.settings.memory.path)))
        hold = threading.Event()
        keywords._builder = threading.Thread(target=hold.wait)  # a build in progress, as a big memory has
        keywords._builder.start()
        try:
            assert client.get("/ready").json()["indexes_building"] == ["keyword index"]
        finally:
            hold.set()
            keywords._builder.join()
        assert client.get("/ready").json()["indexes_building"] == []
