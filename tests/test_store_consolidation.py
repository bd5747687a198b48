"""The store side of consolidation: one transaction per unit of clips, sources checked, resumable (both backends)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from m3agent.domain import MemoryKind
from m3agent.errors import IntegrityError
from store_helpers import clip_of, fill, memory, unit_vectors


def _world(make_store: Callable[[], Any]) -> tuple[Any, list[int]]:
    """Video v1, clips 0-2 stored, memories 0..5 (even: episodic, odd: semantic; two per clip)."""
    store = make_store()
    return store, fill(store, unit_vectors(6), per_clip=2)


def test_a_unit_commits_its_facts_sources_and_records(make_store: Callable[[], Any]) -> None:
    store, ids = _world(make_store)
    clips = [clip_of("v1", 0), clip_of("v1", 1)]
    with store.consolidation(clips, "model-x") as writer:
        assert writer.clip == clips[-1], "facts are attached to the unit's last clip"
        fact = writer.add_memory(memory(clips[-1], "<voice_1> likes tea.", unit_vectors(1, seed=9)[0],
                                        kind=MemoryKind.SEMANTIC))
        writer.add_sources(fact, [ids[2], ids[0], ids[0]])
        writer.notes.append("dropped 'x': it names memory ids that were not shown (m9)")
    done = store.consolidated_clips("v1")
    assert sorted(done) == [0, 1] and done[1].model == "model-x"
    assert done[1].notes == ("dropped 'x': it names memory ids that were not shown (m9)",) and done[0].notes == ()
    assert store.memory_sources([fact, ids[0]]) == {fact: (ids[0], ids[2])}
    with pytest.raises(IntegrityError, match="already consolidated"), store.consolidation([clips[1]], "m"):
        pass


def test_sources_must_be_episodic_memories_up_to_the_clip(make_store: Callable[[], Any]) -> None:
    store, ids = _world(make_store)
    with store.consolidation([clip_of("v1", 1)], "m") as writer:
        for bad in (ids[4], ids[1], 10**9):  # a later clip's memory, a semantic one, no memory at all
            with pytest.raises(IntegrityError, match="no episodic memories"):
                writer.add_sources(ids[2], [bad])
    assert store.memory_sources([ids[2]]) == {}


def test_a_failed_unit_leaves_nothing_and_unstored_clips_are_refused(make_store: Callable[[], Any]) -> None:
    store, ids = _world(make_store)
    clip = clip_of("v1", 2)
    with pytest.raises(RuntimeError), store.consolidation([clip], "m") as writer:
        fact = writer.add_memory(memory(clip, "a fact", unit_vectors(1, seed=3)[0], kind=MemoryKind.SEMANTIC))
        writer.add_sources(fact, [ids[4]])
        raise RuntimeError("killed mid-unit")
    assert store.consolidated_clips("v1") == {} and len(store.memories("v1", 2)) == 2
    with pytest.raises(IntegrityError, match="not stored"), store.consolidation([clip_of("v1", 3)], "m"):
        pass
    with pytest.raises(IntegrityError, match="increasing index order"), \
            store.consolidation([clip_of("v1", 1), clip_of("v1", 0)], "m"):
        pass


def test_deleting_a_video_or_a_source_removes_consolidation_rows(make_store: Callable[[], Any]) -> None:
    store, ids = _world(make_store)
    with store.consolidation([clip_of("v1", 1)], "m") as writer:
        writer.add_sources(ids[3], [ids[0], ids[2]])
    store.delete_memory(ids[0])
    assert store.memory_sources([ids[3]]) == {ids[3]: (ids[2],)}
    store.delete_video("v1")
    assert store.consolidated_clips("v1") == {} and store.memory_sources([ids[3]]) == {}
