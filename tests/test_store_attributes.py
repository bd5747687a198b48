"""Measured descriptions of entities and the shots of clips, on both backends: written with the clip, read back
typed, refused when malformed, and kept consistent by merges (and their undo), splits and deletions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from m3agent.domain import BBox, EntityAttribute, EntityKind, FaceObservation, ShotRecord, Video, VoiceSegment
from m3agent.errors import IntegrityError
from store_helpers import clip_of, unit_vectors

MakeStore = Callable[[], Any]
BOX = BBox(0, 0, 50, 50)


def attribute(entity_id: int, clip: int, name: str, value: str, confidence: float = 0.9, weight: float = 10.0,
              video_id: str = "v1") -> EntityAttribute:
    return EntityAttribute(entity_id, video_id, clip, name, value, confidence, weight, f"{name} measured")


def two_clips(make_store: MakeStore) -> tuple[Any, dict[str, int]]:
    """Faces a (clips 0 and 1) and b (clip 1), voice c (clip 0), each with attributes of the clips it is in."""
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(3, seed=5)
    with store.clip(clip_of("v1", 0)) as w:
        a = w.add_entity(EntityKind.FACE, [vectors[0]]).id
        c = w.add_entity(EntityKind.VOICE, [vectors[2]]).id
        for k in range(4):
            w.add_face(FaceObservation(0, 1.0 + k, BOX, 0.9, entity_id=a))
        w.add_voice(VoiceSegment(0, 2.0, 6.0, "hello", entity_id=c))
        w.add_attribute(attribute(a, 0, "position", "left", weight=4))
        w.add_attribute(attribute(c, 0, "voice_register", "low", 0.8, 3.5))
        w.add_shot(ShotRecord("v1", 0, 0.0, 12.0, False, "still", 0.95, 0.0002, "median 0.02 %"))
        w.add_shot(ShotRecord("v1", 0, 12.0, 30.0, True, "live", 0.9, 0.05))
    with store.clip(clip_of("v1", 1)) as w:
        b = w.add_entity(EntityKind.FACE, [vectors[1]]).id
        for k in range(3):
            w.add_face(FaceObservation(1, 31.0 + k, BOX, 0.9, entity_id=a))
            w.add_face(FaceObservation(1, 31.0 + k, BOX, 0.9, entity_id=b))
        w.add_attribute(attribute(a, 1, "position", "left", weight=3))
        w.add_attribute(attribute(b, 1, "position", "right", weight=3))
        w.add_attribute(attribute(b, 1, "depth", "background", 0.7, 3))
    return store, {"a": a, "b": b, "c": c}


def rows(store: Any, *entity_ids: int) -> list[tuple[int, int, str, str, float]]:
    return [(r.entity_id, r.clip_index, r.name, r.value, round(r.weight, 3))
            for r in store.entity_attributes(entity_ids)]


def test_attributes_and_shots_are_read_back_typed(make_store: MakeStore) -> None:
    store, ids = two_clips(make_store)
    got = store.entity_attributes([ids["c"], ids["a"], 999])
    assert [(r.entity_id, r.clip_index, r.name, r.value) for r in got] == [
        (ids["a"], 0, "position", "left"), (ids["a"], 1, "position", "left"), (ids["c"], 0, "voice_register", "low")]
    voice = got[-1]
    assert (voice.video_id, voice.confidence, voice.weight, voice.evidence) == ("v1", 0.8, 3.5,
                                                                                "voice_register measured")
    assert voice.id > 0 and store.entity_attributes([]) == []
    shots = store.shots("v1")
    assert [(s.start_s, s.end_s, s.cut, s.kind) for s in shots] == [(0.0, 12.0, False, "still"),
                                                                     (12.0, 30.0, True, "live")]
    assert (shots[0].confidence, shots[0].motion, shots[0].evidence) == (0.95, 0.0002, "median 0.02 %")
    assert shots[1].motion == 0.05 and store.shots("other") == []
    assert store.counts()["entity_attributes"] == 5 and store.counts()["shots"] == 2


def test_one_row_per_entity_clip_and_name_and_malformed_rows_are_refused(make_store: MakeStore) -> None:
    store, ids = two_clips(make_store)
    store.add_video(Video("v2", "/y.mp4"))
    with store.clip(clip_of("v2", 0)) as w:
        w.add_attribute(attribute(ids["a"], 0, "position", "centre", video_id="v2"))
        w.add_attribute(attribute(ids["a"], 0, "position", "right", 0.6, video_id="v2"))  # replaces the first
        for bad in (attribute(ids["a"], 0, "position", "left", confidence=1.5, video_id="v2"),
                    attribute(ids["a"], 0, "position", "left", weight=-1, video_id="v2"),
                    attribute(ids["a"], 0, "position", " ", video_id="v2"),
                    attribute(ids["a"], 3, "position", "left", video_id="v2"),  # another clip
                    attribute(ids["a"], 0, "position", "left", video_id="v1")):
            with pytest.raises(IntegrityError):
                w.add_attribute(bad)
        with pytest.raises(IntegrityError):
            w.add_shot(ShotRecord("v2", 0, 0.0, 5.0, False, "moving"))
        with pytest.raises(IntegrityError):
            w.add_shot(ShotRecord("v2", 0, 5.0, 1.0, False, "live"))
        w.add_shot(ShotRecord("v2", 0, 0.0, 5.0, False, "uncertain"))
        w.add_shot(ShotRecord("v2", 0, 0.0, 6.0, False, "live", 0.7))  # same start: replaces
    v2 = [r for r in store.entity_attributes([ids["a"]]) if r.video_id == "v2"]
    assert [(r.value, r.confidence) for r in v2] == [("right", 0.6)]
    assert [(s.end_s, s.kind) for s in store.shots("v2")] == [(6.0, "live")]


def test_a_failed_clip_writes_no_attribute(make_store: MakeStore) -> None:
    store, ids = two_clips(make_store)
    with pytest.raises(RuntimeError), store.clip(clip_of("v1", 2)) as w:
        w.add_attribute(attribute(ids["a"], 2, "position", "centre"))
        w.add_shot(ShotRecord("v1", 2, 60.0, 90.0, False, "live"))
        raise RuntimeError("perception failed half way")
    assert [r.clip_index for r in store.entity_attributes([ids["a"]])] == [0, 1]
    assert len(store.shots("v1")) == 2


def test_merge_moves_attributes_and_undo_brings_them_back(make_store: MakeStore) -> None:
    store, ids = two_clips(make_store)
    a, b = ids["a"], ids["b"]
    store.merge_entities(keep=a, absorb=b)
    assert rows(store, a, b) == [(a, 0, "position", "left", 4.0), (a, 1, "depth", "background", 3.0),
                                 (a, 1, "position", "left", 3.0), (a, 1, "position", "right", 3.0)]
    merge = store.entity_merges()[-1]
    store.undo_merge(merge.id)
    assert rows(store, a) == [(a, 0, "position", "left", 4.0), (a, 1, "position", "left", 3.0)]
    assert rows(store, b) == [(b, 1, "depth", "background", 3.0), (b, 1, "position", "right", 3.0)]


def test_split_moves_a_clips_attributes_with_the_majority_of_its_observations(make_store: MakeStore) -> None:
    store, ids = two_clips(make_store)
    a = ids["a"]
    faces = [f for f in store.faces("v1") if f.entity_id == a]
    clip0 = [f.id for f in faces if f.clip_index == 0]
    clip1 = [f.id for f in faces if f.clip_index == 1]
    new = store.split_entity(a, clip0[:3] + clip1[:1]).id  # 3 of 4 sightings of clip 0, 1 of 3 of clip 1
    assert rows(store, a) == [(a, 1, "position", "left", 2.0)]  # kept by the majority, 2/3 of the evidence
    assert rows(store, new) == [(new, 0, "position", "left", 3.0)]  # moved with the majority, 3/4


def test_deleting_an_entity_or_a_video_takes_their_attributes_and_shots(make_store: MakeStore) -> None:
    store, ids = two_clips(make_store)
    store.delete_entity(ids["c"])
    assert store.entity_attributes([ids["c"]]) == []
    store.add_video(Video("v2", "/y.mp4"))
    with store.clip(clip_of("v2", 0)) as w:
        w.add_face(FaceObservation(0, 1.0, BOX, 0.9, entity_id=ids["a"]))
        w.add_attribute(attribute(ids["a"], 0, "position", "centre", video_id="v2"))
        w.add_shot(ShotRecord("v2", 0, 0.0, 30.0, False, "live", 0.8))
    store.delete_video("v1")
    assert [(r.video_id, r.value) for r in store.entity_attributes([ids["a"], ids["b"]])] == [("v2", "centre")]
    assert store.shots("v1") == [] and len(store.shots("v2")) == 1
    assert store.counts()["entity_attributes"] == 1 and store.check() == []
