"""Identity corrections (merge, split, rename) and stable character ids, on both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from m3agent.domain import BBox, Character, EntityKind, FaceObservation, FaceVoiceLink, Video, VoiceSegment
from m3agent.errors import IntegrityError, NotFoundError
from m3agent.store.characters import UnionFind, accepted_pairs, group_characters
from m3agent.store.protocol import MemoryStore
from store_helpers import clip_of, memory, sql, unit_vectors

MakeStore = Callable[[], Any]


def store_with_entities(make_store: MakeStore, count: int) -> tuple[MemoryStore, list[int]]:
    """``count`` face entities (ids 1..count) created in clip 0 of video v1."""
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(count, seed=11)
    with store.clip(clip_of("v1", 0)) as w:
        ids = [w.add_entity(EntityKind.FACE, [vectors[i]]).id for i in range(count)]
    assert ids == list(range(1, count + 1))
    return store, ids


def test_merge_rewrites_tags_token_exact(make_store: MakeStore) -> None:
    store, _ = store_with_entities(make_store, 31)
    clip = clip_of("v1", 1)
    texts = [
        "<face_3> hands <face_30> a cup; face_3 smiles at <face_31>.",
        "<face_30> and <face_31> leave; nobody mentions <face_3>",
        "<face_4> waits for <face_3>",
        "x<face_3 is not a tag but <face_3> is",
    ]
    links = [(3, 30, 31), (30, 31, 3), (4, 3), (3,)]
    with store.clip(clip) as w:
        mids = [
            w.add_memory(memory(clip, t, unit_vectors(1, seed=i)[0], entity_ids=e))
            for i, (t, e) in enumerate(zip(texts, links, strict=True))
        ]
    store.merge_entities(keep=4, absorb=3)
    got = [store.get_memory(m).text for m in mids]
    assert got == [
        "<face_4> hands <face_30> a cup; <face_4> smiles at <face_31>.",
        "<face_30> and <face_31> leave; nobody mentions <face_4>",
        "<face_4> waits for <face_4>",
        "x<<face_4> is not a tag but <face_4> is",
    ]
    assert [store.get_memory(m).entity_ids for m in mids] == [(4, 30, 31), (4, 30, 31), (4,), (4,)]
    assert {m.id for m in store.memories_of_entities([30])} == {mids[0], mids[1]}
    assert store.keyword_search("face_3", 5) == []
    assert {s.memory.id for s in store.keyword_search("face_4", 10)} == set(mids)
    assert {s.memory.id for s in store.keyword_search("face_30", 10)} == {mids[0], mids[1]}


def test_merge_moves_observations_bank_edges_and_evidence(make_store: MakeStore) -> None:
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(6, seed=2)
    with store.clip(clip_of("v1", 0)) as w:
        keep = w.add_entity(EntityKind.FACE, [vectors[0]])
        w.add_face(FaceObservation(0, 1.0, BBox(0, 0, 5, 5), 0.9, 0.2, crop_jpeg=b"keep", entity_id=keep.id))
    with store.clip(clip_of("v1", 1)) as w:
        absorb = w.add_entity(EntityKind.FACE, [vectors[1], vectors[2]], name="Bob")
        voice = w.add_entity(EntityKind.VOICE, [vectors[3]])
        w.add_face(FaceObservation(1, 31.0, BBox(0, 0, 5, 5), 0.9, 0.9, crop_jpeg=b"absorb", entity_id=absorb.id))
        w.add_voice(VoiceSegment(1, 31.0, 32.0, "hello", entity_id=voice.id))
        both = w.add_memory(
            memory(clip_of("v1", 1), f"{keep.tag} {absorb.tag}", vectors[4], entity_ids=(keep.id, absorb.id))
        )
        w.set_link(FaceVoiceLink(absorb.id, voice.id, 0.9))
    with pytest.raises(IntegrityError):
        store.merge_entities(keep.id, voice.id)  # kinds differ
    with pytest.raises(IntegrityError):
        store.merge_entities(keep.id, keep.id)
    store.merge_entities(keep.id, absorb.id)
    merged = store.get_entity(keep.id)
    assert (merged.name, merged.first_clip, merged.last_clip, merged.n_observations) == ("Bob", 0, 1, 2)
    assert [len(v) for v in store.entity_bank(keep.id)] == [16, 16, 16]
    assert np.allclose(store.entity_bank(keep.id)[2], vectors[2])
    assert store.entity_crops(keep.id, limit=1) == [b"absorb"]
    assert store.links() == [FaceVoiceLink(keep.id, voice.id, 0.9)]
    assert store.get_memory(both).text == f"{keep.tag} {keep.tag}"
    edge = sql(store, "SELECT weight FROM edges WHERE memory_id = ?", (both,))
    assert edge == [(2.0,)]
    with pytest.raises(NotFoundError):
        store.get_entity(absorb.id)


def test_split_moves_chosen_observations_to_a_new_entity(make_store: MakeStore) -> None:
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(4, seed=4)
    with store.clip(clip_of("v1", 0)) as w:
        entity = w.add_entity(EntityKind.FACE, [vectors[0], vectors[1]])
        a = w.add_face(FaceObservation(0, 1.0, BBox(0, 0, 5, 5), 0.9, embedding=vectors[0], entity_id=entity.id))
    with store.clip(clip_of("v1", 2)) as w:
        b = w.add_face(FaceObservation(2, 61.0, BBox(0, 0, 5, 5), 0.9, embedding=vectors[1], entity_id=entity.id))
    with pytest.raises(IntegrityError):
        store.split_entity(entity.id, [b, 999])
    new = store.split_entity(entity.id, [b])
    assert new.id > entity.id and new.kind is EntityKind.FACE
    assert (new.first_clip, new.last_clip, new.video_id, new.n_observations) == (2, 2, "v1", 1)
    assert [f.entity_id for f in store.faces("v1")] == [entity.id, new.id]
    assert [f.id for f in store.faces("v1")] == [a, b]
    assert np.allclose(store.entity_bank(new.id)[0], vectors[1])
    assert len(store.entity_bank(entity.id)) == 1
    assert {c.entity_ids for c in store.characters()} == {(entity.id,), (new.id,)}


def test_rename_and_missing_entities(make_store: MakeStore) -> None:
    store, ids = store_with_entities(make_store, 2)
    store.rename_entity(ids[0], "Alice")
    assert store.get_entity(ids[0]).name == "Alice"
    assert store.characters()[0].name == "Alice"
    for call in (
        lambda: store.rename_entity(99, "x"),
        lambda: store.delete_entity(99),
        lambda: store.entity_bank(99),
        lambda: store.merge_entities(1, 99),
    ):
        with pytest.raises(NotFoundError):
            call()


def test_union_find_and_latest_evidence() -> None:
    uf = UnionFind([1, 2, 3, 4])
    uf.union(1, 2)
    uf.union(3, 2)
    assert uf.groups() == [[1, 2, 3], [4]]
    evidence = [(1, 2, 0.9), (3, 4, 0.4), (1, 2, 0.0), (5, 6, 0.5)]
    assert accepted_pairs(evidence, 0.5) == [(5, 6)]
    assert accepted_pairs(evidence, 0.4) == [(3, 4), (5, 6)]
    chars = group_characters([1, 2, 5, 6], evidence, {1: 10, 2: 7, 5: 3, 6: 4}, {6: "Eve"}, 0.5)
    assert chars == [Character(3, (5, 6), "Eve"), Character(7, (2,)), Character(10, (1,))]


def test_character_ids_are_stable_as_clips_arrive(make_store: MakeStore) -> None:
    """Ids never renumber; merges keep the smaller id; before_clip replays the past exactly."""
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vec = unit_vectors(1)[0]
    history: dict[int, list[Character]] = {}

    def clip(index: int, new: list[EntityKind], evidence: list[tuple[int, int, float]]) -> list[int]:
        with store.clip(clip_of("v1", index)) as w:
            made = [w.add_entity(kind, [vec]).id for kind in new]
            for face, voice, conf in evidence:
                w.set_link(FaceVoiceLink(face, voice, conf))
        history[index] = store.characters()
        return made

    f1, v2 = clip(0, [EntityKind.FACE, EntityKind.VOICE], [])
    assert [c.entity_ids for c in history[0]] == [(f1,), (v2,)]
    f3, v4 = clip(1, [EntityKind.FACE, EntityKind.VOICE], [(3, 4, 0.9)])  # ids are 1, 2, 3, 4 in order
    assert (f1, v2, f3, v4) == (1, 2, 3, 4)
    id_34 = history[1][-1].id
    assert history[1][-1].entity_ids == (f3, v4)
    clip(2, [], [(f3, v2, 0.8)])  # joins {f3, v4} with {v2}: the smaller id survives
    groups = {c.entity_ids: c.id for c in history[2]}
    assert groups == {(f1,): history[0][0].id, (v2, f3, v4): min(history[0][1].id, id_34)}
    clip(3, [], [(f3, v2, 0.0)])  # revoked: back to the ids of clip 1
    assert history[3] == history[1]
    clip(4, [], [(f1, v4, 0.4)])  # too weak to accept
    assert history[4] == history[1]
    for index, expected in history.items():
        assert store.characters(before_clip=index, video_id="v1") == expected
        assert store.characters(before_clip=index) == expected
    assert store.characters(video_id="other") == []


def test_character_id_survives_merging_its_entities(make_store: MakeStore) -> None:
    store, _ids = store_with_entities(make_store, 3)
    before = {c.entity_ids: c.id for c in store.characters()}
    store.merge_entities(keep=3, absorb=1)
    after = store.characters()
    assert [(c.entity_ids, c.id) for c in after] == [((3,), before[(1,)]), ((2,), before[(2,)])]
