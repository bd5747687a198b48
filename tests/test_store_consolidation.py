"""The store side of consolidation: one transaction per unit of clips, sources checked, resumable (both backends)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from m3agent.domain import MemoryKind
from m3agent.errors import IntegrityError
from store_helpers import clip_of, fill, memory, sql, unit_vectors


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


def _fact(clip: Any, text: str, seed: int) -> Any:
    import dataclasses

    return dataclasses.replace(memory(clip, text, unit_vectors(1, seed=seed)[0], kind=MemoryKind.SEMANTIC),
                               provenance="consolidate/1:m")


def _state(store: Any, video_id: str) -> tuple[Any, ...]:
    """Everything forgetting may touch: memories (weight, last clip), sources, records, changes."""
    memories = [(m.id, m.kind.value, m.weight, m.last_clip_index) for m in store.memories(video_id)]
    changes = sql(store, "SELECT memory_id, clip_index, weight_delta, last_before, last_after"
                         " FROM consolidation_changes WHERE video_id = ? ORDER BY memory_id, clip_index", (video_id,))
    return (memories, store.memory_sources([m[0] for m in memories]), sorted(store.consolidated_clips(video_id)),
            changes)


def _consolidated_world(make_store: Callable[[], Any]) -> tuple[Any, list[int], int, int]:
    """v1 and v2 (clips 0-2 each; per clip an episodic then a semantic memory, neither from consolidation).
    v1 is consolidated in two units that write fact F, reinforce a semantic memory twice and weaken another;
    then an ingest of clip 3 reinforces it again. v2 is consolidated once (fact G)."""
    store = make_store()
    ids = fill(store, unit_vectors(12), videos=("v1", "v2"), per_clip=2)  # v1: 0,1 | 4,5 | 8,9; v2: 2,3 | ...
    with store.consolidation([clip_of("v1", 0), clip_of("v1", 1)], "m") as writer:
        fact = writer.add_memory(_fact(clip_of("v1", 1), "<voice_1> likes tea.", 20))
        writer.add_sources(fact, [ids[0]])
        writer.reinforce(ids[5])  # weight 2, confirmed up to clip 1
        writer.add_sources(ids[5], [ids[4]])
        writer.weaken(ids[1], 0.5, 0.1)  # weight 0.5
    with store.consolidation([clip_of("v1", 2)], "m") as writer:
        writer.reinforce(fact)
        writer.reinforce(ids[5])  # weight 3, confirmed up to clip 2
        writer.add_sources(ids[5], [ids[8]])
    with store.clip(clip_of("v1", 3)) as writer:  # a later ingest confirms it: weight 4, up to clip 3
        writer.reinforce(ids[5])
    with store.consolidation([clip_of("v2", 0)], "m") as writer:
        other = writer.add_memory(_fact(clip_of("v2", 0), "<voice_2> likes coffee.", 21))
        writer.add_sources(other, [ids[2]])
        writer.reinforce(ids[3])
    return store, ids, fact, other


def test_forgetting_a_videos_consolidation_takes_back_exactly_what_it_did(make_store: Callable[[], Any]) -> None:
    from m3agent.domain import ForgottenConsolidation
    from m3agent.errors import NotFoundError

    store, ids, fact, other = _consolidated_world(make_store)
    untouched = _state(store, "v2")
    assert store.get_memory(ids[5]).weight == 4.0
    forgotten = store.forget_consolidation("v1")
    assert forgotten == ForgottenConsolidation("v1", facts=1, clips=3, restored=2)
    weights = {m.id: (m.weight, m.last_clip_index) for m in store.memories("v1")}
    assert fact not in weights, "the fact consolidation wrote is gone"
    assert weights[ids[5]] == (2.0, 3), "its two reinforcements are taken back; the ingest's (clip 3) stays"
    assert weights[ids[1]] == (1.0, 0), "the weakening is taken back"
    assert len(weights) == 6 and all(w == (1.0, ids.index(i) // 4) for i, w in weights.items()
                                     if i not in (ids[5], ids[1]))
    assert store.memory_sources(list(weights)) == {} and store.consolidated_clips("v1") == {}
    assert _state(store, "v2") == untouched, "another video's consolidation is not touched"
    assert store.memory_sources([other]) == {other: (ids[2],)}
    with store.consolidation([clip_of("v1", 0)], "m"):  # consolidated again from the start
        pass
    with pytest.raises(NotFoundError):
        store.forget_consolidation("nope")


def test_forgetting_is_one_transaction(make_store: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from m3agent.store.sql import dialect

    store, _, _, _ = _consolidated_world(make_store)
    before = _state(store, "v1")
    # the last statement fails: the facts, sources and weights changed before it must come back
    monkeypatch.setattr(dialect, "DELETE_CONSOLIDATED", "DELETE FROM no_such_table WHERE video_id = ?")
    with pytest.raises(Exception, match="no_such_table"):
        store.forget_consolidation("v1")
    assert _state(store, "v1") == before
