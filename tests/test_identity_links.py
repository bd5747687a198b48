"""Face-voice links hold by role over clips, whichever entity was created first.

Regression: a voice heard in clip 0 (the smaller entity id) whose face first
appears in clip 1 had its link flip accepted -> revoked -> accepted over the
following clips, because the store wrote the pair as (smaller, larger) id and
the linker compared pairs by position. Each clip here goes through the same
steps as ingest (identity resolution, then the perception memory writer and
the write rules) inside one real SQLite clip transaction.
"""

from __future__ import annotations

from pathlib import Path

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
    LinkSource,
    Video,
    VoiceSegment,
)
from m3agent.embed.hashing import HashingEmbedder
from m3agent.identity.resolver import IdentityRules, resolve_clip
from m3agent.memorize.embedding import ensure_embedding_model
from m3agent.memorize.rules import WriteRules, memorize_clip
from m3agent.memorize.writers.perception import PerceptionWriter
from m3agent.settings import Settings, load_settings
from m3agent.store import open_memory
from m3agent.store.sqlite.store import SQLiteStore

CLIP_S = 30.0
FACE = np.random.default_rng(1).standard_normal(128).astype(np.float32)
FACE /= np.linalg.norm(FACE)
VOICE = np.random.default_rng(2).standard_normal(256).astype(np.float32)
VOICE /= np.linalg.norm(VOICE)
EMBEDDER = HashingEmbedder(64)


def perception(index: int, speech: tuple[float, float], face_on_screen: bool, fps: float) -> ClipPerception:
    """One clip: the voice speaks during ``speech`` (seconds into the clip); the face, if on screen,
    is seen in every sampled frame."""
    clip = Clip("v1", index, index * CLIP_S, (index + 1) * CLIP_S)
    tracks: tuple[FaceTrack, ...] = ()
    if face_on_screen:
        times = np.arange(clip.start_s, clip.end_s, 1.0 / fps)
        seen = tuple(FaceObservation(index, float(t), BBox(10, 10, 90, 90), 0.99, 0.8, 0) for t in times)
        best = (FaceObservation(index, seen[0].time_s, BBox(10, 10, 90, 90), 0.99, 0.8, 0, FACE),)
        tracks = (FaceTrack(index, 0, seen, best),)
    start, end = clip.start_s + speech[0], clip.start_s + speech[1]
    voice = VoiceSegment(index, start, end, f"words of clip {index}", speaker=0, embedding=VOICE)
    media = ClipMedia(clip, frames=(), audio=None)
    return ClipPerception(media=media, tracks=tracks, voices=(voice,))


def ingest(store: SQLiteStore, settings: Settings, clip: ClipPerception) -> None:
    """Identity, then perception memories, in the clip's transaction (what ingest does per clip)."""
    with store.clip(clip.media.clip) as writer:
        resolved = resolve_clip(store, writer, clip, IdentityRules.from_settings(settings))
        memorize_clip(store, writer, PerceptionWriter(), clip.media, resolved, EMBEDDER,
                      fps=settings.media.frame_fps, rules=WriteRules.from_settings(settings))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(memory=str(tmp_path / "links.db"))


def test_link_holds_when_the_voice_is_created_before_its_face(settings: Settings) -> None:
    fps = settings.media.frame_fps
    with open_memory(settings) as store:
        assert isinstance(store, SQLiteStore)
        ensure_embedding_model(store, EMBEDDER)
        store.add_video(Video("v1", "/media/v1.mp4"))
        ingest(store, settings, perception(0, (2.0, 6.0), face_on_screen=False, fps=fps))
        [voice] = store.entities(EntityKind.VOICE)
        for index in range(1, 5):
            ingest(store, settings, perception(index, (5.0, 15.0), face_on_screen=True, fps=fps))
            [face] = store.entities(EntityKind.FACE)
            assert voice.id < face.id  # the case the old (smaller id, larger id) rows got wrong
            [link] = store.links()
            assert (link.face_id, link.voice_id, link.source) == (face.id, voice.id, LinkSource.AV), index
            assert link.confidence >= store.link_confidence, index
            assert "face on screen" in link.evidence
            together = [c.entity_ids for c in store.characters(video_id="v1")]
            assert together == [(voice.id, face.id)], index
        assert len(store.entities()) == 2  # the voice was recognised in every clip
        log = store._db.execute("SELECT face_id, voice_id, confidence FROM links ORDER BY seq").fetchall()
        assert all(row[:2] == (face.id, voice.id) and row[2] > 0 for row in log), log  # never revoked
        said = store.memories_of_entities([voice.id])
        assert len(said) == 5 and all(f"<voice_{voice.id}>" in m.text for m in said)


def test_link_setting_is_the_one_bar_for_characters(settings: Settings) -> None:
    """The store groups characters with ``perception.link_accept_confidence`` handed down by open_memory."""
    strict = settings.model_copy(
        update={"perception": settings.perception.model_copy(update={"link_accept_confidence": 0.95})})
    fps = settings.media.frame_fps
    with open_memory(settings) as store:
        ensure_embedding_model(store, EMBEDDER)
        store.add_video(Video("v1", "/media/v1.mp4"))
        ingest(store, settings, perception(0, (2.0, 6.0), face_on_screen=False, fps=fps))
        ingest(store, settings, perception(1, (5.0, 15.0), face_on_screen=True, fps=fps))
        [link] = store.links()
        assert 0.5 <= link.confidence < 0.95
        assert len(store.characters()) == 1
    with open_memory(strict, readonly=True, create=False) as store:
        assert store.link_confidence == 0.95
        assert len(store.characters()) == 2  # the same link is evidence only under the stricter bar


def test_faces_embedded_by_another_model_are_refused_with_a_hint(settings: Settings) -> None:
    """A memory built with 128-d dlib descriptors cannot be compared with 256-d dlib+sface ones."""
    import dataclasses

    from m3agent.errors import ConfigError

    fps = settings.media.frame_fps
    with open_memory(settings) as store:
        assert isinstance(store, SQLiteStore)
        ensure_embedding_model(store, EMBEDDER)
        store.add_video(Video("v1", "/media/v1.mp4"))
        ingest(store, settings, perception(0, (5.0, 15.0), face_on_screen=True, fps=fps))
        clip = perception(1, (5.0, 15.0), face_on_screen=True, fps=fps)
        wide = np.concatenate([FACE, FACE]) / np.sqrt(2)
        track = clip.tracks[0]
        best = tuple(dataclasses.replace(o, embedding=wide) for o in track.best)
        clip = dataclasses.replace(clip, tracks=(dataclasses.replace(track, best=best),))
        with pytest.raises(ConfigError, match="another model") as error:
            ingest(store, settings, clip)
        assert "face_embedder" in str(error.value)
        assert len(store.entities(EntityKind.FACE)) == 1, "the failed clip wrote nothing"


def test_a_voice_heard_over_a_photo_is_not_linked_to_the_photo() -> None:
    """A face whose pixels never change (a still picture, mouth motion exactly 0) earns no co-presence, so the
    voice of an unseen narrator is not linked to the face in the photo; the same face moving earns it."""
    from m3agent.identity.linking import LinkRule, decide_links, evidence_from

    times = [t / 2 for t in range(2, 20)]
    sightings = [(t, 1) for t in times]
    spans = [(1.0, 10.0, 2)]
    still = evidence_from(sightings, spans, 2.0, [(t, 1, 0.0) for t in times])
    assert still.co_seconds == {} and decide_links(still, LinkRule()) == []
    moving = evidence_from(sightings, spans, 2.0, [(t, 1, 0.05 * (-1) ** k) for k, t in enumerate(times)])
    assert [(link.face_id, link.voice_id) for link in decide_links(moving, LinkRule())] == [(1, 2)]
