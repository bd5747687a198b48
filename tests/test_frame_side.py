"""People are placed in the frames their boxes were measured in, whatever ``media.max_frame_side`` the reader runs
with: the ingest stores the sampled frame size with the video, and the answering path (control's graph) and the
REST endpoint read it (issue 47 point 3: control used to assume the default 1280 while the server used the setting)."""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from m3agent.domain import BBox, Clip, EntityKind, FaceObservation, Video
from m3agent.graph.operators import EntityGraph
from m3agent.media import probe
from m3agent.media.frames import scaled_size
from m3agent.media.info import MediaInfo
from store_helpers import DIM, unit_vectors

RIGHT_OF_640 = BBox(400, 100, 480, 200)  # centre x 440: 0.69 of a 640-px frame (right), 0.34 of 1280 (left)


def write_video(path: Path, width: int, height: int, frames: int = 4) -> Path:
    """A few grey frames as MPEG-4 (an encoder every PyAV build has)."""
    import av
    import numpy as np

    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=4)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, 4)
        for k in range(frames):
            image = np.full((height, width, 3), 40 * k, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def test_the_sampled_frame_size_is_stored_with_the_video(tmp_path: Path) -> None:
    info = probe(write_video(tmp_path / "wide.mp4", 320, 176))
    small = info.to_video("v", max_frame_side=160).metadata
    assert (small["frame_width"], small["frame_height"]) == (160, 88)
    assert info.to_video("v", max_frame_side=1280).metadata["frame_width"] == 320, "never upscaled"
    assert "frame_width" not in info.to_video("v").metadata, "without the setting nothing is guessed"
    assert scaled_size(1080, 1920, 640) == (360, 640), "the longer side is capped, portrait too"
    audio_only = MediaInfo("a.wav", 3.0, has_audio=True, has_video=False)
    assert "frame_width" not in audio_only.to_video("a", max_frame_side=640).metadata


def write_face(store: Any, metadata: dict[str, Any], dim: int = DIM) -> Any:
    """Video v (1920x1080 picture) with one face at x 400-480 of the sampled frame, seen 1-3 s."""
    store.add_video(Video("v", "/v.mp4", 10.0, metadata=metadata))
    with store.clip(Clip("v", 0, 0.0, 10.0)) as w:
        face = w.add_entity(EntityKind.FACE, [unit_vectors(1, dim)[0]]).id
        for k in range(5):
            w.add_face(FaceObservation(0, 1.0 + k / 2, RIGHT_OF_640, 0.99, entity_id=face))
    return store


def places(graph: EntityGraph) -> list[str]:
    return [s.horizontal for s in graph.at("v", 2.0).on_screen]


def test_control_and_the_server_place_people_alike_under_a_non_default_frame_side(
        store_url: Callable[[], str], tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
    from fastapi.testclient import TestClient

    from m3agent.control.answering import config_for
    from m3agent.control.run_context import RunContext
    from m3agent.embed import create_embedder
    from m3agent.server.app import create_app
    from m3agent.settings import load_settings
    from m3agent.store import open_store

    url = store_url()
    settings = load_settings(memory=url, embedder="hash", llm="none", media={"max_frame_side": 640},
                             server={"data_dir": str(tmp_path / "server")})
    with open_store(url) as store:
        store.set_embedding_model("test-random", DIM)
        write_face(store, {"width": 1920, "height": 1080, "frame_width": 640, "frame_height": 360})
        run = RunContext(store, create_embedder("hash"), None, "Who is on screen at 0:02?", "v", None,
                         config_for(settings))
        assert places(run.entity_graph()) == ["right"], "the answering path's graph (built without the setting)"
        assert places(EntityGraph(store, max_frame_side=640)) == ["right"]
    with TestClient(create_app(settings, mcp=False, inspector=False), base_url="http://127.0.0.1") as client:
        response = client.get("/api/videos/v/at", params={"t": 2})
    assert response.status_code == 200, response.text
    assert [p["horizontal"] for p in response.json()["on_screen"]] == ["right"]


def test_a_video_stored_before_the_frame_size_is_placed_by_the_setting(make_store: Callable[[], Any]) -> None:
    store = write_face(make_store(), {"width": 1920, "height": 1080})
    assert places(EntityGraph(store, max_frame_side=640)) == ["right"]
    assert places(EntityGraph(store)) == ["left"], "1280-px frames: x 440 is left of 3/8 (480)"


def test_an_answer_and_the_server_place_a_face_by_the_setting_when_the_video_has_no_frame_size(
        store_url: Callable[[], str], tmp_path: Path) -> None:
    """A video stored before the sampled frame size was (no ``frame_width``): the graph ``m3agent ask`` answers
    from (built by ``answer_steps`` from the settings) and the REST endpoint's graph both place its face by
    ``media.max_frame_side`` (before issue 47 control's graph assumed 1280 and said "on the left")."""
    pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
    from fastapi.testclient import TestClient

    from m3agent.control.answering import answer_steps, run_to_answer
    from m3agent.embed import create_embedder
    from m3agent.llm import create_chat_model
    from m3agent.server.app import create_app
    from m3agent.settings import load_settings
    from m3agent.store import open_store

    url = store_url()
    embedder = create_embedder("hash")
    plan = json.dumps({"ask": "count_people", "direction": "any", "sense": "seen",
                       "person": {"kind": "none", "place": "any", "time": "0:02", "scene": "any", "quote": ""}})

    def told(settings: Any, store: Any) -> str:
        chat = create_chat_model("scripted:", replies=[plan])
        answer = run_to_answer(answer_steps("How many people are on screen at 0:02?", store, settings, chat=chat,
                                            embedder=embedder, video_id="v", mode="grounded"))
        assert answer.model.startswith("entity_graph"), answer.text  # the graph decided: its words are the test
        return answer.text

    small = load_settings(memory=url, embedder="hash", llm="none", media={"max_frame_side": 640},
                          server={"data_dir": str(tmp_path / "server")})
    with open_store(url) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        write_face(store, {"width": 1920, "height": 1080}, embedder.dim)
        assert "the person on the right" in told(small, store)
        assert "the person on the left" in told(load_settings(memory=url, embedder="hash", llm="none"), store)
    with TestClient(create_app(small, mcp=False, inspector=False), base_url="http://127.0.0.1") as client:
        response = client.get("/api/videos/v/at", params={"t": 2})
    assert response.status_code == 200, response.text
    assert [p["horizontal"] for p in response.json()["on_screen"]] == ["right"]
