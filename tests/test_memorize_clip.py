"""The per-clip chain the pipeline runs: identity resolution, then memorize_clip, in one clip transaction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3agent.domain import BBox, ClipMedia, ClipPerception, FaceObservation, FaceTrack, Frame, MemoryKind, VoiceSegment
from m3agent.identity.resolver import IdentityRules, resolve_clip
from m3agent.llm import flatten_content
from m3agent.llm.scripted import ScriptedChat
from m3agent.memorize import MemoryWriter
from m3agent.memorize.rules import WriteStats, memorize_clip
from m3agent.memorize.writers.mllm import MLLMOptions, MLLMWriter
from m3agent.memorize.writers.perception import PerceptionWriter
from m3agent.settings import Settings
from m3agent.store.sqlite.store import SQLiteStore
from test_memorize_world import clip_of, minilm, new_store

RNG = np.random.default_rng(7)
FACE_VECTOR = RNG.standard_normal(128).astype(np.float32)
VOICE_VECTOR = RNG.standard_normal(64).astype(np.float32)


def perception(index: int, words: str) -> ClipPerception:
    """One person on screen for 10 s while speaking ``words`` for 8 s."""
    clip = clip_of(index)
    times = [clip.start_s + 2 + i / 2 for i in range(20)]
    observations = tuple(FaceObservation(clip_index=index, time_s=t, bbox=BBox(10, 10, 90, 90), det_score=0.99,
                                         quality=0.8, track=0) for t in times)
    best = tuple(FaceObservation(clip_index=index, time_s=t, bbox=BBox(10, 10, 90, 90), det_score=0.99, quality=0.8,
                                 track=0, embedding=FACE_VECTOR + 0.01 * RNG.standard_normal(128).astype(np.float32),
                                 crop_jpeg=b"\xff\xd8jpeg") for t in times[:3])
    voice = VoiceSegment(clip_index=index, start_s=clip.start_s + 3, end_s=clip.start_s + 11, text=words, speaker=0,
                         embedding=VOICE_VECTOR)
    frames = tuple(Frame(clip.start_s + i, np.zeros((90, 160, 3), np.uint8)) for i in range(30))
    media = ClipMedia(clip=clip, frames=frames, audio=np.zeros(30 * 16000, np.float32), width=160, height=90)
    return ClipPerception(media=media, tracks=(FaceTrack(index, 0, observations, best),), voices=(voice,))


def run_clip(store: SQLiteStore, writer: MemoryWriter, index: int, words: str) -> WriteStats:
    settings = Settings()
    seen = perception(index, words)
    with store.clip(seen.media.clip) as clip_writer:
        resolved = resolve_clip(store, clip_writer, seen, IdentityRules.from_settings(settings))
        _, stats = memorize_clip(store, clip_writer, writer, seen.media, resolved, minilm(),
                                 fps=settings.media.frame_fps)
    return stats


def test_the_chain_stores_memories_and_feeds_what_is_known_to_the_next_clip(tmp_path: Path) -> None:
    with new_store(tmp_path, minilm()) as store:
        first = run_clip(store, PerceptionWriter(), 0, "Hello, my name is Ann and I bake bread.")
        texts = [m.text for m in store.memories("v1")]
        face, voice = (e.id for e in store.entities())
        assert first.semantic == 1 and f"<voice_{voice}>'s name is Ann." in texts
        assert any(t.startswith(f"<face_{face}> is on screen") for t in texts)
        [character] = store.characters(video_id="v1")  # the audio-visual link made one person
        assert character.entity_ids == (face, voice)
        reply = {"episodic": [f"<face_{face}> kneads dough."], "semantic": [f"<voice_{voice}>'s name is Ann."],
                 "equivalences": []}
        chat = ScriptedChat([reply])
        second = run_clip(store, MLLMWriter(chat, MLLMOptions(frames=2)), 1, "The oven is hot now.")
        assert (second.reinforced, second.semantic) == (1, 0)
        [name_fact] = [m for m in store.memories("v1") if m.kind == MemoryKind.SEMANTIC]
        assert (name_fact.weight, name_fact.last_clip_index) == (2.0, 1)
        user = chat.calls[0][1]["content"]
        assert isinstance(user, list) and sum(p["type"] == "image_url" for p in user) == 3  # 2 frames + 1 crop
        prompt = flatten_content(user)
        assert f"<face_{face}> and <voice_{voice}> are the same person, called Ann." in prompt
        assert f'<voice_{voice}> [0:33-0:41]: The oven is hot now.' in prompt
        assert [c.index for c, _, _ in store.clips("v1")] == [0, 1]
