"""A small real memory for the server tests: two videos, faces with JPEG crops, voices with WAV snippets,
a face-voice link (one character), and memories embedded with the hashing embedder."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from m3agent.domain import (
    BBox,
    Clip,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    Memory,
    MemoryKind,
    Video,
    VoiceSegment,
)
from m3agent.embed.hashing import HashingEmbedder
from m3agent.media.snippets import wav_bytes
from m3agent.store import open_store

EMBEDDER = HashingEmbedder(256)


@dataclass(frozen=True)
class Built:
    face: int
    voice: int
    stranger: int
    memories: list[int]


def jpeg(shade: int) -> bytes:
    import cv2

    image = np.full((64, 48, 3), shade, dtype=np.uint8)
    cv2.rectangle(image, (10, 10), (38, 50), (255 - shade, 80, 40), -1)
    ok, data = cv2.imencode(".jpg", image)
    assert ok
    return bytes(data.tobytes())


def tone(seconds: float = 1.0, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return wav_bytes((0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rate)


def build_memory(path: Path | str, source_dir: Path | None = None) -> Built:
    """Write the memory at ``path`` (a file, or a PostgreSQL URL); videos' sources are files in ``source_dir``
    when given."""
    store = open_store(str(path))
    store.set_embedding_model(EMBEDDER.name, EMBEDDER.dim)
    texts = {
        ("talk", 0): ["<face_{f}> greets the audience and says welcome to the cooking show",
                      "<voice_{v}> says the soup needs more salt and fresh basil"],
        ("talk", 1): ["<face_{f}> chops onions on a wooden board",
                      "<face_{f}> is a chef who loves Italian food"],
        ("walk", 0): ["<face_{s}> walks a dog in the park near the river"],
    }
    ids: list[int] = []
    with store:
        for video in ("talk", "walk"):
            source = str(source_dir / f"{video}.mp4") if source_dir else f"/nowhere/{video}.mp4"
            store.add_video(Video(video, source, duration_s=60.0 if video == "talk" else 30.0))
        with store.clip(Clip("talk", 0, 0.0, 30.0)) as w:
            face = w.add_entity(EntityKind.FACE, [np.eye(128, dtype=np.float32)[0]]).id
            voice = w.add_entity(EntityKind.VOICE, [np.eye(256, dtype=np.float32)[0]]).id
            for i in range(3):
                w.add_face(FaceObservation(0, 2.0 + i, BBox(0, 0, 48, 64), 0.99, quality=0.9 - i / 10, track=0,
                                           embedding=np.eye(128, dtype=np.float32)[0], crop_jpeg=jpeg(40 * i),
                                           entity_id=face))
            w.add_voice(VoiceSegment(0, 3.0, 6.0, "the soup needs more salt", speaker=0,
                                     embedding=np.eye(256, dtype=np.float32)[0], entity_id=voice), tone())
            w.set_link(FaceVoiceLink(face, voice, 0.9, LinkSource.MANUAL, "test"))
            ids += _memories(w, "talk", 0, texts, face, voice, 0)
        with store.clip(Clip("talk", 1, 30.0, 60.0)) as w:
            w.add_face(FaceObservation(1, 40.0, BBox(0, 0, 48, 64), 0.98, quality=0.8, track=0,
                                       crop_jpeg=jpeg(200), entity_id=face))
            ids += _memories(w, "talk", 1, texts, face, voice, 0)
        with store.clip(Clip("walk", 0, 0.0, 30.0)) as w:
            stranger = w.add_entity(EntityKind.FACE, [np.eye(128, dtype=np.float32)[1]]).id
            w.add_face(FaceObservation(0, 5.0, BBox(0, 0, 48, 64), 0.97, quality=0.7, track=0,
                                       embedding=np.eye(128, dtype=np.float32)[1], crop_jpeg=jpeg(90),
                                       entity_id=stranger))
            ids += _memories(w, "walk", 0, texts, face, voice, stranger)
    return Built(face, voice, stranger, ids)


def _memories(writer: object, video: str, clip: int, texts: dict[tuple[str, int], list[str]], face: int,
              voice: int, stranger: int) -> list[int]:
    out = []
    for i, template in enumerate(texts[(video, clip)]):
        text = template.format(f=face, v=voice, s=stranger)
        kind = MemoryKind.SEMANTIC if "is a chef" in text else MemoryKind.EPISODIC
        entities = tuple(e for e in (face, voice, stranger) if f"_{e}>" in text)
        vector = EMBEDDER.embed([text])[0]
        start = clip * 30.0
        out.append(writer.add_memory(Memory(kind, text, video, clip, start + i, start + i + 5, entities,  # type: ignore[attr-defined]
                                            embedding=vector)))
    return out


@contextmanager
def live_server(app: object, host: str = "127.0.0.1") -> Iterator[str]:
    """Run ``app`` under a real uvicorn server on a free port of ``host``; yields its loopback base URL."""
    import threading
    import time

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=0, log_level="warning"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def until(client: Any, job_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 120) -> dict[str, Any]:
    """Poll ``GET /api/jobs/{job_id}`` through ``client`` (a TestClient or an httpx.Client) until ``done(job)``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/api/jobs/{job_id}").json()
        if done(job):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached the condition: {job}")
