"""Deleting a video, an entity or a memory removes every derived row and the bytes (both backends):
from the SQLite file after VACUUM, from PostgreSQL's table and index files after ``compact()``.

Derived text included: memories about a deleted entity alone go, its tag in the
others becomes "someone"; a deleted speech memory takes its transcript out of the
voice rows it quotes.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from m3agent.domain import (
    BBox,
    Clip,
    ClipMedia,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    SearchFilter,
    Video,
    VoiceSegment,
    Word,
)
from m3agent.errors import NotFoundError, StoreError
from m3agent.media.snippets import voice_snippets
from m3agent.store.protocol import MemoryStore
from m3agent.store.sqlite.store import SQLiteStore
from pg_helpers import table_bytes
from store_helpers import clip_of, file_bytes, memory, sql, unit_vectors

MakeStore = Callable[[], Any]

MEMORY_MARK = b"zqxmemorymarkzqx"
CROP_MARK = b"ZQXCROPMARKZQX"
SPEECH_MARK = b"zqxspeechmarkzqx"
PRESENCE_MARK = b"zqxpresencemarkzqx"


def real_snippet() -> bytes:
    """A voice snippet as ingest writes it: 1 s of noise cut from a clip's audio, WAV-encoded."""
    audio = np.random.default_rng(11).uniform(-0.5, 0.5, 16000 * 4).astype(np.float32)
    media = ClipMedia(Clip("doomed", 0, 0.0, 4.0), frames=(), audio=audio)
    return voice_snippets(media, (VoiceSegment(0, 1.0, 2.0, "", entity_id=1),), 3.0)[0]


SNIPPET = real_snippet()
WAV_MARK = SNIPPET[1000:1064]  # 32 samples of the noise: found in the file only while the snippet is stored


def vacuum_and_read(store: MemoryStore) -> bytes:
    """Compact the memory, close it, return its bytes: the SQLite file VACUUMed by a plain connection,
    or on PostgreSQL the files of every table and index after ``compact()`` (VACUUM FULL) and a checkpoint."""
    if not isinstance(store, SQLiteStore):
        store.compact()  # type: ignore[attr-defined]
        data = table_bytes(store)
        store.close()
        return data
    path = store.path
    store.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("VACUUM")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return file_bytes(path)


def file_now(store: MemoryStore) -> bytes:
    """The memory's bytes now: the SQLite file with the WAL checkpointed, or PostgreSQL's table files."""
    if not isinstance(store, SQLiteStore):
        return table_bytes(store)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return file_bytes(store.path)


def build(make_store: MakeStore) -> tuple[MemoryStore, dict[str, int]]:
    """Video "doomed" (marked data, its own entities) and video "kept" (sharing one entity)."""
    store = make_store()
    vectors = unit_vectors(40, seed=7)
    ids: dict[str, int] = {}
    for video in ("doomed", "kept"):
        store.add_video(Video(video, f"/media/{video}.mp4"))
    clip = clip_of("doomed", 0)
    with store.clip(clip) as w:
        face = w.add_entity(EntityKind.FACE, [vectors[0]])
        voice = w.add_entity(EntityKind.VOICE, [vectors[1]])
        shared = w.add_entity(EntityKind.FACE, [vectors[2]])
        crop = b"\xff\xd8" + CROP_MARK * 20
        w.add_face(FaceObservation(0, 1.0, BBox(0, 0, 9, 9), 0.9, crop_jpeg=crop, entity_id=face.id))
        w.add_face(FaceObservation(0, 2.0, BBox(0, 0, 9, 9), 0.9, crop_jpeg=b"other", entity_id=shared.id))
        speech = f"I said {SPEECH_MARK.decode()}"
        words = (Word("I", 1.0, 1.2), Word("said", 1.2, 1.5), Word(SPEECH_MARK.decode(), 1.5, 2.0))
        w.add_voice(VoiceSegment(0, 1.0, 2.0, speech, words=words, entity_id=voice.id), SNIPPET)
        w.add_voice(VoiceSegment(0, 5.0, 6.0, "another line", entity_id=voice.id))
        text = f"{face.tag} whispers {MEMORY_MARK.decode()} to {voice.tag}"
        ids["marked"] = w.add_memory(memory(clip, text, vectors[3], entity_ids=(face.id, voice.id, shared.id)))
        # What the perception writer derives from the rows: presence of the face, the voice's line.
        presence = f"{face.tag} is on screen from 0:01 to 0:02 {PRESENCE_MARK.decode()}"
        ids["presence"] = w.add_memory(memory(clip, presence, vectors[14], entity_ids=(face.id,)))
        said = memory(clip, f'At 0:01 {voice.tag} says: "{speech}"', vectors[15], entity_ids=(voice.id,))
        ids["speech"] = w.add_memory(dataclasses.replace(said, start_s=1.0, end_s=2.0))
        ids["link_line"] = w.add_memory(memory(clip, f"Equivalence: {face.tag}, {voice.tag}", vectors[16],
                                               entity_ids=(face.id, voice.id)))
        ids["pair"] = w.add_memory(memory(clip, f"{face.tag} and {shared.tag} appear on screen together",
                                          vectors[17], entity_ids=(face.id, shared.id)))
        for i in range(10):
            w.add_memory(memory(clip, f"doomed filler {i}", vectors[4 + i]))
        w.set_link(FaceVoiceLink(face.id, voice.id, 0.9))
    clip = clip_of("kept", 0)
    with store.clip(clip) as w:
        w.add_face(FaceObservation(0, 1.0, BBox(0, 0, 9, 9), 0.9, crop_jpeg=b"kept", entity_id=shared.id))
        ids["kept"] = w.add_memory(memory(clip, f"{shared.tag} stays", vectors[20], entity_ids=(shared.id,)))
    ids.update(face=face.id, voice=voice.id, shared=shared.id)
    return store, ids


def test_delete_video_removes_rows_blobs_index_entries_and_bytes(make_store: MakeStore) -> None:
    store, ids = build(make_store)
    assert store.entity_snippets(ids["voice"]) == [SNIPPET]
    marked = store.get_memory(ids["marked"])
    assert store.vector_search(marked.embedding, 1)[0].memory.id == ids["marked"]  # index now holds it
    before = file_now(store)
    for mark in (MEMORY_MARK, CROP_MARK, WAV_MARK, SPEECH_MARK):
        assert mark in before, mark  # the scan can see them

    store.delete_video("doomed")

    counts = store.counts()
    expected = {
        "videos": 1,
        "clips": 1,
        "memories": 1,
        "memories_fts": 1,
        "faces": 1,
        "voices": 0,
        "blobs": 1,
        "links": 0,
        "entities": 1,
        "edges": 1,
        "characters": 1,
    }
    assert {k: counts[k] for k in expected} == expected
    assert [e.id for e in store.entities()] == [ids["shared"]]
    assert store.get_entity(ids["shared"]).video_id is None
    assert store.vector_search(marked.embedding, 5, SearchFilter(video_ids=("doomed",))) == []
    assert ids["marked"] not in {s.memory.id for s in store.vector_search(marked.embedding, 50)}
    assert store.keyword_search(MEMORY_MARK.decode(), 5) == []
    assert store.faces("doomed") == [] and store.voices("doomed") == []
    assert store.entity_snippets(ids["voice"]) == []
    with pytest.raises(NotFoundError):
        store.get_video("doomed")
    assert [m.id for m in store.memories()] == [ids["kept"]]
    assert store.check() == []
    data = vacuum_and_read(store)
    for mark in (MEMORY_MARK, CROP_MARK, WAV_MARK, SPEECH_MARK):
        assert mark not in data, mark


def test_delete_memory_removes_edges_keywords_vectors_and_bytes(make_store: MakeStore) -> None:
    store, ids = build(make_store)
    marked = store.get_memory(ids["marked"])
    assert store.keyword_search(MEMORY_MARK.decode(), 5)[0].memory.id == ids["marked"]
    store.vector_search(marked.embedding, 1)
    edges_before = store.counts()["edges"]

    store.delete_memory(ids["marked"])

    assert store.counts()["edges"] == edges_before - 3
    assert ids["marked"] not in {m.id for m in store.memories_of_entities([ids["face"]])}
    assert [v.text for v in store.voices("doomed")] == [f"I said {SPEECH_MARK.decode()}", "another line"]
    assert store.keyword_search(MEMORY_MARK.decode(), 5) == []
    assert ids["marked"] not in {s.memory.id for s in store.vector_search(marked.embedding, 50)}
    with pytest.raises(NotFoundError):
        store.delete_memory(ids["marked"])
    if isinstance(store, SQLiteStore):
        assert store.counts()["memory_tombstones"] == 1
        store.compact()
        assert store.counts()["memory_tombstones"] == 0
    assert MEMORY_MARK not in vacuum_and_read(store)


def test_delete_entity_removes_its_media_edges_and_evidence(make_store: MakeStore) -> None:
    store, ids = build(make_store)
    assert WAV_MARK in file_now(store)
    store.delete_entity(ids["face"])
    store.delete_entity(ids["voice"])
    assert store.entity_snippets(ids["voice"]) == []
    with pytest.raises(NotFoundError):
        store.get_entity(ids["face"])
    assert store.links() == []
    assert store.entity_crops(ids["face"]) == []
    assert [f.entity_id for f in store.faces("doomed")] == [ids["shared"]]
    assert store.voices("doomed") == []
    marked = store.get_memory(ids["marked"])
    assert marked.entity_ids == (ids["shared"],)  # the memory stays, without the deleted links
    assert store.counts()["characters"] == 1 and store.counts()["entity_embeddings"] == 1
    data = vacuum_and_read(store)
    assert CROP_MARK not in data and WAV_MARK not in data and SPEECH_MARK not in data
    assert MEMORY_MARK in data


def test_delete_entity_removes_the_text_about_it(make_store: MakeStore) -> None:
    """Memories about the entity alone (and link lines naming it) go; elsewhere its tag becomes "someone"."""
    store, ids = build(make_store)
    face, shared = f"<face_{ids['face']}>", f"<face_{ids['shared']}>"
    presence = store.get_memory(ids["presence"])
    assert store.keyword_search(face, 10)  # the tag is a keyword before

    store.delete_entity(ids["face"])

    for gone in ("presence", "link_line"):
        with pytest.raises(NotFoundError):
            store.get_memory(ids[gone])
    assert store.get_memory(ids["speech"]).entity_ids == (ids["voice"],)  # about the voice: stays
    assert store.get_memory(ids["pair"]).text == f"Someone and {shared} appear on screen together"
    assert store.get_memory(ids["marked"]).text == f"Someone whispers {MEMORY_MARK.decode()} to <voice_{ids['voice']}>"
    assert all(face not in m.text for m in store.memories())
    assert store.keyword_search(face, 10) == []
    assert ids["presence"] not in {s.memory.id for s in store.vector_search(presence.embedding, 50)}
    assert store.check() == []

    store.delete_entity(ids["voice"])

    with pytest.raises(NotFoundError):
        store.get_memory(ids["speech"])
    assert store.get_memory(ids["marked"]).text == f"Someone whispers {MEMORY_MARK.decode()} to someone"
    data = vacuum_and_read(store)
    for tag in (face, f"<voice_{ids['voice']}>"):
        assert tag.strip("<>").encode() not in data, tag
    assert PRESENCE_MARK not in data and MEMORY_MARK in data


def test_delete_speech_memory_removes_its_transcript_from_the_voice_rows(make_store: MakeStore) -> None:
    store, ids = build(make_store)
    assert file_now(store).count(SPEECH_MARK) >= 3  # voice text, voice words, memory text

    store.delete_memory(ids["speech"])

    quoted, other = store.voices("doomed")
    assert (quoted.text, quoted.words, quoted.start_s, quoted.entity_id) == ("", (), 1.0, ids["voice"])
    assert other.text == "another line"  # a line the memory does not quote stays
    assert store.voice_audio(quoted.id) is not None  # the audio stays as identity evidence
    assert store.keyword_search(SPEECH_MARK.decode(), 5) == []
    assert SPEECH_MARK not in vacuum_and_read(store)


def test_failed_delete_changes_nothing(make_store: MakeStore) -> None:
    """Deleting is one transaction: an error part way leaves rows and text as they were."""
    store, ids = build(make_store)
    before = [m.text for m in store.memories()], [v.text for v in store.voices("doomed")]
    refuse(store, "DELETE ON entities")
    with pytest.raises(StoreError):
        store.delete_entity(ids["face"])
    assert ([m.text for m in store.memories()], [v.text for v in store.voices("doomed")]) == before
    sql(store, "DROP TRIGGER refuse" + ("" if isinstance(store, SQLiteStore) else " ON entities"))
    refuse(store, "UPDATE OF text ON voices")
    with pytest.raises(StoreError):
        store.delete_memory(ids["speech"])
    assert store.get_memory(ids["speech"]).id == ids["speech"]


def refuse(store: MemoryStore, event: str) -> None:
    """A trigger that makes every ``event`` (e.g. ``DELETE ON entities``) fail, in either dialect."""
    if isinstance(store, SQLiteStore):
        sql(store, f"CREATE TRIGGER refuse BEFORE {event} BEGIN SELECT RAISE(ABORT, 'refused'); END")
        return
    sql(store, "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
               " $$ BEGIN RAISE EXCEPTION 'refused'; END $$")
    sql(store, f"CREATE TRIGGER refuse BEFORE {event} FOR EACH ROW EXECUTE FUNCTION refuse()")


NOTE_MARK = "zqxnotemarkzqx"


def with_derived_text(store: MemoryStore, ids: dict[str, int]) -> None:
    """What a model derived from the doomed clip: a consolidation note quoting the speech in part (and with a
    word of its own), and a link whose evidence quotes it, as a memorization model writes them."""
    from m3agent.domain import LinkSource

    with store.consolidation([clip_of("doomed", 0)], "model-x") as writer:
        writer.notes.append(f"dropped <face_{ids['face']}> fact 'said {SPEECH_MARK.decode()}…': {NOTE_MARK}")
    with store.clip(clip_of("doomed", 1)) as w:
        w.set_link(FaceVoiceLink(ids["face"], ids["voice"], 0.8, LinkSource.LLM,
                                 f"the voice says {SPEECH_MARK.decode()} while the face talks"))
    assert NOTE_MARK.encode() in file_now(store)


@pytest.mark.parametrize("forget", ["memory", "entity", "video"])
def test_forget_reaches_consolidation_notes_and_link_evidence(make_store: MakeStore, forget: str) -> None:
    """No deleted sentence is left in the file, in whole or in part, after any kind of forget."""
    store, ids = build(make_store)
    with_derived_text(store, ids)
    if forget == "memory":
        store.delete_memory(ids["speech"])
    elif forget == "entity":
        store.delete_entity(ids["voice"])
    else:
        store.delete_video("doomed")
    if forget != "video":
        assert all(not c.notes for c in store.consolidated_clips("doomed").values())
        assert all(SPEECH_MARK.decode() not in link.evidence for link in store.links())
    if isinstance(store, SQLiteStore):  # at once: the server's forget promises it while the file is open
        data = file_now(store)
        assert SPEECH_MARK not in data and NOTE_MARK.encode() not in data
    data = vacuum_and_read(store)  # PostgreSQL: once compacted (its old row versions wait for VACUUM)
    assert SPEECH_MARK not in data and NOTE_MARK.encode() not in data
