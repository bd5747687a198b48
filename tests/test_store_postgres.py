"""What only the PostgreSQL store has: concurrent writers, server-side indexes, connection errors.

The protocol behaviour itself is tested on both backends by the other test_store_* files.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from m3agent.domain import EntityKind, Video
from m3agent.errors import ConfigError, IntegrityError, StoreError
from m3agent.store import open_store
from m3agent.store.postgres import schema as pg_schema
from m3agent.store.postgres.store import PostgresStore
from store_helpers import DIM, clip_of, fill, memory, unit_vectors

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url(pg_server) -> Callable[[], str]:  # type: ignore[no-untyped-def]
    made: list[str] = []

    def new() -> str:
        made.append(pg_server.database())
        return made[-1]

    yield new
    for url in made:
        pg_server.drop(url)


def match_or_create(store: PostgresStore, video: str, person: np.ndarray, ready: threading.Barrier) -> int:
    """What identity does in a clip: read the entities, match ``person`` or create it (slowly)."""
    with store.clip(clip_of(video, 0)) as writer:
        ready.wait()
        for entity in store.entities(EntityKind.FACE):
            if max(float(v @ person) for v in store.entity_bank(entity.id)) > 0.9:
                return entity.id
        time.sleep(0.3)  # a slow decision: without the identity lock the other worker creates too
        return writer.add_entity(EntityKind.FACE, [person]).id


def test_concurrent_writers_create_one_entity_for_one_new_person(pg_url: Callable[[], str]) -> None:
    url = pg_url()
    workers = [open_store(url) for _ in range(2)]
    assert all(isinstance(w, PostgresStore) for w in workers)
    for i, store in enumerate(workers):
        store.add_video(Video(f"v{i}", f"/v{i}.mp4"))
    person = unit_vectors(1, seed=4)[0]
    ready = threading.Barrier(2)
    found: dict[int, int] = {}
    threads = [threading.Thread(target=lambda i=i: found.__setitem__(i, match_or_create(workers[i], f"v{i}", person,
                                                                                        ready)))  # type: ignore[misc]
               for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert found[0] == found[1]  # the second worker waited, then matched the first one's entity
    assert [e.id for e in workers[0].entities()] == [found[0]]
    waited = sum(w.identity_wait_s for w in workers)  # type: ignore[attr-defined]
    assert waited >= 0.25  # the cost: one clip's identity step
    for store in workers:
        store.close()


def test_a_clip_written_by_two_processes_is_stored_once(pg_url: Callable[[], str]) -> None:
    """The clip row is locked from the start: the second writer waits, then finds the clip done."""
    url = pg_url()
    first, second = open_store(url), open_store(url)
    first.set_embedding_model("test-random", 16)
    first.add_video(Video("v1", "/x.mp4"))
    clip = clip_of("v1", 0)
    outcome: list[str] = []

    def late_writer() -> None:
        try:
            with second.clip(clip) as w:
                w.add_memory(memory(clip, "second", unit_vectors(1, seed=2)[0]))
            outcome.append("wrote")
        except IntegrityError as exc:
            outcome.append(str(exc))

    with first.clip(clip) as w:
        w.add_memory(memory(clip, "first", unit_vectors(1, seed=1)[0]))
        thread = threading.Thread(target=late_writer)
        thread.start()
        time.sleep(0.3)
        assert outcome == []  # waiting on the clip row
    thread.join(30)
    assert len(outcome) == 1 and "already stored" in outcome[0]
    assert [m.text for m in first.memories()] == ["first"]
    first.close()
    second.close()


def test_search_is_served_by_the_hnsw_and_gin_indexes(pg_url: Callable[[], str]) -> None:
    store = open_store(pg_url())
    store.set_embedding_model("test-random", 16)
    vectors = unit_vectors(1500, seed=9)
    ids = fill(store, vectors, videos=("a", "b"), per_clip=100)
    query = unit_vectors(1, seed=10)[0]
    truth = [ids[i] for i in np.argsort(-(vectors @ query))[:10]]
    got = [s.memory.id for s in store.vector_search(query, 10)]
    assert len(set(got) & set(truth)) >= 9  # HNSW recall@10
    with store._read() as conn:  # type: ignore[attr-defined]
        conn.execute("SET LOCAL enable_seqscan = off")  # a table this small may be scanned; the indexes must fit
        vector_plan = conn.execute("EXPLAIN SELECT id FROM memories ORDER BY embedding <=> %s LIMIT 10",
                                   (query,)).fetchall()
        keyword_plan = conn.execute("EXPLAIN SELECT id FROM memories"
                                    " WHERE keywords @@ to_tsquery('simple', 'number')").fetchall()
    assert "memories_embedding_hnsw" in str(vector_plan)
    assert "memories_keywords" in str(keyword_plan)
    store.close()


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreError) as info:
        open_store("postgresql://nobody:secret@/nowhere?host=/nonexistent/socket/dir")
    assert "PostgreSQL runs" in info.value.hint and "secret" not in str(info.value)


def test_doctor_tells_the_truth_about_the_database(pg_url: Callable[[], str]) -> None:
    from m3agent.doctor import run_checks

    url = pg_url()
    open_store(url).close()
    (live,) = [c for c in run_checks(memory=url) if c.name == "memory database (PostgreSQL)"]
    latest = pg_schema.migrations()[-1].version
    assert live.status == "ok" and "pgvector 0.8" in live.detail
    assert f"schema version {latest} of {latest}" in live.detail
    (down,) = [c for c in run_checks(memory="postgresql://x:pw@/none?host=/nonexistent")
               if c.name == "memory database (PostgreSQL)"]
    assert down.status == "error" and down.fix and "pw" not in down.detail
    assert not [c for c in run_checks(memory="mem.db") if c.name == "memory database (PostgreSQL)"]


@pytest.mark.parametrize("size", [1, 2])
def test_the_pool_size_setting_bounds_the_connections(pg_url: Callable[[], str], size: int) -> None:
    """A clip holds a connection until it commits: with one pooled connection a reader waits for it."""
    from m3agent.settings import Settings
    from m3agent.store import open_memory

    events: list[str] = []
    holding, read = threading.Event(), threading.Event()
    with open_memory(Settings(memory=pg_url(), memory_pool_size=size)) as store:
        store.add_video(Video("v", "/v.mp4"))

        def reader() -> None:
            holding.wait(30)
            assert [v.video_id for v in store.videos()] == ["v"]
            events.append("read")
            read.set()

        thread = threading.Thread(target=reader)
        thread.start()
        with store.clip(clip_of("v", 0)):
            holding.set()
            read.wait(2.0 if size == 1 else 30.0)  # with two connections the read needs no wait
            events.append("commit")
        thread.join(30)
    assert events == (["commit", "read"] if size == 1 else ["read", "commit"])


def test_a_pool_size_below_one_is_refused(pg_url: Callable[[], str]) -> None:
    with pytest.raises(ConfigError, match="pool_size"):
        open_store(pg_url(), pool_size=0)


def test_delete_with_compact_leaves_no_byte_of_the_memory_in_the_table_files(pg_url: Callable[[], str]) -> None:
    """A plain DELETE (and autovacuum) leaves the text in free space; ``delete --compact`` rewrites the tables."""
    from click.testing import CliRunner

    from m3agent.cli.main import main
    from pg_helpers import table_bytes

    mark = "zqxcompactmarkzqx"
    url = pg_url()
    with open_store(url) as store:
        store.set_embedding_model("test-random", DIM)
        fill(store, unit_vectors(30, seed=9), videos=("v",))
        with store.clip(clip_of("v", 5)) as writer:
            doomed = writer.add_memory(memory(clip_of("v", 5), f"she said {mark}", unit_vectors(1, seed=2)[0]))
        assert mark.encode() in table_bytes(store)
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
    runner = CliRunner(env=env)
    plain = runner.invoke(main, ["delete", "memory", str(doomed), "--memory", url, "--yes", "--json"])
    assert plain.exit_code == 0, plain.output
    with open_store(url) as store:
        with store._pool.connection() as db:  # type: ignore[attr-defined]
            db.execute("VACUUM")  # what autovacuum would do
        assert mark.encode() in table_bytes(store)  # gone from the memory, not from the files
        with store.clip(clip_of("v", 6)) as writer:
            again = writer.add_memory(memory(clip_of("v", 6), f"and {mark}", unit_vectors(1, seed=3)[0]))
    done = runner.invoke(main, ["delete", "memory", str(again), "--memory", url, "--yes", "--compact", "--json"])
    assert done.exit_code == 0 and json.loads(done.output)["compacted"] is True, done.output
    with open_store(url) as store:
        assert mark.encode() not in table_bytes(store)
        assert len(store.memories()) == 30 and store.check() == []
