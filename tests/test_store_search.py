"""Vector, keyword and neighbourhood search: correct, filtered, best first, never leaking."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.domain import EntityKind, Memory, MemoryKind, SearchFilter, Video
from m3agent.store import open_store
from m3agent.store.index import memory_vectors
from m3agent.store.protocol import MemoryStore
from m3agent.store.sqlite.rows import fts_query
from m3agent.store.sqlite.store import SQLiteStore
from store_helpers import clip_of, fill, memory, new_store, unit_vectors

VIDEOS = ("a", "b", "c")


def passes(m: Memory, flt: SearchFilter, linked: dict[int, set[int]]) -> bool:
    """Reference semantics of :class:`SearchFilter`, written independently of the SQL."""
    checks = [
        flt.video_ids is None or m.video_id in flt.video_ids,
        flt.before_clip is None or m.clip_index <= flt.before_clip,
        flt.start_s is None or m.end_s >= flt.start_s,
        flt.end_s is None or m.start_s <= flt.end_s,
        flt.kinds is None or m.kind in flt.kinds,
        flt.entity_ids is None or bool(linked.get(m.id, set()) & set(flt.entity_ids)),
        (m.video_id, m.clip_index) not in flt.exclude_clips,
    ]
    return all(checks)


FILTERS = [
    SearchFilter(),
    SearchFilter(video_ids=("a",)),
    SearchFilter(video_ids=("a", "c"), before_clip=3),
    SearchFilter(before_clip=0),
    SearchFilter(start_s=65.0, end_s=100.0),
    SearchFilter(kinds=(MemoryKind.SEMANTIC,)),
    SearchFilter(video_ids=("b",), kinds=(MemoryKind.EPISODIC,), before_clip=5),
    SearchFilter(exclude_clips=frozenset({("a", 0), ("b", 1)})),
    SearchFilter(video_ids=("nope",)),
    SearchFilter(video_ids=()),
]


def exact_top(vectors: np.ndarray, ids: list[int], query: np.ndarray, allowed: set[int], k: int) -> list[int]:
    scores = vectors @ query
    order = [i for i in np.argsort(-scores, kind="stable") if ids[i] in allowed]
    return [ids[i] for i in order[:k]]


@pytest.fixture
def small(make_store: Callable[[], Any]) -> tuple[MemoryStore, np.ndarray, list[int]]:
    store = make_store()
    vectors = unit_vectors(600, seed=21)
    ids = fill(store, vectors, videos=VIDEOS, per_clip=20)
    return store, vectors, ids


def test_vector_search_is_exact_and_best_first_on_a_small_store(
    small: tuple[MemoryStore, np.ndarray, list[int]],
) -> None:
    store, vectors, ids = small
    everything = set(ids)
    for seed in range(10):
        query = unit_vectors(1, seed=100 + seed)[0]
        got = store.vector_search(query, 10)
        assert [s.memory.id for s in got] == exact_top(vectors, ids, query, everything, 10)
        scores = [s.score for s in got]
        assert scores == sorted(scores, reverse=True)
        assert np.allclose(scores, [float(vectors[ids.index(s.memory.id)] @ query) for s in got], atol=1e-5)
    top = store.vector_search(vectors[123] * 3.0, 1)[0]  # queries are normalised
    assert top.memory.id == ids[123] and top.score == pytest.approx(1.0, abs=1e-5)


def best_of_queries(vectors: np.ndarray, ids: list[int], queries: np.ndarray, allowed: set[int], k: int) -> list[int]:
    scores = (vectors @ queries.T).max(axis=1)
    order = [i for i in np.argsort(-scores, kind="stable") if ids[i] in allowed]
    return [ids[i] for i in order[:k]]


def test_a_search_with_several_queries_ranks_by_each_memorys_best_cosine(
    small: tuple[MemoryStore, np.ndarray, list[int]],
) -> None:
    store, vectors, ids = small
    flt = SearchFilter(video_ids=("a", "c"), before_clip=3)
    allowed = {m.id for m in store.memories(flt=flt)}
    for seed in range(5):
        queries = unit_vectors(3, seed=200 + seed)
        got = store.vector_search_best(list(queries), 12, flt)
        assert [s.memory.id for s in got] == best_of_queries(vectors, ids, queries, allowed, 12)
        assert np.allclose([s.score for s in got],
                           [float((queries @ vectors[ids.index(s.memory.id)]).max()) for s in got], atol=1e-5)
    one = unit_vectors(1, seed=7)[0]
    def pairs(found: list[Any]) -> list[tuple[int, float]]:
        return [(s.memory.id, s.score) for s in found]

    assert pairs(store.vector_search_best([one], 10)) == pairs(store.vector_search(one, 10))
    assert store.vector_search_best([], 10) == [] and store.vector_search_best([one], 0) == []


def test_filters_follow_their_semantics_everywhere(small: tuple[MemoryStore, np.ndarray, list[int]]) -> None:
    store, vectors, ids = small
    everything = store.memories()
    query = unit_vectors(1, seed=5)[0]
    for flt in FILTERS:  # one store for all filters: filling it is the slow part
        allowed = {m.id for m in everything if passes(m, flt, {})}
        assert {m.id for m in store.memories(flt=flt)} == allowed, flt
        got = [s.memory.id for s in store.vector_search(query, 15, flt)]
        assert got == exact_top(vectors, ids, query, allowed, 15), flt
        assert {i for i, _ in store.iter_memory_vectors(flt)} == allowed, flt
        assert {s.memory.id for s in store.keyword_search("memory number", 1000, flt)} == allowed, flt


def test_entity_filter_and_neighbourhood(make_store: Callable[[], Any]) -> None:
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(30, seed=8)
    linked: dict[int, set[int]] = {}
    with store.clip(clip_of("v1", 0)) as w:
        people = [w.add_entity(EntityKind.FACE, [vectors[i]]).id for i in range(3)]
    for index in range(1, 4):
        clip = clip_of("v1", index)
        with store.clip(clip) as w:
            for j in range(6):
                who = tuple(people[p] for p in range(3) if (index + j) % (p + 2) == 0)
                mid = w.add_memory(memory(clip, f"scene {index}.{j}", vectors[index * 6 + j], entity_ids=who))
                linked[mid] = set(who)
    for entity in people:
        expected = sorted(m for m, who in linked.items() if entity in who)
        assert [m.id for m in store.memories_of_entities([entity])] == expected
        flt = SearchFilter(entity_ids=(entity,), before_clip=2)
        allowed = {m.id for m in store.memories() if passes(m, flt, linked)}
        assert {m.id for m in store.memories_of_entities([entity], SearchFilter(before_clip=2))} == allowed
        assert {s.memory.id for s in store.vector_search(vectors[0], 50, flt)} == allowed
    assert store.memories_of_entities([]) == []


def test_keyword_search_ranks_and_escapes_user_text(make_store: Callable[[], Any]) -> None:
    """BM25 on SQLite, ts_rank_cd on PostgreSQL: the same order on these texts."""
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    texts = [
        "<face_3> pours coffee into a red mug",
        "<face_30> drinks coffee, coffee and more coffee",
        "the e-mail from <voice_4> says AND NOT OR near",
        "a quiet evening with tea",
        'he said "stop" - then left * quickly',
    ]
    clip = clip_of("v1", 0)
    with store.clip(clip) as w:
        for i in range(31):
            w.add_entity(EntityKind.FACE if i < 30 else EntityKind.VOICE, [])
        ids = [w.add_memory(memory(clip, t, unit_vectors(1, seed=i)[0])) for i, t in enumerate(texts)]
    coffee = store.keyword_search("coffee", 5)
    assert [s.memory.id for s in coffee] == [ids[1], ids[0]] and coffee[0].score > coffee[1].score > 0
    assert [s.memory.id for s in store.keyword_search("face_3", 5)] == [ids[0]]  # not face_30
    assert [s.memory.id for s in store.keyword_search("<face_30>", 5)] == [ids[1]]
    assert ids[2] in {s.memory.id for s in store.keyword_search("e-mail", 5)}
    for nasty in ['"', "AND", "OR NOT", "*", "-", "NEAR(", "coffee*", "'; DROP TABLE memories; --", "(", ":", "^"]:
        store.keyword_search(nasty, 5)  # never raises
    assert store.keyword_search("", 5) == [] and store.keyword_search("!!!", 5) == []
    assert store.keyword_search("coffee", 5, SearchFilter(video_ids=("other",))) == []
    assert fts_query('say "AND" now') == '"say" OR "and" OR "now"'


@pytest.fixture
def ann_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SQLiteStore, np.ndarray, list[int]]:
    """A store big enough (thresholds lowered) that searches go through the HNSW graph (built on one thread: the
    same graph every run)."""
    monkeypatch.setattr(memory_vectors, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(memory_vectors, "EXACT_LIMIT", 300)
    monkeypatch.setattr(memory_vectors, "WAITED_BUILD_THREADS", 1)
    store = new_store(tmp_path)
    vectors = unit_vectors(4000, seed=33)
    ids = fill(store, vectors, videos=VIDEOS, per_clip=50)
    store.build_vector_index()  # searches never wait for the graph: build it (and save it) here
    return store, vectors, ids


def recall(got: list[int], truth: list[int]) -> float:
    return len(set(got) & set(truth)) / max(len(truth), 1)


def test_ann_agrees_with_exact_search(ann_store: tuple[SQLiteStore, np.ndarray, list[int]]) -> None:
    store, vectors, ids = ann_store
    store.vector_search(vectors[0], 1)
    assert store._vectors is not None and store._vectors.ann is not None and len(store._vectors.ann) == 4000
    everything = set(ids)
    recalls = []
    for seed in range(40):
        query = unit_vectors(1, seed=1000 + seed)[0]
        got = [s.memory.id for s in store.vector_search(query, 10)]
        recalls.append(recall(got, exact_top(vectors, ids, query, everything, 10)))
    assert np.mean(recalls) >= 0.95


def test_ann_search_with_several_queries_finds_each_querys_neighbours(
    ann_store: tuple[SQLiteStore, np.ndarray, list[int]],
) -> None:
    store, vectors, ids = ann_store
    everything = set(ids)
    for flt, allowed in ((None, everything), (SearchFilter(before_clip=12), {m.id for m in store.memories(
            flt=SearchFilter(before_clip=12))})):
        recalls = []
        for seed in range(20):
            queries = unit_vectors(2, seed=4000 + seed)
            got = [s.memory.id for s in store.vector_search_best(list(queries), 10, flt)]
            assert set(got) <= allowed
            recalls.append(recall(got, best_of_queries(vectors, ids, queries, allowed, 10)))
        assert np.mean(recalls) >= 0.95


@pytest.mark.parametrize(
    "flt",
    [
        SearchFilter(before_clip=12),  # ~half the rows: oversampled graph search
        SearchFilter(video_ids=("a",), before_clip=2),  # 150 rows: exact over the subset
        SearchFilter(kinds=(MemoryKind.SEMANTIC,), start_s=0.0, end_s=250.0),  # 675 rows (17%): graph
        SearchFilter(video_ids=("b",), exclude_clips=frozenset({("b", 3)})),
    ],
)
def test_filtered_ann_is_accurate_and_never_leaks(
    ann_store: tuple[SQLiteStore, np.ndarray, list[int]], flt: SearchFilter
) -> None:
    store, vectors, ids = ann_store
    rows = {m.id: m for m in store.memories()}
    allowed = {i for i, m in rows.items() if passes(m, flt, {})}
    recalls = []
    for seed in range(25):
        query = unit_vectors(1, seed=2000 + seed)[0]
        got = store.vector_search(query, 10, flt)
        assert all(s.memory.id in allowed for s in got)
        recalls.append(recall([s.memory.id for s in got], exact_top(vectors, ids, query, allowed, 10)))
    assert np.mean(recalls) >= 0.95


def test_filtered_search_falls_back_to_exact_when_the_graph_yields_too_few(
    ann_store: tuple[SQLiteStore, np.ndarray, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors, ids = ann_store
    monkeypatch.setattr(memory_vectors, "MAX_ANN_COUNT", 64)  # the graph can only offer 64 hits
    flt = SearchFilter(before_clip=3)  # 600 rows (15%): about 9 of 64 graph hits survive
    allowed = {m.id for m in store.memories(flt=flt)}
    for seed in range(10):
        query = unit_vectors(1, seed=3000 + seed)[0]
        got = [s.memory.id for s in store.vector_search(query, 10, flt)]
        assert got == exact_top(vectors, ids, query, allowed, 10)


def test_before_clip_is_causal_even_for_queries_equal_to_later_memories(
    ann_store: tuple[SQLiteStore, np.ndarray, list[int]],
) -> None:
    store, vectors, ids = ann_store
    rows = {m.id: m for m in store.memories()}
    rng = np.random.default_rng(0)
    for _ in range(30):
        target = int(rng.integers(len(ids)))
        later = rows[ids[target]]
        if later.clip_index == 0:
            continue
        cut = int(rng.integers(0, later.clip_index))
        got = store.vector_search(vectors[target], 20, SearchFilter(video_ids=(later.video_id,), before_clip=cut))
        assert got and all(s.memory.clip_index <= cut for s in got)
        assert ids[target] not in {s.memory.id for s in got}


def test_snapshot_is_persisted_reloaded_and_caught_up(
    ann_store: tuple[SQLiteStore, np.ndarray, list[int]], tmp_path: Path
) -> None:
    store, vectors, ids = ann_store
    store.vector_search(vectors[0], 1)
    store.delete_memory(ids[7])
    store.close()
    reopened = open_store(str(tmp_path / "memory.db"))
    assert isinstance(reopened, SQLiteStore)
    snapshot = reopened._db.execute("SELECT watermark, n_rows FROM vector_snapshots").fetchone()
    assert snapshot == (ids[-1], 4000)
    clip = clip_of("a", 99)
    fresh = unit_vectors(1, seed=4242)[0]
    with reopened.clip(clip) as w:
        new_id = w.add_memory(memory(clip, "after the snapshot", fresh))
    assert reopened.vector_search(fresh, 1)[0].memory.id == new_id
    index = reopened._vectors
    assert index is not None and index.ann is not None and index.persisted_rows == 4000
    assert ids[7] not in {s.memory.id for s in reopened.vector_search(vectors[7], 10)}


def test_search_inside_a_clip_sees_its_rows_and_survives_rollback(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, unit_vectors(50, seed=1))
    store.vector_search(unit_vectors(1)[0], 1)  # index synced up to the committed rows
    clip = clip_of("v1", 10)
    phantom, real = unit_vectors(2, seed=77)
    with pytest.raises(RuntimeError), store.clip(clip) as w:
        pid = w.add_memory(memory(clip, "phantom", phantom))
        assert store.vector_search(phantom, 1)[0].memory.id == pid  # uncommitted, same transaction
        raise RuntimeError
    with store.clip(clip) as w:
        rid = w.add_memory(memory(clip, "real", real))
    assert rid == pid or not isinstance(store, SQLiteStore)  # SQLite reuses the id after the rollback ...
    top = store.vector_search(phantom, 1)[0]
    assert top.memory.text != "phantom" and store.vector_search(real, 1)[0].memory.text == "real"  # ... safely


def test_readonly_store_searches_without_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_vectors, "ANN_MIN_ROWS", 1000)
    store = new_store(tmp_path)
    vectors = unit_vectors(2000, seed=33)
    ids = fill(store, vectors, videos=VIDEOS, per_clip=50)
    store.close()
    with open_store(str(tmp_path / "memory.db"), readonly=True) as ro:
        assert isinstance(ro, SQLiteStore)
        assert ro.vector_search(vectors[5], 1)[0].memory.id == ids[5]
        index = ro._vectors
        assert index is not None
        index.wait()  # the graph built in the background is kept in memory only
        assert index.ann is not None and ro.vector_search(vectors[6], 1)[0].memory.id == ids[6]
    check = open_store(str(tmp_path / "memory.db"))
    assert isinstance(check, SQLiteStore)
    assert check._db.execute("SELECT count(*) FROM vector_snapshots").fetchone()[0] == 0
