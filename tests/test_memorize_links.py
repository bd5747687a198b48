"""Face-voice equivalences stated by a model become characters, with stable ids, unless the clip refutes them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from m3agent.domain import EntityKind, FaceVoiceLink, LinkSource
from m3agent.llm.scripted import ScriptedChat
from m3agent.memorize.rules import apply_write_rules
from m3agent.memorize.writers.mllm import MLLMOptions, MLLMWriter
from m3agent.store.sqlite.store import SQLiteStore
from test_memorize_world import add_entities, clip_input, clip_of, minilm, new_store, write


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with new_store(tmp_path, minilm()) as opened:
        yield opened


def groups(store: SQLiteStore, before_clip: int | None = None) -> dict[int, tuple[int, ...]]:
    return {c.id: c.entity_ids for c in store.characters(before_clip=before_clip, video_id="v1")}


def llm(face: int, voice: int) -> FaceVoiceLink:
    return FaceVoiceLink(face, voice, confidence=0.6, source=LinkSource.LLM)


def av(face: int, voice: int) -> FaceVoiceLink:
    return FaceVoiceLink(face, voice, confidence=0.9, source=LinkSource.AV)


def test_model_stated_link_merges_characters_with_stable_ids(store: SQLiteStore) -> None:
    face, voice = add_entities(store, clip_of(0), [EntityKind.FACE, EntityKind.VOICE])
    before = groups(store)
    assert sorted(before.values()) == [(face,), (voice,)]
    face_char = next(cid for cid, members in before.items() if members == (face,))
    chat = ScriptedChat([{"episodic": [f"<face_{face}> waves."], "semantic": [],
                          "equivalences": [{"face": face, "voice": voice}]}])
    writer = MLLMWriter(chat, MLLMOptions(frames=0, faces=0, keep_perception=False))
    with store.clip(clip_of(1)) as clip_writer:
        inp = clip_input(store, clip_of(1), faces=[face], voices=[voice])
        stats = apply_write_rules(store, clip_writer, inp, writer.write(inp), minilm())
    assert stats.equivalences == 1 and stats.episodic == 1
    [link] = store.links()
    assert (link.face_id, link.voice_id, link.source, link.confidence) == (face, voice, LinkSource.LLM, 0.6)
    assert link.evidence == "stated by the memorization model for clip 1"
    assert groups(store) == {face_char: (face, voice)}  # the smaller id survives
    assert groups(store, before_clip=0) == before  # the past is not renumbered
    later_face, later_voice = add_entities(store, clip_of(2), [EntityKind.FACE, EntityKind.VOICE])
    now = groups(store)
    assert now[face_char] == (face, voice) and len(now) == 3 and (later_face,) in now.values()
    assert (later_voice,) in now.values()


def test_model_link_joins_audio_visual_evidence(store: SQLiteStore) -> None:
    """AV links face A to voice V; the model adds face B (another view of A) to V: one character."""
    face_a, voice, face_b = add_entities(store, clip_of(0), [EntityKind.FACE, EntityKind.VOICE, EntityKind.FACE])
    write(store, clip_of(1), [], faces=[face_a], voices=[voice], av=[av(face_a, voice)])
    stats = write(store, clip_of(2), [], faces=[face_b], voices=[voice], equivalences=[llm(face_b, voice)])
    assert stats.equivalences == 1
    assert sorted(groups(store).values(), key=len)[-1] == tuple(sorted([face_a, voice, face_b]))
    assert {e.source for e in store.links()} == {LinkSource.AV, LinkSource.LLM}


def test_links_the_clip_refutes_are_not_recorded(store: SQLiteStore) -> None:
    face, voice, other_voice, other_face = add_entities(
        store, clip_of(0), [EntityKind.FACE, EntityKind.VOICE, EntityKind.VOICE, EntityKind.FACE])
    links = [av(face, voice), av(other_face, other_voice)]
    write(store, clip_of(1), [], av=links)
    # two voices heard in this clip cannot become one person
    stats = write(store, clip_of(2), [], faces=[face], voices=[voice, other_voice],
                  equivalences=[llm(face, other_voice)])
    assert stats.equivalences == 0 and "both speak in this clip" in stats.notes[0]
    # two established people are not merged on a model's word (other_voice is silent here)
    stats = write(store, clip_of(3), [], faces=[face], voices=[other_voice], equivalences=[llm(face, other_voice)])
    assert stats.equivalences == 0 and "already linked" in stats.notes[0]
    # already one character: nothing to write
    stats = write(store, clip_of(4), [], faces=[face], voices=[voice], equivalences=[llm(face, voice)])
    assert stats.equivalences == 0 and "already the same character" in stats.notes[0]
    assert {e.source for e in store.links()} == {LinkSource.AV}
    assert len(groups(store)) == 2


def test_faces_seen_together_are_never_merged(store: SQLiteStore) -> None:
    face, other_face, voice = add_entities(store, clip_of(0), [EntityKind.FACE, EntityKind.FACE, EntityKind.VOICE])
    write(store, clip_of(1), [], faces=[face], voices=[voice], av=[av(face, voice)])
    stats = write(store, clip_of(2), [], faces=[face, other_face], voices=[voice],
                  equivalences=[llm(other_face, voice)])
    assert stats.equivalences == 0 and "seen together" in stats.notes[0]
