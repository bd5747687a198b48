"""Face-voice links are stored by role, and files of schema version 1 are upgraded to roles."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from m3agent.domain import EntityKind, FaceVoiceLink, LinkSource, Video
from m3agent.errors import IntegrityError, StoreReadOnlyError
from m3agent.store import open_store
from m3agent.store.sqlite.schema import APPLICATION_ID, check_numbering, latest_version, migrations, split_statements
from m3agent.store.sqlite.store import SQLiteStore
from store_helpers import clip_of, sql, unit_vectors


def test_links_are_written_and_read_by_role(make_store: Callable[[], Any]) -> None:
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vec = unit_vectors(1)[0]
    with store.clip(clip_of("v1", 0)) as w:
        voice = w.add_entity(EntityKind.VOICE, [vec])  # created first: the smaller id
        face = w.add_entity(EntityKind.FACE, [vec])
        w.set_link(FaceVoiceLink(face.id, voice.id, 0.7, LinkSource.AV, "face on screen 7.0 s of 10.0 s"))
    assert voice.id < face.id
    assert store.links() == [FaceVoiceLink(face.id, voice.id, 0.7, LinkSource.AV, "face on screen 7.0 s of 10.0 s")]
    assert store.links(min_confidence=0.8) == []
    assert [c.entity_ids for c in store.characters()] == [(voice.id, face.id)]


def test_a_link_with_its_roles_swapped_is_refused(make_store: Callable[[], Any]) -> None:
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vec = unit_vectors(1)[0]
    with store.clip(clip_of("v1", 0)) as w:
        face = w.add_entity(EntityKind.FACE, [vec])
        voice = w.add_entity(EntityKind.VOICE, [vec])
        other_face = w.add_entity(EntityKind.FACE, [vec])
    for bad in (FaceVoiceLink(voice.id, face.id), FaceVoiceLink(face.id, other_face.id)):
        with pytest.raises(IntegrityError) as info, store.clip(clip_of("v1", 1)) as w:
            w.set_link(bad)
        assert "face_id" in str(info.value) and info.value.hint
    # The database itself refuses a row with the wrong roles, whoever writes it.
    with pytest.raises(Exception, match="face entity") as raw:
        sql(store, "INSERT INTO links (face_id, voice_id, confidence, source) VALUES (?, ?, 1, 'manual')",
            (voice.id, face.id))
    assert "IntegrityError" in type(raw.value).__name__ or "IntegrityConstraint" in type(raw.value).__name__
    assert store.links() == []


def test_migration_numbers_may_leave_gaps_for_parallel_branches() -> None:
    check_numbering([1, 2, 3, 4])
    check_numbering([1, 3])  # a branch that took 0003 before 0002 is merged
    for bad in ([1, 2, 2], [2, 3], []):
        with pytest.raises(RuntimeError):
            check_numbering(bad)
    assert [m.version for m in migrations()][:2] == [1, 2]
    assert migrations()[1].name == "link_roles"


def version_1_file(path: Path) -> None:
    """A memory file exactly as schema version 1 left it, with links in every old form.

    Entities: 1 voice (clip 0), 2, 3, 4 faces and 5 voice (clip 1). Equivalence rows (a < b):
    voice 1 ~ face 2 by AV, then by the model; face 3 ~ voice 5 under an ad-hoc source;
    faces 2 ~ 3 and face 4 ~ voice 5 from the reference-graph importer.
    """
    db = sqlite3.connect(path, isolation_level=None)
    first = migrations()[0]
    db.execute("BEGIN")
    for statement in split_statements(first.sql):
        db.execute(statement)
    db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
               " applied_at TEXT NOT NULL)")
    db.execute("INSERT INTO schema_migrations VALUES (1, ?, '2025-01-01T00:00:00+00:00')", (first.name,))
    db.execute("INSERT INTO videos (video_id, source, added_at) VALUES ('v1', '/x.mp4', 'then')")
    for index in (0, 1, 2):
        start = index * 30.0
        db.execute("INSERT INTO clips VALUES ('v1', ?, ?, ?, 'done', '', 'then')", (index, start, start + 30.0))
    kinds = {1: ("voice", 0), 2: ("face", 1), 3: ("face", 1), 4: ("face", 1), 5: ("voice", 1)}
    for entity_id, (kind, clip) in kinds.items():
        db.execute("INSERT INTO entities (id, kind, video_id, first_clip, last_clip, created_at)"
                   " VALUES (?, ?, 'v1', ?, ?, 'then')", (entity_id, kind, clip, clip))
        db.execute("INSERT INTO characters (entity_id) VALUES (?)", (entity_id,))
    rows = [(1, 2, 0.9, "av", 1), (3, 5, 0.6, "cooccurrence", 1), (2, 3, 1.0, "m3-bench-graph", 1),
            (4, 5, 1.0, "m3-bench-graph", 1), (1, 2, 0.85, "llm", 2)]
    db.executemany("INSERT INTO equivalences (a, b, confidence, source, video_id, clip_index)"
                   " VALUES (?, ?, ?, ?, 'v1', ?)", rows)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("COMMIT")
    db.close()


def test_a_version_1_file_is_upgraded_with_roles_from_entity_kinds(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    version_1_file(path)
    with pytest.raises(StoreReadOnlyError, match=r"needs migrations \[2"):
        open_store(str(path), readonly=True)

    store = open_store(str(path))
    assert isinstance(store, SQLiteStore)
    assert store.schema_version() == latest_version()
    assert store.links() == [
        FaceVoiceLink(2, 1, 0.85, LinkSource.LLM, ""),  # the latest of the pair, roles from entities.kind
        FaceVoiceLink(3, 5, 0.6, LinkSource.MANUAL, "recorded as 'cooccurrence' before link roles"),
        FaceVoiceLink(4, 5, 1.0, LinkSource.IMPORT, "recorded as 'm3-bench-graph' before link roles"),
    ]  # faces 2 ~ 3 is no face-voice link: dropped
    db = store._db
    assert [r[0] for r in db.execute("SELECT seq FROM links ORDER BY seq")] == [1, 2, 4, 5]  # log order kept
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name = 'equivalences'").fetchone() is None
    assert [c.entity_ids for c in store.characters()] == [(1, 2), (3, 4, 5)]
    assert [c.entity_ids for c in store.characters(before_clip=1, video_id="v1")] == [(1, 2), (3, 4, 5)]
    assert store.check() == []

    with store.clip(clip_of("v1", 3)) as w:  # new evidence lands after the upgraded log
        w.set_link(FaceVoiceLink(2, 1, 0.0, LinkSource.AV, "revoked"))
    assert [c.entity_ids for c in store.characters()] == [(1,), (2,), (3, 4, 5)]
    assert db.execute("SELECT max(seq) FROM links").fetchone()[0] == 6
    store.close()
    with open_store(str(path), readonly=True) as again:  # upgraded once, opens read-only now
        assert again.schema_version() == latest_version()


def test_a_read_only_open_through_the_settings_upgrades_a_writable_old_file(tmp_path: Path) -> None:
    """``m3agent ask`` opens read-only: after an upgrade of m3agent it must not fail on the user's own memory."""
    from m3agent.settings import Settings
    from m3agent.store import open_memory

    path = tmp_path / "old.db"
    version_1_file(path)
    with pytest.raises(StoreReadOnlyError, match="needs migrations"):
        open_store(str(path), readonly=True)  # the store alone never writes when asked not to
    with open_memory(Settings(memory=str(path), cache_dir=tmp_path / "cache"), readonly=True, create=False) as store:
        assert store.schema_version() == latest_version() and len(store.links()) == 3
