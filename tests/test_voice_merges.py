"""One voice entity per speaking face: automatic merges, recorded with their evidence and undoable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.domain import (
    BBox,
    Clip,
    ClipMedia,
    ClipPerception,
    EntityKind,
    FaceObservation,
    FaceTrack,
    FaceVoiceLink,
    LinkSource,
    Video,
    VoiceSegment,
)
from m3agent.errors import IntegrityError
from m3agent.identity.resolver import IdentityRules, resolve_clip
from m3agent.identity.voice_merges import MergeRule, propose
from m3agent.memorize.embedding import ensure_embedding_model
from m3agent.memorize.rules import WriteRules, memorize_clip
from m3agent.memorize.writers.perception import PerceptionWriter
from m3agent.settings import Settings, load_settings
from m3agent.store import open_memory
from m3agent.store.protocol import MemoryStore
from store_helpers import clip_of, memory, sql, unit_vectors
from test_identity_links import EMBEDDER, FACE

MakeStore = Callable[[], Any]
RULE = MergeRule(link_accept=0.5, max_overlap_s=0.1, min_similarity=0.6)


def av(face: int, voice: int, confidence: float = 0.9) -> FaceVoiceLink:
    return FaceVoiceLink(face, voice, confidence, LinkSource.AV, "lips move with the voice")


def same(_: int, __: int) -> float:
    return 0.8


def test_two_voices_of_one_face_that_take_turns_are_one_voice() -> None:
    spans = {"v": [(0.0, 2.0, 11), (2.5, 4.0, 12), (5.0, 6.0, 11)]}
    [merge] = propose([av(1, 11), av(1, 12)], spans, {12}, same, RULE)
    assert (merge.keep, merge.absorb, merge.face) == (11, 12, 1)
    assert "<voice_12> and <voice_11> both speak through <face_1>" in merge.evidence
    assert "overlap 0.00 s" in merge.evidence and "similarity 0.80" in merge.evidence


@pytest.mark.parametrize(("links", "spans", "similarity", "refused", "why"), [
    ([av(1, 11), av(2, 12)], [(0, 2, 11), (3, 4, 12)], same, (), "two faces, two people (the debate)"),
    ([av(1, 11), av(1, 12)], [(0, 2, 11), (1, 4, 12)], same, (), "heard at once: two people"),
    ([av(1, 11), av(1, 12), av(2, 12)], [(0, 2, 11), (3, 4, 12)], same, (), "voice 12 also speaks through face 2"),
    ([av(1, 11), av(1, 12, 0.4)], [(0, 2, 11), (3, 4, 12)], same, (), "a link below the accept bar"),
    ([av(1, 11), av(1, 12)], [(0, 2, 11), (3, 4, 12)], lambda a, b: 0.3, (), "clearly different voices"),
    ([av(1, 11), av(1, 12)], [(0, 2, 11), (3, 4, 12)], same, {frozenset((11, 12))}, "merge undone before"),
])
def test_no_merge_without_the_evidence(links: list[FaceVoiceLink], spans: list[tuple[float, float, int]],
                                       similarity: Callable[[int, int], float], refused: set[frozenset[int]],
                                       why: str) -> None:
    assert propose(links, {"v": spans}, {11, 12}, similarity, RULE, refused) == [], why


def test_a_third_voice_heard_with_the_merged_ones_stays_apart() -> None:
    spans = {"v": [(0.0, 2.0, 11), (3.0, 4.0, 12), (3.5, 5.0, 13)]}
    merges = propose([av(1, 11), av(1, 12), av(1, 13)], spans, {13}, same, RULE)
    assert [(m.keep, m.absorb) for m in merges] == [(11, 12)]  # 13 talks over 12, who is now 11


def test_only_faces_heard_in_this_clip_are_reconsidered() -> None:
    spans = {"v": [(0.0, 2.0, 11), (3.0, 4.0, 12)]}
    assert propose([av(1, 11), av(1, 12)], spans, {99}, same, RULE) == []


def test_overlap_counts_in_every_video() -> None:
    spans = {"a": [(0.0, 2.0, 11), (3.0, 4.0, 12)], "b": [(0.0, 5.0, 11), (1.0, 2.0, 12)]}
    assert propose([av(1, 11), av(1, 12)], spans, {11}, same, RULE) == []


def _two_voices_of_one_face(store: MemoryStore) -> tuple[int, int, int, list[int]]:
    """Clip 0 of v1: a face with two linked voice entities that take turns, and three memories."""
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(4, seed=5)
    clip = clip_of("v1", 0)
    with store.clip(clip) as w:
        face = w.add_entity(EntityKind.FACE, [vectors[0]]).id
        a = w.add_entity(EntityKind.VOICE, [vectors[1]]).id
        b = w.add_entity(EntityKind.VOICE, [vectors[2], vectors[3]], name="Ann").id
        w.add_voice(VoiceSegment(0, 1.0, 3.0, "I was a senator", speaker=0, entity_id=a, embedding=vectors[1]))
        w.add_voice(VoiceSegment(0, 5.0, 8.0, "from New York", speaker=1, entity_id=b, embedding=vectors[2]))
        w.set_link(av(face, a, 0.9))
        w.set_link(FaceVoiceLink(face, b, 0.8, LinkSource.AV, "lips of the second turn"))
        texts = [(f"<voice_{b}> says: from New York", (b,)), (f"<voice_{a}> and <voice_{b}> take turns", (a, b)),
                 (f"<face_{face}> listens", (face,))]
        mids = [w.add_memory(memory(clip, t, vectors[i], entity_ids=e)) for i, (t, e) in enumerate(texts)]
    return face, a, b, mids


def test_an_automatic_merge_is_recorded_with_its_evidence_and_undone(make_store: MakeStore) -> None:
    store = make_store()
    face, a, b, mids = _two_voices_of_one_face(store)
    before = {m: store.get_memory(m).text for m in mids}
    characters = sorted(c.id for c in store.characters())
    with store.clip(clip_of("v1", 1)) as w:
        merge_id = w.merge_entities(a, b, f"both speak through <face_{face}>")
    assert [e.id for e in store.entities(EntityKind.VOICE)] == [a]
    assert store.get_entity(a).name == "Ann"
    assert {s.entity_id for s in store.voices("v1")} == {a}
    assert store.get_memory(mids[0]).text == f"<voice_{a}> says: from New York"
    assert [(link.face_id, link.voice_id) for link in store.links()] == [(face, a)]
    [record] = store.entity_merges()
    assert (record.id, record.keep_id, record.absorbed_id, record.kind, record.source) == (merge_id, a, b, "voice",
                                                                                            "auto")
    assert (record.video_id, record.clip_index, record.undone_at) == ("v1", 1, None)
    assert record.evidence == f"both speak through <face_{face}>"

    restored = store.undo_merge(merge_id)
    assert (restored.id, restored.kind, restored.name) == (b, EntityKind.VOICE, "Ann")
    assert store.get_entity(a).name == ""
    assert sorted((s.text, s.entity_id) for s in store.voices("v1")) == [("I was a senator", a),
                                                                         ("from New York", b)]
    assert {m: store.get_memory(m).text for m in mids} == before
    assert [m.id for m in store.memories_of_entities([b])] == mids[:2]
    assert [m.id for m in store.memories_of_entities([a])] == [mids[1]]
    assert sorted((link.face_id, link.voice_id, link.confidence) for link in store.links()) == [
        (face, a, 0.9), (face, b, 0.8)]
    assert len(store.entity_bank(a)) == 1 and len(store.entity_bank(b)) == 2
    assert sorted(c.id for c in store.characters()) == characters
    [record] = store.entity_merges()
    assert record.undone_at is not None
    with pytest.raises(IntegrityError):
        store.undo_merge(merge_id)


def test_a_merge_by_hand_is_recorded_and_undoable(make_store: MakeStore) -> None:
    store = make_store()
    _, a, b, _ = _two_voices_of_one_face(store)
    store.merge_entities(keep=b, absorb=a)
    [record] = store.entity_merges()
    assert (record.keep_id, record.absorbed_id, record.source, record.clip_index) == (b, a, "manual", None)
    assert store.undo_merge(record.id).id == a
    assert sorted(e.id for e in store.entities(EntityKind.VOICE)) == [a, b]


def test_the_merge_that_took_a_character_id_away_is_found(make_store: MakeStore) -> None:
    store = make_store()
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(2, seed=7)
    with store.clip(clip_of("v1", 0)) as w:
        keep, absorb = (w.add_entity(EntityKind.FACE, [v]).id for v in vectors)
    ids = {c.entity_ids[0]: c.id for c in store.characters()}
    store.merge_entities(keep=keep, absorb=absorb)
    assert [c.id for c in store.characters()] == [ids[keep]]  # the absorbed person's id is gone
    [record] = store.entity_merges()
    found = store.merge_of_character(ids[absorb])
    assert found is not None and (found.id, found.keep_id, found.absorbed_id) == (record.id, keep, absorb)
    assert store.merge_of_character(max(ids.values()) + 100) is None
    store.undo_merge(record.id)
    assert store.merge_of_character(ids[absorb]) is None  # undone: the id is back, no merge explains it


# --- through identity resolution, as ingest runs it -------------------------------------------------

CLIP_S = 10.0


def _voice(similar_to: np.ndarray | None, cosine: float, seed: int, dim: int = 256) -> np.ndarray:
    """A ``dim``-d unit vector at ``cosine`` from ``similar_to`` (random when None)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(dim).astype(np.float32)
    if similar_to is not None:
        v -= similar_to * float(v @ similar_to)
        v = cosine * similar_to + np.sqrt(1 - cosine ** 2) * v / np.linalg.norm(v)
    return (v / np.linalg.norm(v)).astype(np.float32)


VOICE_A = _voice(None, 0.0, 7)
VOICE_B = _voice(VOICE_A, 0.7, 8)  # below the voice match bar (0.75), above the merge floor (0.6)


def talking_head(video: str, index: int, voice: np.ndarray, fps: float) -> ClipPerception:
    """One clip of ``video``: the face (always on screen) speaks from 1 s to 8 s with ``voice``."""
    clip = Clip(video, index, index * CLIP_S, (index + 1) * CLIP_S)
    times = np.arange(clip.start_s, clip.end_s, 1.0 / fps)
    seen = tuple(FaceObservation(index, float(t), BBox(10, 10, 90, 90), 0.99, 0.8, 0) for t in times)
    best = (FaceObservation(index, seen[0].time_s, BBox(10, 10, 90, 90), 0.99, 0.8, 0, FACE),)
    segment = VoiceSegment(index, clip.start_s + 1.0, clip.start_s + 8.0, f"words of {video} {index}", speaker=0,
                           embedding=voice)
    return ClipPerception(media=ClipMedia(clip, frames=(), audio=None), tracks=(FaceTrack(index, 0, seen, best),),
                          voices=(segment,))


def ingest(store: MemoryStore, settings: Settings, clip: ClipPerception) -> None:
    with store.clip(clip.media.clip) as writer:
        resolved = resolve_clip(store, writer, clip, IdentityRules.from_settings(settings))
        memorize_clip(store, writer, PerceptionWriter(), clip.media, resolved, EMBEDDER,
                      fps=settings.media.frame_fps, rules=WriteRules.from_settings(settings))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # FACE is a 128-d dlib descriptor; the voices above are placed against Resemblyzer's similarities.
    return load_settings(memory=str(tmp_path / "merges.db"),
                         perception={"face_embedder": "dlib", "voice_embedder": "resemblyzer"})


def test_a_face_whose_voice_was_split_across_videos_gets_one_voice(settings: Settings) -> None:
    fps = settings.media.frame_fps
    with open_memory(settings) as store:
        ensure_embedding_model(store, EMBEDDER)
        for video in ("v1", "v2"):
            store.add_video(Video(video, f"/media/{video}.mp4"))
        ingest(store, settings, talking_head("v1", 0, VOICE_A, fps))
        [voice] = store.entities(EntityKind.VOICE)
        ingest(store, settings, talking_head("v2", 0, VOICE_B, fps))
        assert [e.id for e in store.entities(EntityKind.VOICE)] == [voice.id]
        [face] = store.entities(EntityKind.FACE)
        [record] = store.entity_merges()
        assert (record.keep_id, record.source, record.video_id) == (voice.id, "auto", "v2")
        assert f"through <face_{face.id}>" in record.evidence
        said = store.memories(video_id="v2")
        assert said and all(f"<voice_{record.absorbed_id}>" not in m.text for m in said)
        assert any(f"<voice_{voice.id}>" in m.text for m in said)

        store.undo_merge(record.id)
        ingest(store, settings, talking_head("v2", 1, VOICE_B, fps))
        assert sorted(e.id for e in store.entities(EntityKind.VOICE)) == [voice.id, record.absorbed_id]
        assert len(store.entity_merges()) == 1  # an undone pair is not merged again


def test_merging_can_be_switched_off(settings: Settings) -> None:
    off = settings.model_copy(update={"perception": settings.perception.model_copy(update={"voice_merge": False})})
    fps = settings.media.frame_fps
    with open_memory(off) as store:
        ensure_embedding_model(store, EMBEDDER)
        for video in ("v1", "v2"):
            store.add_video(Video(video, f"/media/{video}.mp4"))
            ingest(store, off, talking_head(video, 0, VOICE_A if video == "v1" else VOICE_B, fps))
        assert len(store.entities(EntityKind.VOICE)) == 2 and store.entity_merges() == []


def test_merges_are_listed_and_undone_from_the_command_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from m3agent.cli.main import main as cli
    from m3agent.store import open_store

    path = str(tmp_path / "cli.db")
    store = open_store(path)
    store.set_embedding_model("test-random", 16)
    face, a, b, _ = _two_voices_of_one_face(store)
    with store.clip(clip_of("v1", 1)) as w:
        w.merge_entities(a, b, f"both speak through <face_{face}>")
    store.close()
    runner = CliRunner()
    listed = runner.invoke(cli, ["merges", "--memory", path])
    assert listed.exit_code == 0, listed.output
    assert f"1: voice_{b} -> voice_{a}, auto (v1 clip 1): both speak through <face_{face}>" in listed.output
    undone = runner.invoke(cli, ["unmerge", "1", "--memory", path, "--json"])
    assert undone.exit_code == 0, undone.output
    assert f'"restored": "<voice_{b}>"' in undone.output
    again = runner.invoke(cli, ["merges", "--memory", path, "--json"])
    assert '"undone_at": "20' in again.output


def test_forgetting_reaches_the_merge_records(make_store: MakeStore) -> None:
    """A deleted memory's text leaves the snapshots; a record whose kept entity is deleted goes; an undone
    record keeps no copy of what is back in the live tables."""
    store = make_store()
    _, a, b, mids = _two_voices_of_one_face(store)
    with store.clip(clip_of("v1", 1)) as w:
        first = w.merge_entities(a, b, "both speak through the face")
    store.delete_memory(mids[0])
    [(snapshot,)] = sql(store, "SELECT snapshot FROM entity_merges")
    assert "New York" not in snapshot and str(mids[1]) in json.loads(snapshot)["merged_texts"]
    assert store.undo_merge(first).id == b
    assert sql(store, "SELECT snapshot FROM entity_merges") == [("{}",)]
    assert [m.id for m in store.memories_of_entities([b])] == [mids[1]]
    with store.clip(clip_of("v1", 2)) as w:
        w.merge_entities(b, a, "again")
    store.delete_entity(b)
    assert [m.id for m in store.entity_merges()] == [first]  # the undone one stays as history


def test_deleting_the_video_deletes_its_merge_records(make_store: MakeStore) -> None:
    store = make_store()
    _, a, b, _ = _two_voices_of_one_face(store)
    with store.clip(clip_of("v1", 1)) as w:
        w.merge_entities(a, b, "both speak through the face")
    store.delete_video("v1")
    assert store.entity_merges() == [] and sql(store, "SELECT count(*) FROM entity_merges") == [(0,)]


def test_merge_records_travel_with_a_migrated_memory(make_store: MakeStore) -> None:
    from m3agent.store.transfer import copy_memory

    source, target = make_store("source"), make_store("target")
    _, a, b, _ = _two_voices_of_one_face(source)
    with source.clip(clip_of("v1", 1)) as w:
        merge_id = w.merge_entities(a, b, "both speak through the face")
    report = copy_memory(source, target)
    assert report.rows["entity_merges"] == 1 and target.entity_merges() == source.entity_merges()
    assert target.undo_merge(merge_id).id == b


def test_chained_merges_are_undone_last_first(make_store: MakeStore) -> None:
    store = make_store()
    _, a, b, mids = _two_voices_of_one_face(store)
    before = {m: store.get_memory(m).text for m in mids}
    with store.clip(clip_of("v1", 1)) as w:
        c = w.add_entity(EntityKind.VOICE, [unit_vectors(1, seed=9)[0]]).id
        first = w.merge_entities(a, b, "one face")
    store.merge_entities(keep=c, absorb=a)
    second = store.entity_merges()[-1].id
    with pytest.raises(IntegrityError) as refused:
        store.undo_merge(first)
    assert "undo that one first" in (refused.value.hint or "")
    assert store.undo_merge(second).id == a and store.undo_merge(first).id == b
    assert sorted(e.id for e in store.entities(EntityKind.VOICE)) == [a, b, c]
    assert {m: store.get_memory(m).text for m in mids} == before
