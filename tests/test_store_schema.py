"""SQLite store files: migrations, versions, damaged, read-only and full files."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.domain import BBox, FaceObservation, Video
from m3agent.errors import (
    IntegrityError,
    NotFoundError,
    StoreCorruptError,
    StoreFullError,
    StoreReadOnlyError,
    StoreVersionError,
)
from m3agent.store import STORES, open_store
from m3agent.store.postgres import schema as pg_schema
from m3agent.store.protocol import ClipWriter, MemoryStore
from m3agent.store.sqlite.schema import APPLICATION_ID, connect, latest_version, migrations
from m3agent.store.sqlite.store import SQLiteStore
from store_helpers import DIM, clip_of, fill, memory, new_store, sql, unit_vectors

ADJACENCY_INDEXES = {
    "edges_by_memory",
    "memories_by_clip",
    "faces_by_clip",
    "faces_by_entity",
    "voices_by_clip",
    "voices_by_entity",
    "links_by_pair",
    "links_by_voice",
}


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_migrations_build_the_schema_from_an_empty_file(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    assert store.schema_version() == latest_version() == migrations()[-1].version
    store.close()
    db = raw(tmp_path / "memory.db")
    applied = db.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert applied == [(m.version, m.name) for m in migrations()]
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert {"videos", "clips", "entities", "memories", "edges", "blobs", "memories_fts"} <= names
    assert names >= ADJACENCY_INDEXES
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_an_empty_file_is_initialised_and_the_store_fulfils_the_protocols(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    store = open_store(str(path))
    assert isinstance(store, MemoryStore) and store.schema_version() == latest_version()
    store.add_video(Video("v1", "/x.mp4"))
    with store.clip(clip_of("v1", 0)) as writer:
        assert isinstance(writer, ClipWriter)


def test_adjacency_queries_use_indexes(tmp_path: Path) -> None:
    new_store(tmp_path).close()
    db = raw(tmp_path / "memory.db")
    queries = [
        "SELECT memory_id FROM edges WHERE entity_id = 1",
        "SELECT entity_id FROM edges WHERE memory_id = 1",
        "SELECT id FROM memories WHERE video_id = 'v' AND clip_index <= 3",
        "SELECT id FROM faces WHERE entity_id = 1",
        "SELECT id FROM voices WHERE video_id = 'v' AND clip_index = 2",
        "SELECT seq FROM links WHERE face_id = 1 AND voice_id = 2",
        "SELECT seq FROM links WHERE voice_id = 2",
    ]
    for query in queries:
        plan = " ".join(str(r[-1]) for r in db.execute(f"EXPLAIN QUERY PLAN {query}"))
        assert "USING" in plan and "SCAN" not in plan, (query, plan)


def test_reopening_is_idempotent_and_keeps_data(make_store: Callable[[], Any]) -> None:
    store = make_store()
    ids = fill(store, unit_vectors(20))
    store.close()
    for _ in range(2):
        with open_store(store.url) as again:
            known = migrations() if isinstance(again, SQLiteStore) else pg_schema.migrations()
            assert again.schema_version() == known[-1].version
            assert [m.id for m in again.memories()] == ids
            assert again.embedding_model() == ("test-random", DIM)
            assert sql(again, "SELECT count(*) FROM schema_migrations") == [(len(known),)]


def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(NotFoundError), store.clip(clip_of("never-added", 0)):
        pass


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    new_store(tmp_path).close()
    path = tmp_path / "memory.db"
    raw(path).execute("INSERT INTO schema_migrations VALUES (999, 'future', 'x')")
    with pytest.raises(StoreVersionError) as info:
        open_store(str(path))
    assert "999" in str(info.value) and "upgrade" in info.value.hint
    with pytest.raises(StoreVersionError):
        open_store(str(path), readonly=True)


def test_garbage_bytes_are_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(np.random.default_rng(1).bytes(50_000))
    with pytest.raises(StoreCorruptError):
        open_store(str(path))
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    with pytest.raises(StoreCorruptError):
        open_store(str(path))


@pytest.mark.parametrize("keep", [0.5, 0.9, 50])
def test_truncated_database_is_corrupt(tmp_path: Path, keep: float) -> None:
    store = new_store(tmp_path)
    fill(store, unit_vectors(300), per_clip=30)
    store.close()
    path = tmp_path / "memory.db"
    size = path.stat().st_size
    assert size > 100_000
    with path.open("r+b") as fh:
        fh.truncate(int(size * keep) if keep < 1 else int(keep))
    with pytest.raises(StoreCorruptError):
        open_store(str(path))


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw(path).execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance REAL)")
    with pytest.raises(StoreCorruptError):
        open_store(str(path))
    assert raw(path).execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 1  # untouched


def test_missing_file_without_create(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        open_store(str(tmp_path / "none.db"), create=False)
    with pytest.raises(NotFoundError):
        open_store(str(tmp_path / "none.db"), readonly=True)
    assert not (tmp_path / "none.db").exists()


def _every_write(store: MemoryStore) -> list[object]:
    vector = unit_vectors(1)[0]
    calls = [
        lambda: store.add_video(Video("v9", "/x.mp4")),
        lambda: store.set_embedding_model("other", 8),
        lambda: store.delete_video("v1"),
        lambda: store.rename_entity(1, "x"),
        lambda: store.delete_memory(1),
        lambda: store.adjust_weight(1, 1.0),
        *([lambda: store.compact()] if isinstance(store, SQLiteStore) else []),
        lambda: store.merge_entities(1, 2),
    ]

    def write_clip() -> None:
        with store.clip(clip_of("v1", 99)) as w:
            w.add_memory(memory(clip_of("v1", 99), "x", vector))

    return [*calls, write_clip]


def test_readonly_open_reads_but_refuses_every_write(make_store: Callable[[], Any]) -> None:
    store = make_store()
    ids = fill(store, unit_vectors(20))
    store.close()
    with open_store(store.url, readonly=True) as ro:
        assert [m.id for m in ro.memories()] == ids
        assert ro.vector_search(unit_vectors(1, seed=5)[0], 3)
        for write in _every_write(ro):  # type: ignore[arg-type]
            with pytest.raises(StoreReadOnlyError):
                write()  # type: ignore[operator]
        assert [m.id for m in ro.memories()] == ids


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """Make ``path`` unwritable even for root (immutable attribute), else by permissions."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        yield
        path.chmod(0o644)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], check=False).returncode:
        pytest.skip("running as root and the file system does not support chattr +i")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_read_only_file_opens_read_only_and_refuses_writes(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    ids = fill(store, unit_vectors(20))
    store.close()
    path = tmp_path / "memory.db"
    with read_only_file(path):
        store = open_store(str(path))
        assert isinstance(store, SQLiteStore) and store.readonly
        assert [m.id for m in store.memories()] == ids
        with pytest.raises(StoreReadOnlyError):
            store.add_video(Video("v2", "/y.mp4"))
        store.close()


def test_disk_full_is_reported_and_nothing_is_half_written(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    fill(store, unit_vectors(10))
    before = store.counts()
    db = store._db
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages + 8}")
    clip = clip_of("v1", 5)
    big_crop = b"\xff\xd8" + os.urandom(2_000_000)
    with pytest.raises(StoreFullError) as info, store.clip(clip) as writer:
        writer.add_memory(memory(clip, "fits", unit_vectors(1)[0]))
        writer.add_face(FaceObservation(5, 150.0, BBox(0, 0, 9, 9), 0.9, crop_jpeg=big_crop))
    assert "free disk space" in info.value.hint
    db.execute("PRAGMA max_page_count = 1073741823")
    assert store.counts() == before
    assert [c.index for c, _, _ in store.clips("v1")] == [0]
    with store.clip(clip) as writer:
        writer.add_memory(memory(clip, "now it fits", unit_vectors(1)[0]))
    assert store.counts()["memories"] == before["memories"] + 1


def test_spec_forms_and_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "sqlite" in STORES.names()
    absolute = tmp_path / "abs.db"
    with open_store(f"sqlite:///{absolute}") as store:  # four slashes: absolute
        assert isinstance(store, SQLiteStore) and store.path == absolute
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///rel.db") as store:  # three slashes: relative
        assert isinstance(store, SQLiteStore) and store.path == tmp_path / "rel.db"
    with open_store("plain.db") as store:
        assert isinstance(store, SQLiteStore) and store.path == tmp_path / "plain.db"
    with open_store(str(absolute)) as store:
        assert isinstance(store, SQLiteStore) and store.path == absolute


def test_embedding_model_is_recorded_and_guarded(store_url: Callable[[], str]) -> None:
    store = open_store(store_url())
    assert store.embedding_model() is None
    store.add_video(Video("v1", "/x.mp4"))
    with pytest.raises(IntegrityError), store.clip(clip_of("v1", 0)) as writer:
        writer.add_memory(memory(clip_of("v1", 0), "no model yet", unit_vectors(1)[0]))
    store.set_embedding_model("a", DIM)
    store.set_embedding_model("b", 8)  # no memories yet: may change
    store.set_embedding_model("a", DIM)
    fill(store, unit_vectors(3), videos=("v2",))
    store.set_embedding_model("a", DIM)  # same: no-op
    with pytest.raises(IntegrityError):
        store.set_embedding_model("b", 8)
    with pytest.raises(IntegrityError), store.clip(clip_of("v2", 5)) as writer:
        writer.add_memory(memory(clip_of("v2", 5), "wrong dim", unit_vectors(1, dim=8)[0]))
    assert store.embedding_model() == ("a", DIM)
    store.close()



def test_many_connections_opening_one_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    """Concurrent first opens: no 'database is locked' (SQLite runs no busy handler for the switch to WAL)
    and no 'not an m3agent memory' (another opener's first migration committing between two reads)."""
    errors: list[str] = []

    def open_once(path: Path, barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            conn, _ = connect(path, readonly=False, create=True)
            conn.close()
        except Exception as exc:  # every failure is the finding
            errors.append(repr(exc))

    for round_ in range(40):
        barrier = threading.Barrier(8)
        path = tmp_path / f"race{round_}.db"
        threads = [threading.Thread(target=open_once, args=(path, barrier)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert raw(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert errors == []


def test_migrate_copies_every_table_a_migration_adds(tmp_path: Path) -> None:
    """A new table must be copied by `m3agent migrate` or named as the store's own (derived) data."""
    from m3agent.store.transfer import NOT_COPIED, TABLES

    db = tmp_path / "tables.db"
    with open_store(str(db)):
        pass
    tables = {r[0] for r in raw(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    copied = {name for name, _ in TABLES}
    assert tables - NOT_COPIED == copied, "add the table to store.transfer.TABLES (or NOT_COPIED if derived)"
