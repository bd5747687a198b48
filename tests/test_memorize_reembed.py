"""Changing the text embedder of a memory: refused until re-embedded, and re-embedding is all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.domain import EntityKind, SearchFilter
from m3agent.embed.hashing import HashingEmbedder
from m3agent.errors import ConfigError
from m3agent.memorize.embedding import ensure_embedding_model, reembed
from m3agent.store import open_store
from m3agent.store.sqlite.store import SQLiteStore
from test_memorize_world import add_entities, clip_of, minilm, new_store, write

FACTS = ["<voice_1> is worried about the budget.", "<voice_1> owns a red bicycle.", "<voice_1>'s name is Ann.",
         "The kitchen has a blue fridge.", "<voice_1> plays the violin every evening."]


def filled(tmp_path: Path) -> SQLiteStore:
    store = new_store(tmp_path, minilm())
    assert add_entities(store, clip_of(0), [EntityKind.VOICE]) == [1]
    write(store, clip_of(2), FACTS, voices=[1])
    return store


def vectors(store: SQLiteStore) -> dict[int, Any]:
    return dict(store.iter_memory_vectors())


def test_reembed_switches_the_model_and_search_follows(tmp_path: Path) -> None:
    store = filled(tmp_path)
    hashing = HashingEmbedder(64)
    with pytest.raises(ConfigError, match="embedded with") as info:
        ensure_embedding_model(store, hashing)
    assert "reembed" in info.value.hint
    seen: list[tuple[int, int]] = []
    assert reembed(store, hashing, batch=2, progress=lambda done, total: seen.append((done, total))) == 5
    assert store.embedding_model() == ("hash-64", 64)
    assert seen == [(2, 5), (4, 5), (5, 5)]
    assert all(len(v) == 64 for v in vectors(store).values())
    [hit] = store.vector_search(hashing.embed(["red bicycle"])[0], 1, SearchFilter(video_ids=("v1",)))
    assert hit.memory.text == "<voice_1> owns a red bicycle."
    ensure_embedding_model(store, hashing)  # now accepted
    with pytest.raises(ConfigError, match="all-MiniLM"):
        write(store, clip_of(3), ["<voice_1> sings."], voices=[1])  # the old embedder is refused now
    write(store, clip_of(3), ["<voice_1> sings."], voices=[1], embedder=hashing)
    store.close()
    with open_store(str(tmp_path / "memory.db")) as reopened:
        assert reopened.embedding_model() == ("hash-64", 64) and len(reopened.memories("v1")) == 6


class FailingEmbedder:
    """Embeds the first batch, then fails (a crash in the middle of a re-embedding)."""

    name, dim = "hash-32", 32

    def __init__(self) -> None:
        self.calls = 0
        self.inner = HashingEmbedder(32)

    def embed(self, texts: list[str]) -> Any:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("embedding server went away")
        return self.inner.embed(texts)


def test_a_failed_reembedding_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    store = filled(tmp_path)
    before = vectors(store)
    with pytest.raises(RuntimeError, match="went away"):
        reembed(store, FailingEmbedder(), batch=2)
    assert store.embedding_model() == (minilm().name, 384)
    after = vectors(store)
    assert after.keys() == before.keys() and all(np.array_equal(after[k], before[k]) for k in before)
    [hit] = store.vector_search(minilm().embed(["a red bicycle"])[0], 1)
    assert hit.memory.text == "<voice_1> owns a red bicycle."
    store.close()
