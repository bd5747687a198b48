"""Shared builders for the store tests: real stores (SQLite files, PostgreSQL databases), unit vectors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from m3agent.domain import Clip, Memory, MemoryKind, Video
from m3agent.store import open_store
from m3agent.store.protocol import MemoryStore
from m3agent.store.sqlite.store import SQLiteStore

DIM = 16


def unit_vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    """``n`` deterministic random float32 unit vectors."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def new_store(tmp_path: Path, name: str = "memory.db", dim: int = DIM) -> SQLiteStore:
    store = open_store(str(tmp_path / name))
    assert isinstance(store, SQLiteStore)
    store.set_embedding_model("test-random", dim)
    return store


def clip_of(video_id: str, index: int, seconds: float = 30.0) -> Clip:
    return Clip(video_id, index, index * seconds, (index + 1) * seconds)


def memory(
    clip: Clip,
    text: str,
    vector: np.ndarray,
    *,
    kind: MemoryKind = MemoryKind.EPISODIC,
    entity_ids: Sequence[int] = (),
) -> Memory:
    return Memory(
        kind=kind,
        text=text,
        video_id=clip.video_id,
        clip_index=clip.index,
        start_s=clip.start_s,
        end_s=clip.end_s,
        entity_ids=tuple(entity_ids),
        embedding=vector,
    )


def fill(
    store: MemoryStore,
    vectors: np.ndarray,
    *,
    videos: Sequence[str] = ("v1",),
    per_clip: int = 10,
) -> list[int]:
    """Store ``vectors`` as memories spread over ``videos`` and their clips, in order; returns ids.

    Row ``i`` goes to video ``videos[(i // per_clip) % len(videos)]``; kinds alternate.
    """
    clip_counter = {v: 0 for v in videos}
    for v in videos:
        store.add_video(Video(v, f"/media/{v}.mp4"))
    ids: list[int] = []
    for start in range(0, len(vectors), per_clip):
        video = videos[(start // per_clip) % len(videos)]
        clip = clip_of(video, clip_counter[video])
        clip_counter[video] += 1
        with store.clip(clip) as writer:
            for i in range(start, min(start + per_clip, len(vectors))):
                kind = MemoryKind.SEMANTIC if i % 2 else MemoryKind.EPISODIC
                ids.append(writer.add_memory(memory(clip, f"memory number {i}", vectors[i], kind=kind)))
    return ids


def file_bytes(path: Path) -> bytes:
    """The database file plus any WAL beside it."""
    data = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def sql(store: MemoryStore, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run raw SQL (``?`` parameters) on either backend, for tests that look under the protocol."""
    if isinstance(store, SQLiteStore):
        return [tuple(r) for r in store._db.execute(query, tuple(params)).fetchall()]
    with store._read() as conn:  # type: ignore[attr-defined]
        cursor = conn.execute(query.replace("?", "%s"), tuple(params)) if params else conn.execute(query)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
