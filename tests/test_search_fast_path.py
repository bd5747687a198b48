"""The fast search paths return what the plain ones return, on real text (LoCoMo turns) and real questions:
a filter that restricts nothing takes the unfiltered paths with the same top-k, and the API's kept store with its
cached character index answers as a fresh store and a fresh index do."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import m3agent
from m3agent.bench.locomo.data import load_locomo
from m3agent.bench.locomo.ingest import ingest_sample
from m3agent.control import MemorySearcher
from m3agent.domain import SearchFilter
from m3agent.embed.hashing import HashingEmbedder
from m3agent.store import open_store
from m3agent.store.index import memory_vectors
from m3agent.store.sqlite.rows import fts_query
from m3agent.store.sqlite.store import SQLiteStore

K = 10


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, list[str]]:
    """Two LoCoMo conversations as memories (about 1,100 turns), and their questions."""
    samples = load_locomo(data_dir / "locomo" / "locomo10.json")[:2]
    path = tmp_path_factory.mktemp("fast") / "memory.db"
    embedder = HashingEmbedder(256)
    with open_store(str(path)) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        for sample in samples:
            ingest_sample(store, embedder, sample)
    raw = json.loads((data_dir / "locomo" / "locomo10.json").read_text())[:2]
    questions = [q["question"] for s in raw for q in s["qa"] if q.get("question")][::7]
    return path, questions


def old_keyword_ids(store: SQLiteStore, text: str, flt: SearchFilter) -> list[int]:
    """The keyword query as it ran before: FTS joined with the memories under the (empty) filter."""
    rows = store._db.execute(
        "SELECT f.rowid FROM memories_fts f JOIN memories m ON m.id = f.rowid"
        " WHERE memories_fts MATCH ? AND TRUE ORDER BY f.rank LIMIT ?", (fts_query(text), K)).fetchall()
    return [r[0] for r in rows]


def exact_scores(store: SQLiteStore, query: np.ndarray) -> list[float]:
    """The best ``K`` cosines over every stored row (numpy), for the reference."""
    vectors = np.asarray([v for _, v in store.iter_memory_vectors()])
    return sorted((vectors @ query).tolist(), reverse=True)[:K]


@pytest.mark.parametrize("graph", [False, True])
def test_an_empty_filter_ranks_as_before(locomo: tuple[Path, list[str]], graph: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path, questions = locomo
    if graph:
        monkeypatch.setattr(memory_vectors, "ANN_MIN_ROWS", 500)
        # one thread: the same graph every run (several threads insert in any order, and an approximate
        # graph may then miss a neighbour that this exact-score check would catch)
        monkeypatch.setattr(memory_vectors, "WAITED_BUILD_THREADS", 1)
    embedder = HashingEmbedder(256)
    with open_store(str(path), readonly=True) as store:
        assert isinstance(store, SQLiteStore)
        store.build_vector_index()
        assert store._vectors is not None and (store._vectors.ann is not None) == graph
        empty = SearchFilter()
        for question in questions:
            words = " ".join(w for w in question.split() if len(w) > 3)
            new = [s.memory.id for s in store.keyword_search(words, K, empty)]
            assert new == old_keyword_ids(store, words, empty)
            assert new == [s.memory.id for s in store.keyword_search(words, K, None)]
            vector = embedder.embed([question])[0]
            hits = store.vector_search(vector, K, empty)
            assert [s.memory.id for s in hits] == [s.memory.id for s in store.vector_search(vector, K, None)]
            assert np.allclose([s.score for s in hits], exact_scores(store, vector), atol=1e-6)  # ties may swap


def test_the_api_kept_store_answers_as_fresh_ones(locomo: tuple[Path, list[str]]) -> None:
    path, questions = locomo
    with m3agent.open(path, embedder="hash") as agent:
        for question in questions[:25]:
            kept = agent.search(question, K)
            with open_store(str(path), readonly=True) as fresh:
                plain = MemorySearcher(fresh, HashingEmbedder(256)).search("search_memory", question, K)
            assert [(h.memory.id, h.score) for h in kept.hits] == [(h.memory.id, h.score) for h in plain.hits]
            assert [c.clip for c in kept.clips] == [c.clip for c in plain.clips]


def filtered_exact(store: SQLiteStore, query: np.ndarray, flt: SearchFilter, k: int = K) -> list[tuple[int, float]]:
    """The best ``k`` (id, cosine) among the rows passing ``flt`` in SQL (numpy over every such row)."""
    from m3agent.store.sqlite.rows import filter_sql

    where, params = filter_sql(flt)
    rows = store._db.execute(f"SELECT m.id, m.embedding FROM memories m WHERE {where}", params).fetchall()
    vectors = np.frombuffer(b"".join(r[1] for r in rows), "<f4").reshape(len(rows), -1)
    scores = vectors @ query
    order = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i][0]))[:k]
    return [(int(rows[i][0]), float(scores[i])) for i in order]


@pytest.mark.parametrize("path_taken", ["exact", "graph"])
def test_person_scoped_search_is_exact(locomo: tuple[Path, list[str]], path_taken: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's filter (alone, or with a video, clip bound, time range and excluded clips) returns the
    exact top-k of that person's memories: over the mirror rows of their memory ids, and with the graph
    (EXACT_LIMIT lowered so that the filter keeps more rows than it, and graph hits made free)."""
    path, questions = locomo
    monkeypatch.setattr(memory_vectors, "ANN_MIN_ROWS", 500)
    monkeypatch.setattr(memory_vectors, "WAITED_BUILD_THREADS", 1)
    if path_taken == "graph":
        monkeypatch.setattr(memory_vectors, "EXACT_LIMIT", 50)
        monkeypatch.setattr(memory_vectors, "GRAPH_HIT_ROWS", 0)
    graph_searches: list[int] = []
    original = memory_vectors.MemoryVectors._ann_search

    def spy(self: memory_vectors.MemoryVectors, *args: object) -> object:
        graph_searches.append(1)
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(memory_vectors.MemoryVectors, "_ann_search", spy)
    embedder = HashingEmbedder(256)
    with open_store(str(path), readonly=True) as store:
        assert isinstance(store, SQLiteStore)
        store.build_vector_index()
        assert store._vectors is not None and store._vectors.ann is not None
        people = [int(r[0]) for r in store._db.execute("SELECT DISTINCT entity_id FROM edges ORDER BY 1")]
        video = store._db.execute("SELECT video_id FROM videos ORDER BY id LIMIT 1").fetchone()[0]
        assert len(people) >= 2
        filters = [SearchFilter(entity_ids=(people[0],)), SearchFilter(entity_ids=(people[1], people[0])),
                   SearchFilter(entity_ids=(people[0],), video_ids=(video,), before_clip=20),
                   SearchFilter(entity_ids=tuple(people), start_s=100.0, end_s=5000.0,
                                exclude_clips=frozenset({(video, 3), (video, 4)}))]
        for flt in filters:
            mirror = store._mirror_filter(flt)
            assert mirror is not None and mirror.memory_ids is not None
            with store._vectors.lock:
                rows = store._vectors.mirror.rows(mirror)
                assert rows.tolist() == np.flatnonzero(store._vectors.mirror.mask(mirror)).tolist()
            assert path_taken == "exact" or len(rows) > memory_vectors.EXACT_LIMIT
            for question in questions[:20]:
                vector = embedder.embed([question])[0]
                query = vector / np.linalg.norm(vector)
                hits = store.vector_search(vector, K, flt)
                want = filtered_exact(store, query, flt)
                assert np.allclose([s.score for s in hits], [s for _, s in want], atol=1e-6)  # ties may swap
                assert {s.memory.id for s in hits} <= {i for i, _ in filtered_exact(store, query, flt, 2 * K)}
        assert bool(graph_searches) == (path_taken == "graph")
