"""Voices across clip boundaries: the previous clip's last seconds are diarized with each clip (issue 48).

A voice that runs over a boundary must stay one speaker and one voice entity, and its first words in the new
clip must not be folded into whoever speaks next (two people in one voice entity).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import Clip, ClipMedia, Frame
from m3agent.perception.audio.diarize import Diarization, SpeakerTurn
from m3agent.perception.audio.voices import after_context
from m3agent.pipeline import _with_context

RATE = 16000


def test_after_context_keeps_the_clip_part_and_reports_the_carried_speaker() -> None:
    vectors = {k: np.full(3, k, np.float32) for k in range(3)}
    turns = (SpeakerTurn(0.0, 2.0, 0), SpeakerTurn(2.0, 9.0, 1), SpeakerTurn(9.0, 12.0, 2))
    clip, carried = after_context(Diarization(turns, vectors, ((0.0, 5.0), (6.0, 12.0))), 8.0)
    # speaker 0 is heard only before the clip: dropped; 1 runs over the boundary and becomes the clip's speaker 0
    assert clip.turns == (SpeakerTurn(0.0, 1.0, 0), SpeakerTurn(1.0, 4.0, 1))
    assert clip.speech == ((0.0, 4.0),)
    assert float(clip.embeddings[0][0]) == 1.0 and float(clip.embeddings[1][0]) == 2.0
    assert carried == (SpeakerTurn(-6.0, 0.0, 0),)
    same, none = after_context(Diarization(turns, vectors, ()), 0.0)
    assert same.turns == turns and none == ()


def test_each_clip_gets_the_previous_clips_tail_and_last_frame() -> None:
    def clip(index: int) -> ClipMedia:
        audio = np.arange(index * 10, index * 10 + 10, dtype=np.float32)
        frames = tuple(Frame(index * 10.0 + t, np.full((4, 4, 3), index, np.uint8)) for t in (0.0, 5.0))
        return ClipMedia(Clip("v", index, index * 10.0, index * 10.0 + 10.0), frames, audio, audio_rate=1)

    out = list(_with_context(iter([clip(0), clip(1), clip(3)]), 4.0))
    assert out[0].context_audio is None and out[0].context_frame is None
    assert list(out[1].context_audio) == [6.0, 7.0, 8.0, 9.0]
    assert out[1].context_frame is not None and out[1].context_frame.time_s == 5.0
    assert out[2].context_audio is None and out[2].context_frame is None  # clip 2 is missing: its tail is unknown
    no_audio = list(_with_context(iter([clip(0), clip(1)]), 0.0))
    assert all(m.context_audio is None for m in no_audio) and no_audio[1].context_frame is not None


def _speech(media_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """A woman (LibriSpeech 1998) reading for at least 12.5 s, and JFK (11 s)."""
    from m3agent.media import read_audio

    files = sorted((media_dir / "audio/speaker_id/librispeech_test-other/1998").glob("*.flac"))
    woman = np.concatenate([np.asarray(read_audio(f), np.float32) for f in files[:3]])
    assert len(woman) >= 12.5 * RATE
    return woman, np.asarray(read_audio(media_dir / "audio/asr/jfk.flac"), np.float32)


@pytest.mark.media
def test_a_voice_over_the_boundary_is_not_folded_into_the_next_speaker(media_dir: Path, tmp_path: Path) -> None:
    from m3agent.perception.audio.voices import perceive_speech
    from m3agent.settings import PerceptionSettings, Settings

    woman, jfk = _speech(media_dir)
    cut = len(woman) - round(1.3 * RATE)  # her last 1.3 s open the clip, then JFK at once
    tail, fragment = woman[cut - 10 * RATE : cut], woman[cut:]
    audio = np.concatenate([fragment, jfk])
    media = ClipMedia(Clip("v", 1, 10.0, 10.0 + len(audio) / RATE), (), audio, context_audio=tail)
    settings = Settings(cache_dir=tmp_path / "cache", perception=PerceptionSettings(asr_model="tiny.en"))
    segments, carried = perceive_speech(media, settings)
    assert carried, "the woman is heard before the clip and in it: one speaker on both sides"
    woman_speakers = {t.speaker for t in carried}
    jfk_speakers = {s.speaker for s in segments if s.start_s >= 10.0 + len(fragment) / RATE + 0.3}
    assert jfk_speakers and not woman_speakers & jfk_speakers


@pytest.mark.media
def test_one_voice_entity_for_speech_across_a_clip_boundary(media_dir: Path, tmp_path: Path) -> None:
    from scipy.io import wavfile

    from m3agent.media import default_video_id
    from m3agent.pipeline import ingest_source
    from m3agent.settings import load_settings
    from m3agent.store import open_memory

    woman, jfk = _speech(media_dir)
    woman = woman[: round(12.5 * RATE)]  # 2.5 s of her reading runs over the 10 s boundary, then JFK at once
    path = tmp_path / "boundary.wav"
    wavfile.write(path, RATE, np.concatenate([woman, jfk]))
    settings = load_settings(memory=str(tmp_path / "m.db"), cache_dir=str(tmp_path / "cache"),
                             media={"clip_seconds": 10.0},
                             perception={"asr_model": "tiny.en", "faces": False, "attributes": False},
                             senses={"shots": False, "text": False, "objects": False, "sounds": False})
    report = ingest_source(settings, str(path), perception_only=True, show_progress=False)
    assert report.clips_done == 3 and not report.clips_failed
    with open_memory(settings, readonly=True, create=False) as store:
        spans = store.voice_spans(default_video_id(str(path)))
    change = len(woman) / RATE

    def heard(lo: float, hi: float) -> dict[int, float]:
        seconds: dict[int, float] = {}
        for start, end, voice in spans:
            seconds[voice] = seconds.get(voice, 0.0) + max(0.0, min(end, hi) - max(start, lo))
        return {v: s for v, s in seconds.items() if s >= 1.0}

    hers, his = heard(0.0, change), heard(change, 1e9)
    assert len(hers) == 1, f"the woman is one voice entity on both sides of 10 s: {spans}"
    assert his and not set(hers) & set(his), f"JFK is not in her voice entity: {spans}"


def test_false_joins_count_two_people_in_one_voice_not_a_mistimed_edge() -> None:
    from bench_helpers import load_bench_script

    perception = load_bench_script("perception")
    truth = [(0.0, 5.0, "a"), (5.0, 10.0, "b"), (4.0, 6.0, "b")]  # 4-5 s: both speak (counts for nobody)
    assert perception.false_joins([(0.0, 5.2, 1), (5.2, 10.0, 2)], truth) == 0  # 0.2 s of b at the edge
    assert perception.false_joins([(0.0, 10.0, 1)], truth) == 1
    assert perception.false_joins([(0.0, 3.0, 1), (3.0, 10.0, 2)], truth) == 0  # a's 1 s is a fifth of voice 2
    assert perception.false_joins([(0.0, 2.0, 1), (2.0, 10.0, 2)], truth) == 1  # a's 2 s is a third of it
