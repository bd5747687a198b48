"""The process-shared vector index: built in the background, consistent with the rows after writes, forgets,
a replaced file and a writer killed while it builds or saves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import SearchFilter
from m3agent.store import open_store
from m3agent.store.index import memory_vectors
from m3agent.store.sqlite.store import SQLiteStore
from store_helpers import clip_of, fill, memory, new_store, unit_vectors

VIDEOS = ("a", "b", "c")
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graph from 1,000 rows on (a store of a few thousand rows then covers every path), built on one thread: the
    same graph every run, so the checks against exact search cannot flake on an insertion order."""
    monkeypatch.setattr(memory_vectors, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(memory_vectors, "EXACT_LIMIT", 300)
    monkeypatch.setattr(memory_vectors, "WAITED_BUILD_THREADS", 1)


def top_ids(store: SQLiteStore, query: np.ndarray, k: int = 5) -> list[int]:
    return [s.memory.id for s in store.vector_search(query, k)]


def exact_ids(store: SQLiteStore, query: np.ndarray, k: int = 5) -> list[int]:
    """Reference: every stored row scored in numpy."""
    ids, vectors = zip(*store.iter_memory_vectors(), strict=True)
    scores = np.asarray(vectors) @ query
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


def test_searches_answer_exactly_while_the_graph_builds_then_use_it(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    vectors = unit_vectors(3000, seed=5)
    fill(store, vectors, videos=VIDEOS, per_clip=50)
    store.vector_search(vectors[0], 1)  # starts the build, answers without waiting for it
    index = store._vectors
    assert index is not None
    for i in (3, 1500, 2999):
        assert top_ids(store, vectors[i]) == exact_ids(store, vectors[i])
    index.wait()
    assert index.ann is not None and len(index.ann) == 3000
    saved = store._db.execute("SELECT watermark, n_rows FROM vector_snapshots").fetchone()
    assert saved == (3000, 3000)  # a writable store's background build saved the snapshot


def test_rows_written_and_forgotten_during_the_build_are_caught_up(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    vectors = unit_vectors(2500, seed=6)
    ids = fill(store, vectors, videos=VIDEOS, per_clip=50)
    store.build_vector_index(wait=False)
    index = store._vectors
    assert index is not None
    clip = clip_of("a", 900)
    fresh = unit_vectors(20, seed=99)
    with store.clip(clip) as writer:
        new = [writer.add_memory(memory(clip, f"late {i}", v)) for i, v in enumerate(fresh)]
    for gone in ids[:40]:
        store.delete_memory(gone)
    store.vector_search(fresh[0], 1)  # syncs the new rows and tombstones, maybe before the graph is in
    index.wait()
    assert index.ann is not None
    for i, memory_id in enumerate(new):
        assert top_ids(store, fresh[i], 1) == [memory_id]
    for i in range(40):
        assert ids[i] not in top_ids(store, vectors[i], 10)
    for i in (100, 900, 2400):
        assert top_ids(store, vectors[i]) == exact_ids(store, vectors[i])


def test_stores_of_one_process_share_one_index(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    vectors = unit_vectors(1200, seed=7)
    fill(store, vectors, videos=VIDEOS, per_clip=50)
    store.build_vector_index()
    first = open_store(str(tmp_path / "memory.db"), readonly=True)
    second = open_store(str(tmp_path / "memory.db"), readonly=True)
    assert isinstance(first, SQLiteStore) and isinstance(second, SQLiteStore)
    first.vector_search(vectors[1], 1)
    second.vector_search(vectors[2], 1)
    assert first._vectors is second._vectors is store._vectors
    clip = clip_of("a", 901)
    added = unit_vectors(1, seed=123)[0]
    with store.clip(clip) as writer:
        new_id = writer.add_memory(memory(clip, "added", added))
    assert top_ids(first, added, 1) == [new_id] and top_ids(second, added, 1) == [new_id]
    for each in (first, second, store):
        each.close()


def test_a_replaced_file_is_indexed_anew(tmp_path: Path) -> None:
    """A copy restored over the file (same inode, fewer rows than indexed) is not served from the old index."""
    store = new_store(tmp_path)
    vectors = unit_vectors(1100, seed=8)
    fill(store, vectors[:600], videos=VIDEOS, per_clip=50)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    backup = (tmp_path / "memory.db").read_bytes()
    fill(store, vectors[600:], videos=("d",), per_clip=50)
    store.vector_search(vectors[0], 1)
    store.close()
    reader = open_store(str(tmp_path / "memory.db"), readonly=True)
    assert isinstance(reader, SQLiteStore)
    assert top_ids(reader, vectors[1000], 1) == [1001]
    (tmp_path / "memory.db").write_bytes(backup)  # same inode: the old rows only
    reader.close()
    reader = open_store(str(tmp_path / "memory.db"), readonly=True)
    assert isinstance(reader, SQLiteStore)
    assert all(i <= 600 for i in top_ids(reader, vectors[1000], 10))
    assert top_ids(reader, vectors[5], 1) == [6]
    reader.close()


WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from m3agent.store import open_store
    from m3agent.store.index import memory_vectors
    sys.path.insert(0, sys.argv[3])
    from store_helpers import clip_of, fill, memory, unit_vectors
    memory_vectors.ANN_MIN_ROWS = 1000
    memory_vectors.WAITED_BUILD_THREADS = 1
    store = open_store(sys.argv[1])
    if sys.argv[2] == "build":  # killed while the graph builds in the background
        store.build_vector_index(wait=False)
        print("ready", flush=True)
        time.sleep(60)
    else:  # killed after more writes than the saved snapshot covers
        store.build_vector_index()
        clip = clip_of("a", 902)
        with store.clip(clip) as w:
            for i, v in enumerate(unit_vectors(30, seed=77)):
                w.add_memory(memory(clip, f"after {i}", v))
        store.delete_memory(3)
        print("ready", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("phase", ["build", "writes"])
def test_a_writer_killed_mid_build_or_after_writes_leaves_a_consistent_index(tmp_path: Path, phase: str) -> None:
    store = new_store(tmp_path)
    vectors = unit_vectors(2000, seed=9)
    fill(store, vectors, videos=VIDEOS, per_clip=50)
    store.close()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "memory.db"), phase,
                             str(Path(__file__).parent)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reopened = open_store(str(tmp_path / "memory.db"))
    assert isinstance(reopened, SQLiteStore) and reopened.check() == []
    reopened.build_vector_index()
    index = reopened._vectors
    assert index is not None and index.ann is not None
    rows = {i for i, _ in reopened.iter_memory_vectors()}
    assert index.mirror.n_alive == len(rows) and set(index.mirror.col("ids")[index.mirror.col("alive")]) == rows
    assert 3 not in rows or phase == "build"
    for i in (0, 700, 1999):
        assert top_ids(reopened, vectors[i]) == exact_ids(reopened, vectors[i])
    if phase == "writes":
        after = unit_vectors(30, seed=77)
        assert top_ids(reopened, after[4], 1) == [2005]
    reopened.close()


def test_membership_by_binary_search_agrees_with_isin() -> None:
    from m3agent.store.index.vectors import member_of

    rng = np.random.default_rng(3)
    values = rng.integers(0, 5000, 20_000)
    for ids in (np.unique(rng.integers(0, 5000, 700)), rng.integers(0, 5000, 700), np.empty(0, np.int64),
                np.asarray([4999]), np.asarray([7, 7, 9])):
        assert np.array_equal(member_of(values, ids), np.isin(values, ids))


def test_a_selective_filter_is_scored_exactly_where_the_graph_would_cost_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_vectors, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(memory_vectors, "EXACT_LIMIT", 10)  # below every filter here: the cost decides
    store = new_store(tmp_path)
    vectors = unit_vectors(3000, seed=5)
    fill(store, vectors, videos=("a", "b", "c"), per_clip=50)
    store.build_vector_index()
    index = store._synced_vectors()
    assert index is not None and index.ann is not None
    graph_calls: list[int] = []
    original = index.ann.search
    monkeypatch.setattr(index.ann, "search", lambda q, count: graph_calls.append(count) or original(q, count))
    query = unit_vectors(1, seed=9)[0]
    found = store.vector_search(query, 10, SearchFilter(video_ids=("a",), before_clip=1))  # 100 rows of 3,000
    assert graph_calls == [] and len(found) == 10
    store.vector_search(query, 10)  # no filter: the graph
    assert graph_calls
