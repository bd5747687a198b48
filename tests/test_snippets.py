"""Voice snippets: one WAV per voice entity and clip, the middle of its longest segment, readable by ``wave``."""

from __future__ import annotations

import dataclasses
import io
import wave
from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import Clip, ClipMedia, EntityKind, Video, VoiceSegment
from m3agent.media.snippets import voice_snippets, wav_bytes
from store_helpers import clip_of, new_store, unit_vectors

RATE = 16000


def clip_media(start_s: float = 60.0, seconds: float = 10.0) -> ClipMedia:
    """A clip whose sample i holds a ramp value, so a cut's position can be read back from its samples."""
    n = int(seconds * RATE)
    audio = (np.arange(n, dtype=np.float32) / n) * 0.9
    return ClipMedia(Clip("v", 2, start_s, start_s + seconds), frames=(), audio=audio, audio_rate=RATE)


def read_wav(data: bytes) -> tuple[int, int, int, np.ndarray]:
    with wave.open(io.BytesIO(data), "rb") as wav:
        frames = wav.readframes(wav.getnframes())
        return wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), np.frombuffer(frames, "<i2") / 32767.0


def test_wav_bytes_round_trips_mono_16_bit_and_clips_out_of_range() -> None:
    samples = np.array([0.0, 0.5, -0.5, 2.0, -3.0], dtype=np.float32)
    channels, width, rate, back = read_wav(wav_bytes(samples, RATE))
    assert (channels, width, rate) == (1, 2, RATE)
    np.testing.assert_allclose(back, [0.0, 0.5, -0.5, 1.0, -1.0], atol=1e-4)


def test_one_snippet_per_entity_from_its_longest_segment_middle() -> None:
    media = clip_media()
    voices = (
        VoiceSegment(2, 60.5, 61.5, "short", entity_id=7),
        VoiceSegment(2, 62.0, 68.0, "long", entity_id=7),  # longest of entity 7: middle 3 s = 63.5-66.5
        VoiceSegment(2, 68.0, 69.0, "other", entity_id=9),  # shorter than 3 s: all of it
        VoiceSegment(2, 61.0, 67.0, "nobody", entity_id=None),  # unidentified: no snippet
    )
    snippets = voice_snippets(media, voices, 3.0)
    assert sorted(snippets) == [1, 2]
    _, _, _, long = read_wav(snippets[1])
    assert len(long) == 3 * RATE
    assert long[0] == pytest.approx(media.audio[int(3.5 * RATE)], abs=1e-4)
    assert long[-1] == pytest.approx(media.audio[int(6.5 * RATE) - 1], abs=1e-4)
    _, _, _, other = read_wav(snippets[2])
    assert len(other) == RATE and other[0] == pytest.approx(media.audio[8 * RATE], abs=1e-4)


def test_no_snippets_without_audio_or_when_disabled() -> None:
    voices = (VoiceSegment(2, 61.0, 63.0, "hi", entity_id=1),)
    silent = ClipMedia(Clip("v", 2, 60.0, 70.0), frames=(), audio=None)
    assert voice_snippets(silent, voices, 3.0) == {}
    assert voice_snippets(clip_media(), voices, 0.0) == {}


def test_segment_reaching_past_the_clip_is_cut_at_the_clip_end() -> None:
    media = clip_media(seconds=4.0)  # 60.0-64.0
    snippets = voice_snippets(media, (VoiceSegment(2, 63.0, 66.0, "tail", entity_id=3),), 3.0)
    _, _, _, samples = read_wav(snippets[0])
    assert len(samples) == RATE  # 63.0-64.0: the part of the segment inside the clip


def test_store_returns_snippets_longest_first_and_they_follow_a_merge(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(2, seed=4)
    media = clip_media(start_s=0.0)
    short, long = VoiceSegment(0, 1.0, 2.0, "a"), VoiceSegment(0, 3.0, 6.0, "b")
    with store.clip(clip_of("v1", 0)) as w:
        keep = w.add_entity(EntityKind.VOICE, [vectors[0]])
        absorb = w.add_entity(EntityKind.VOICE, [vectors[1]])
        short_wav = voice_snippets(media, (dataclasses.replace(short, entity_id=keep.id),), 3.0)[0]
        long_wav = voice_snippets(media, (dataclasses.replace(long, entity_id=absorb.id),), 3.0)[0]
        w.add_voice(dataclasses.replace(short, entity_id=keep.id), short_wav)
        w.add_voice(dataclasses.replace(long, entity_id=absorb.id), long_wav)
        w.add_voice(VoiceSegment(0, 7.0, 9.0, "no audio kept", entity_id=keep.id))
    assert store.entity_snippets(keep.id) == [short_wav]
    store.merge_entities(keep.id, absorb.id)
    assert store.entity_snippets(keep.id) == [long_wav, short_wav]
    assert store.entity_snippets(keep.id, limit=1) == [long_wav]
    store.close()
