"""The fast search paths return what the plain ones return, on real text (LoCoMo turns) and real questions:
a filter that restricts nothing takes the unfiltered paths with the same top-k, and the API's kept store with its
cached character index answers as a fresh store and a fresh index do."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import m3agent
from m3agent.bench.locomo_data import load_locomo
from m3agent.bench.locomo_ingest import ingest_sample
from m3agent.control import MemorySearcher
from m3agent.domain import SearchFilter
from m3agent.embed.hashing import HashingEmbedder
from m3agent.store import memory_vectors, open_store
from m3agent.store.sqlite import SQLiteStore
from m3agent.store.sqlite_rows import fts_query

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
