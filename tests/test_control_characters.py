"""The character index reads only the semantic memories that may state a name, with the same result, on both
backends."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from m3agent.control.people.characters import CharacterIndex, IndexCache, build_index, find_name_statements
from m3agent.domain import EntityKind, FaceVoiceLink, Memory, MemoryKind, SearchFilter, Video
from m3agent.store.protocol import MemoryStore
from m3agent.text import STATED_HINTS
from store_helpers import clip_of, memory, unit_vectors

MakeStore = Callable[[], Any]

SEMANTIC = [  # (clip, text): name statements, hint words that state nothing, and neither
    (0, "<face_1>'s name is Ann"),
    (0, "<voice_2> likes green tea"),
    (1, "<voice_4> is called Bob Lee"),
    (1, "Nametags were handed out; <face_3> renamed the file"),
    (2, "The name of <face_3> is Robert"),
    (2, "<face_1> goes by Annie; 100% sure_of it"),
    (3, "<voice_2> is known as \u201cZo\u00eb\u201d, waves"),
    (3, "<face_3> introduces himself as Rob"),
    (4, "<face_1> NAME IS not a statement; CALLED neither"),
    (4, "<face_5>'s name is Cleo"),  # an unlinked entity: a character of its own
    (5, "<face_1>'s name is Mr. Smith"),  # a title, not a name
]


def _fill(store: MemoryStore) -> None:
    """Two videos: v1 with two linked people and the texts above (also as episodic memories, which the
    index must not read), v2 with one person named in its clip 1."""
    vectors = unit_vectors(64, seed=5)
    rows = iter(vectors)
    for video in ("v1", "v2"):
        store.add_video(Video(video, f"/{video}.mp4"))
    for index in range(6):
        with store.clip(clip_of("v1", index)) as w:
            if index == 0:
                ids = [w.add_entity(kind, [vectors[0]]).id for kind in (EntityKind.FACE, EntityKind.VOICE) * 2]
                w.add_entity(EntityKind.FACE, [vectors[1]])
                w.set_link(FaceVoiceLink(ids[0], ids[1], 1.0))
                w.set_link(FaceVoiceLink(ids[2], ids[3], 1.0))
            for clip, text in SEMANTIC:
                if clip == index:
                    w.add_memory(memory(clip_of("v1", index), text, next(rows), kind=MemoryKind.SEMANTIC,
                                        entity_ids=(1,)))
                    w.add_memory(memory(clip_of("v1", index), text, next(rows), kind=MemoryKind.EPISODIC))
    for index in range(2):
        with store.clip(clip_of("v2", index)) as w:
            if index == 0:
                w.add_entity(EntityKind.FACE, [vectors[2]])
            w.add_memory(memory(clip_of("v2", index), f"<face_6>'s name is {'Dana' if index else 'unknown'}",
                                next(rows), kind=MemoryKind.SEMANTIC, entity_ids=(6,)))


def _old_index(store: MemoryStore, video_id: str | None, before_clip: int | None) -> CharacterIndex:
    """The index as it was built before: every semantic memory of the scope read whole, then tested."""
    new = build_index(store, video_id=video_id, before_clip=before_clip)
    flt = SearchFilter(video_ids=(video_id,) if video_id else None, before_clip=before_clip,
                       kinds=(MemoryKind.SEMANTIC,))
    partial = dataclasses.replace(new, statements=())
    return dataclasses.replace(new, statements=tuple(find_name_statements(store.memories(flt=flt), partial)))


def _plain(memory: Memory) -> tuple[Any, ...]:
    """A memory's fields, its vector as bytes (arrays do not compare with ``==``)."""
    values = dataclasses.astuple(dataclasses.replace(memory, embedding=None))
    return (*values, None if memory.embedding is None else np.asarray(memory.embedding).tobytes())


def _comparable(index: CharacterIndex) -> tuple[Any, ...]:
    statements = tuple((s.character, s.name, _plain(s.memory)) for s in index.statements)
    return (dict(index.character_of), dict(index.entities_of), dict(index.given_names), statements,
            dict(index.entity_tags))


def test_index_equals_the_one_read_from_every_semantic_memory(make_store: MakeStore) -> None:
    store = make_store()
    _fill(store)
    for video_id in (None, "v1", "v2", "nope"):
        for before_clip in (None, 0, 1, 2, 3, 4, 5):
            built = build_index(store, video_id=video_id, before_clip=before_clip)
            assert _comparable(built) == _comparable(_old_index(store, video_id, before_clip)), (video_id,
                                                                                               before_clip)
    built = build_index(store, video_id="v1")
    ann, bob, cleo = (built.character_of[e] for e in (1, 3, 5))
    assert [(s.character, s.name) for s in built.statements] == [
        (ann, "Ann"), (bob, "Bob Lee"), (bob, "Robert"), (ann, "Annie"), (ann, "Zo\u00eb"), (bob, "Rob"),
        (cleo, "Cleo")]
    assert [s.name for s in build_index(store, video_id="v1", before_clip=1).statements] == ["Ann", "Bob Lee"]
    assert [s.name for s in build_index(store, video_id="v2").statements] == ["Dana"]


def test_cached_scopes_take_their_candidates_from_the_whole_memory_read_at_the_same_stamp(
    make_store: MakeStore, monkeypatch: Any
) -> None:
    store = make_store()
    _fill(store)
    scopes = [(v, b) for v in ("v1", "v2", "nope", "") for b in (None, 0, 2, 5)]
    expected = {scope: _comparable(_old_index(store, *scope)) for scope in scopes}
    cache = IndexCache()
    reads: list[Any] = []
    original = store.memories_containing
    monkeypatch.setattr(store, "memories_containing", lambda *a: reads.append(a) or original(*a))
    cache.get(store, None, None, ("one",))
    for scope in scopes:
        assert _comparable(cache.get(store, *scope, ("one",))) == expected[scope], scope
    assert len(reads) == 1  # the whole memory's candidates, once
    cache.get(store, "v1", 3, ("two",))  # another state of the memory: the scope reads its own
    assert len(reads) == 2 and reads[-1][1].video_ids == ("v1",)


def test_memories_containing_is_a_case_sensitive_substring_test_in_sql(make_store: MakeStore) -> None:
    store = make_store()
    _fill(store)
    cases = [STATED_HINTS, ("NAME",), ("%",), ("_of",), ("Zo\u00eb",), ("name", "sure"), ("absent",), ()]
    for flt in (None, SearchFilter(video_ids=("v1",), before_clip=2, kinds=(MemoryKind.SEMANTIC,))):
        every = store.memories(flt=flt)
        for fragments in cases:
            expected = [_plain(m) for m in every if any(f in m.text for f in fragments)]
            assert [_plain(m) for m in store.memories_containing(fragments, flt)] == expected, fragments
    assert len(store.memories_containing(("%",))) == 2  # a literal percent sign, not a wildcard
