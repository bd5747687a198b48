"""A small real memory (SQLite store + hashing embedder) shared by the control tests.

Video ``v1`` has 12 clips of 30 s. Twelve face entities are created in clip
0, so character ids run past 10 (``<character_1>`` vs ``<character_10>``).
One face is linked to a voice by an equivalence. Memories are written in
later clips: purchases, a name statement, an equivalence bookkeeping line,
and a late name statement (clip 9) that must stay invisible at
``before_clip=4``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.domain import Clip, EntityKind, FaceVoiceLink, LinkSource, Memory, MemoryKind, Video

CLIP_S = 30.0
N_CLIPS = 12


@dataclass
class World:
    """The store, its embedder and lookups a test needs."""

    store: Any
    embedder: Any
    faces: list[int] = field(default_factory=list)
    voice: int = -1
    character_of: dict[int, int] = field(default_factory=dict)
    memory_ids: dict[str, int] = field(default_factory=dict)

    def character(self, face_index: int) -> int:
        return self.character_of[self.faces[face_index]]

    def face_with_character(self, character: int) -> int:
        return next(i for i, f in enumerate(self.faces) if self.character_of[f] == character)


def _vectors(n: int, dim: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [v / np.linalg.norm(v) for v in rng.normal(size=(n, dim)).astype(np.float32)]


def build_world(path: Path) -> World:
    from m3agent.embed import create_embedder
    from m3agent.store import open_store

    store = open_store(str(path))
    embedder = create_embedder("hash")
    store.set_embedding_model(embedder.name, embedder.dim)
    store.add_video(Video("v1", "synthetic", duration_s=N_CLIPS * CLIP_S, title="shop"))
    world = World(store, embedder)
    with store.clip(_clip(0)) as writer:
        for i in range(12):
            world.faces.append(writer.add_entity(EntityKind.FACE, _vectors(2, 128, i)).id)
        world.voice = writer.add_entity(EntityKind.VOICE, _vectors(2, 192, 99)).id
        writer.set_link(FaceVoiceLink(world.faces[2], world.voice, 1.0, LinkSource.MANUAL))
    for character in store.characters():
        for entity in character.entity_ids:
            world.character_of[entity] = character.id
    _write_memories(world)
    return world


def _clip(index: int) -> Clip:
    return Clip("v1", index, index * CLIP_S, (index + 1) * CLIP_S)


def face(world: World, i: int) -> str:
    return f"<face_{world.faces[i]}>"


def memory_plan(world: World) -> dict[int, list[tuple[str, MemoryKind, str, tuple[int, ...]]]]:
    """clip -> [(key, kind, text, entity ids)]. Faces are picked by *character* id 1 and 10."""
    one, ten = world.face_with_character(1), world.face_with_character(10)
    f1, f10 = face(world, one), face(world, ten)
    e1, e10 = world.faces[one], world.faces[ten]
    f2, e2, v = face(world, 2), world.faces[2], world.voice
    return {
        1: [
            ("bread", MemoryKind.EPISODIC, f"{f1} buys a loaf of bread at the bakery counter.", (e1,)),
            ("coat", MemoryKind.EPISODIC, f"{f1} wears a green coat.", (e1,)),
        ],
        2: [
            ("milk", MemoryKind.EPISODIC, f"{f10} buys a bottle of milk at the bakery counter.", (e10,)),
            ("name", MemoryKind.SEMANTIC, f"{f2}'s name is Alice.", (e2,)),
            ("equiv", MemoryKind.SEMANTIC, f"Equivalence: {f2}, <voice_{v}>", (e2, v)),
        ],
        3: [("alice_coffee", MemoryKind.EPISODIC, f"<voice_{v}> says she always drinks black coffee.", (v,))],
        4: [("cashier", MemoryKind.EPISODIC, "The cashier counts coins at the bakery counter.", ())],
        6: [("cake", MemoryKind.EPISODIC, f"{f1} buys a chocolate cake at the bakery counter.", (e1,))],
        9: [
            ("late_name", MemoryKind.SEMANTIC, f"{f10}'s name is Zed.", (e10,)),
            ("late_bread", MemoryKind.EPISODIC, f"{f10} buys bread, bread and more bread.", (e10,)),
        ],
    }


def _write_memories(world: World) -> None:
    plan = memory_plan(world)
    for index in range(1, N_CLIPS):
        with world.store.clip(_clip(index)) as writer:
            for key, kind, text, entities in plan.get(index, []):
                vector = world.embedder.embed([text])[0]
                clip = _clip(index)
                memory = Memory(kind, text, "v1", index, clip.start_s, clip.end_s, entities, embedding=vector)
                world.memory_ids[key] = writer.add_memory(memory)


@contextmanager
def opened_world(folder: Path) -> Iterator[World]:
    """``build_world`` in ``folder``, closed afterwards (each test file wraps it in a fixture)."""
    built = build_world(folder / "memory.db")
    try:
        yield built
    finally:
        built.store.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with opened_world(tmp_path) as built:
        yield built


def test_world_has_characters_past_ten_and_a_face_voice_character(world: World) -> None:
    ids = set(world.character_of.values())
    assert {1, 10} <= ids
    assert world.character_of[world.faces[2]] == world.character_of[world.voice]
