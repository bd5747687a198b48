"""Which of a clip's speakers found a voice entity, and when a voice the diarizer split rejoins its entity
(identity/resolver.py, through a real store)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import Clip, ClipMedia, ClipPerception, EntityKind, Video, VoiceSegment
from m3agent.identity.resolver import IdentityRules, resolve_clip
from m3agent.settings import Settings, load_settings
from m3agent.store import open_memory
from m3agent.store.protocol import MemoryStore
from test_voice_merges import _voice as voice_at

CLIP_S = 10.0


def _voice(similar_to: np.ndarray | None, cosine: float, seed: int) -> np.ndarray:
    return voice_at(similar_to, cosine, seed, dim=192)  # CAM++'s size


VOICE_A = _voice(None, 0.0, 1)


def _clip(index: int, *speakers: tuple[float, float, np.ndarray]) -> ClipPerception:
    """Clip ``index`` of video "v" with one segment per speaker: (start, end) in clip time and its embedding."""
    clip = Clip("v", index, index * CLIP_S, (index + 1) * CLIP_S)
    voices = tuple(VoiceSegment(index, clip.start_s + a, clip.start_s + b, f"words {k}", speaker=k, embedding=e)
                   for k, (a, b, e) in enumerate(speakers))
    return ClipPerception(media=ClipMedia(clip, frames=(), audio=None), tracks=(), voices=voices)


def _resolve(store: MemoryStore, settings: Settings, clip: ClipPerception) -> list[int | None]:
    with store.clip(clip.media.clip) as writer:
        resolved = resolve_clip(store, writer, clip, IdentityRules.from_settings(settings))
    return [s.entity_id for s in resolved.voices]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # CAM++'s bars: join 0.45, rejoin 0.6; a speaker needs 1 s of speech to found an entity.
    return load_settings(memory=str(tmp_path / "voices.db"),
                         perception={"voice_embedder": "campplus", "voice_merge": False})


def test_a_speaker_heard_under_a_second_joins_an_entity_but_never_founds_one(settings: Settings) -> None:
    with open_memory(settings) as store:
        store.add_video(Video("v", "/media/v.mp4"))
        [a] = _resolve(store, settings, _clip(0, (1.0, 6.0, VOICE_A)))
        assert a is not None
        # 0.6 s of a stranger: no entity; 0.6 s of A: A.
        assert _resolve(store, settings, _clip(1, (1.0, 1.6, _voice(None, 0.0, 2)), (3.0, 3.6, _voice(VOICE_A, 0.9, 3)))
                        ) == [None, a]
        [b] = _resolve(store, settings, _clip(2, (1.0, 2.2, _voice(None, 0.0, 2))))
        assert b is not None and b != a
        assert [e.id for e in store.entities(EntityKind.VOICE)] == [a, b]


@pytest.mark.parametrize(("second", "talks_over", "joins"), [
    ((5.0, 8.0), False, True),   # the diarizer's split of A's voice, in turn: one entity
    ((2.0, 5.0), True, False),   # heard at once with the first speaker: two people
])
def test_a_voice_split_in_a_clip_rejoins_its_entity_unless_both_speak_at_once(
        settings: Settings, second: tuple[float, float], talks_over: bool, joins: bool) -> None:
    with open_memory(settings) as store:
        store.add_video(Video("v", "/media/v.mp4"))
        [a] = _resolve(store, settings, _clip(0, (1.0, 6.0, VOICE_A)))
        first, other = _resolve(store, settings, _clip(1, (0.5, 3.0, _voice(VOICE_A, 0.95, 4)),
                                                       (*second, _voice(VOICE_A, 0.7, 5))))
        assert first == a
        assert (other == a) is joins
        assert other is not None


def test_a_split_voice_scoring_under_the_rejoin_bar_stays_apart(settings: Settings) -> None:
    with open_memory(settings) as store:
        store.add_video(Video("v", "/media/v.mp4"))
        [a] = _resolve(store, settings, _clip(0, (1.0, 6.0, VOICE_A)))
        first, other = _resolve(store, settings, _clip(1, (0.5, 3.0, _voice(VOICE_A, 0.95, 4)),
                                                       (5.0, 8.0, _voice(VOICE_A, 0.5, 5))))
        assert first == a and other not in (None, a)
