"""Builders shared by the memorize tests: a real SQLite store with face/voice entities, clip inputs.

Entities are created through the store's clip writer like identity
resolution does; a clip's observations are ``FaceTrack``/``VoiceSegment``
values carrying entity ids. No tests live here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from m3agent.domain import (
    BBox,
    Clip,
    EntityKind,
    FaceObservation,
    FaceTrack,
    FaceVoiceLink,
    Memory,
    MemoryKind,
    Video,
    VoiceSegment,
)
from m3agent.memorize import ClipInput, WriterOutput
from m3agent.memorize.embedding import ensure_embedding_model
from m3agent.memorize.rules import WriteRules, WriteStats, apply_write_rules
from m3agent.store import open_store
from m3agent.store.sqlite.store import SQLiteStore

VIDEO = "v1"
CLIP_S = 30.0


@functools.cache
def minilm() -> Any:
    """The real packaged MiniLM embedder (loaded once per test process)."""
    from m3agent.embed import create_embedder

    return create_embedder("minilm", threads=1)


def clip_of(index: int) -> Clip:
    return Clip(VIDEO, index, index * CLIP_S, (index + 1) * CLIP_S)


def new_store(tmp_path: Path, embedder: Any) -> SQLiteStore:
    store = open_store(str(tmp_path / "memory.db"))
    assert isinstance(store, SQLiteStore)
    ensure_embedding_model(store, embedder)
    store.add_video(Video(VIDEO, "/media/v1.mp4", duration_s=600.0))
    return store


def add_entities(store: SQLiteStore, clip: Clip, kinds: Sequence[EntityKind]) -> list[int]:
    """Entities first seen in ``clip`` (the clip is committed with nothing else)."""
    rng = np.random.default_rng(len(kinds))
    with store.clip(clip) as writer:
        return [writer.add_entity(kind, [rng.standard_normal(8).astype(np.float32)]).id for kind in kinds]


def face_track(clip: Clip, entity: int, times: Sequence[float], crop: bytes | None = None,
               number: int = 0) -> FaceTrack:
    obs = tuple(FaceObservation(clip_index=clip.index, time_s=t, bbox=BBox(0, 0, 60, 60), det_score=0.99,
                                quality=0.5, track=number, entity_id=entity, crop_jpeg=crop) for t in times)
    return FaceTrack(clip_index=clip.index, track=number, observations=obs, best=obs[:1])


def speech(clip: Clip, entity: int | None, start: float, end: float, text: str) -> VoiceSegment:
    return VoiceSegment(clip_index=clip.index, start_s=clip.start_s + start, end_s=clip.start_s + end, text=text,
                        entity_id=entity)


def clip_input(store: SQLiteStore, clip: Clip, *, faces: Sequence[int] = (), voices: Sequence[int] = (),
               **extra: Any) -> ClipInput:
    """A clip where each face is seen for 10 s (2 fps) and each voice says one sentence."""
    tracks = tuple(face_track(clip, e, [clip.start_s + 2 + i / 2 for i in range(20)], number=i)
                   for i, e in enumerate(faces))
    segments = tuple(speech(clip, e, 3 + 5 * i, 6 + 5 * i, f"Sentence number {i} of this clip.")
                     for i, e in enumerate(voices))
    characters = tuple(store.characters(before_clip=clip.index, video_id=clip.video_id))
    return ClipInput(clip=clip, tracks=tracks, voices=segments, characters=characters, **extra)


def memory(clip: Clip, text: str, kind: MemoryKind = MemoryKind.SEMANTIC) -> Memory:
    from m3agent import tags

    return Memory(kind=kind, text=text, video_id=clip.video_id, clip_index=clip.index, start_s=clip.start_s,
                  end_s=clip.end_s, entity_ids=tags.entity_ids(text))


def write(store: SQLiteStore, clip: Clip, texts: Sequence[str], *, faces: Sequence[int] = (),
          voices: Sequence[int] = (), kind: MemoryKind = MemoryKind.SEMANTIC,
          equivalences: Sequence[FaceVoiceLink] = (), av: Sequence[FaceVoiceLink] = (),
          embedder: Any = None, rules: WriteRules | None = None) -> WriteStats:
    """Commit ``clip`` with the given memories passed through the write rules (``av`` links written first)."""
    with store.clip(clip) as writer:
        for link in av:
            writer.set_link(link)
        inp = clip_input(store, clip, faces=faces, voices=voices)
        output = WriterOutput(memories=tuple(memory(clip, t, kind) for t in texts), equivalences=tuple(equivalences))
        return apply_write_rules(store, writer, inp, output, embedder or minilm(), rules)


def semantic_rows(store: SQLiteStore) -> list[Memory]:
    return [m for m in store.memories(VIDEO) if m.kind == MemoryKind.SEMANTIC]
