"""Voices: DER scoring, the speaker encoder, within-clip diarization and speaker-attributed segments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import Clip, ClipMedia, Word
from m3agent.perception.audio.diarize import Diarization, SpeakerTurn
from m3agent.perception.audio.scoring import Turn, diarization_error_rate, read_rttm
from m3agent.perception.audio.transcript import AsrResult, AsrSegment
from m3agent.perception.audio.voices import attribute, speaker_of

# -- DER scoring (no models) -------------------------------------------------------

REF = [Turn(0.0, 4.0, "a"), Turn(4.0, 8.0, "b"), Turn(6.0, 7.0, "a")]  # 1 s of overlap


def test_der_is_zero_for_a_relabelled_perfect_hypothesis() -> None:
    hyp = [Turn(t.start_s, t.end_s, {"a": "x", "b": "y"}[t.speaker]) for t in REF]
    assert diarization_error_rate(REF, hyp, collar_s=0.0).der == pytest.approx(0.0)


def test_der_counts_overlap_per_speaker_and_maps_speakers_optimally() -> None:
    # one label per frame: the overlapped second can only be half right
    hyp = [Turn(0.0, 4.0, "x"), Turn(4.0, 8.0, "y")]
    r = diarization_error_rate(REF, hyp, collar_s=0.0)
    assert r.reference_s == pytest.approx(9.0)
    assert r.missed_s == pytest.approx(1.0) and r.confusion_s == pytest.approx(0.0)
    assert r.der == pytest.approx(1 / 9)
    swapped = diarization_error_rate(REF, [Turn(0.0, 8.0, "x")], collar_s=0.0)
    # x maps to "a" (5 s shared): b alone at 4-6 and 7-8 is confusion, the overlap second is missed once
    assert swapped.confusion_s == pytest.approx(3.0) and swapped.missed_s == pytest.approx(1.0)


def test_der_false_alarm_missed_and_collar() -> None:
    ref = [Turn(1.0, 3.0, "a")]
    assert diarization_error_rate(ref, [], collar_s=0.0).der == pytest.approx(1.0)
    late = diarization_error_rate(ref, [Turn(1.2, 3.5, "x")], collar_s=0.0)
    assert late.missed_s == pytest.approx(0.2) and late.false_alarm_s == pytest.approx(0.5)
    collared = diarization_error_rate(ref, [Turn(1.2, 3.2, "x")], collar_s=0.25)
    assert collared.der == pytest.approx(0.0)  # both errors fall inside the 0.25 s collars
    assert collared.reference_s == pytest.approx(1.5)
    scored = diarization_error_rate(ref, [Turn(0.0, 1.0, "x")], collar_s=0.0, scored=(1.0, 3.0))
    assert scored.false_alarm_s == pytest.approx(0.0) and scored.missed_s == pytest.approx(2.0)


def test_read_rttm_filters_by_file(tmp_path: Path) -> None:
    path = tmp_path / "x.rttm"
    path.write_text(
        "SPEAKER f1 1 0.50 1.25 <NA> <NA> s1 <NA> <NA>\nSPEAKER f2 1 0.0 1.0 <NA> <NA> s2 <NA> <NA>\n",
        encoding="utf-8",
    )
    assert read_rttm(path, "f1") == [Turn(0.5, 1.75, "s1")]
    assert len(read_rttm(path)) == 2


# -- attribution (no models) ---------------------------------------------------------


def _words(*spans: tuple[str, float, float]) -> tuple[Word, ...]:
    return tuple(Word(t, a, b) for t, a, b in spans)


def test_segment_is_split_where_the_speaker_changes() -> None:
    words = _words(("hello", 0.0, 0.4), ("there.", 0.5, 0.9), ("Hi", 1.2, 1.4), ("back", 1.5, 1.9))
    seg = AsrSegment(0.0, 1.9, "hello there. Hi back", words, (" hello", " there.", " Hi", " back"))
    diar = Diarization(
        (SpeakerTurn(0.0, 1.0, 0), SpeakerTurn(1.1, 2.0, 1)),
        {0: np.ones(256, np.float32) / 16, 1: -np.ones(256, np.float32) / 16},
    )
    out = attribute(AsrResult((seg,), "en", 0.9), diar, clip_index=3, offset_s=60.0)
    assert [(s.speaker, s.text, s.start_s, s.end_s) for s in out] == [
        (0, "hello there.", 60.0, 60.9),
        (1, "Hi back", 61.2, 61.9),
    ]
    assert all(s.clip_index == 3 and s.language == "en" for s in out)
    assert out[1].words[0] == Word("Hi", 61.2, 61.4)
    assert out[0].embedding is diar.embeddings[0] and out[1].embedding is diar.embeddings[1]


def test_one_stray_short_word_does_not_split_a_segment() -> None:
    words = _words(("a", 0.0, 0.3), ("b", 0.35, 0.5), ("c", 0.6, 0.9))
    diar = Diarization((SpeakerTurn(0.0, 0.33, 0), SpeakerTurn(0.33, 0.55, 1), SpeakerTurn(0.55, 1.0, 0)), {})
    out = attribute(AsrResult((AsrSegment(0.0, 0.9, "a b c", words),), "en"), diar, clip_index=0, offset_s=0.0)
    assert [(s.speaker, s.text) for s in out] == [(0, "a b c")]


def test_speaker_of_overlap_nearest_and_unknown() -> None:
    turns = (SpeakerTurn(0.0, 1.0, 0), SpeakerTurn(1.0, 3.0, 1))
    assert speaker_of(0.8, 1.5, turns) == 1  # 0.5 s with 1 beats 0.2 s with 0
    assert speaker_of(3.5, 3.8, turns) == 1  # no overlap: nearest turn within 1 s
    assert speaker_of(5.0, 5.5, turns) == -1
    assert speaker_of(0.0, 1.0, ()) == -1


# -- real models on real audio --------------------------------------------------------


@pytest.fixture(scope="module")
def encoder():  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    pytest.importorskip("resemblyzer")
    from m3agent.perception.audio.speakers import SpeakerEncoder

    return SpeakerEncoder(threads=2)


def _read(path: Path) -> np.ndarray:
    from m3agent.media import read_audio

    return read_audio(path)


def test_mel_front_end_matches_librosa() -> None:
    librosa = pytest.importorskip("librosa")
    from m3agent.perception.audio.speakers import mel_frames

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(16000 * 2) * 0.1).astype(np.float32)
    ours = mel_frames(x)
    ref = librosa.feature.melspectrogram(y=x, sr=16000, n_fft=400, hop_length=160, n_mels=40).T
    assert ours.shape == ref.shape
    assert np.abs(ours - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.media
def test_encoder_tells_librispeech_speakers_apart(media_dir: Path, encoder) -> None:  # type: ignore[no-untyped-def]
    root = media_dir / "audio" / "speaker_id" / "librispeech_test-other"
    speakers = ["1688", "1998", "3005", "3080"]
    emb = {s: [encoder.embed(_read(p)) for p in sorted((root / s).glob("*.flac"))[:3]] for s in speakers}
    for vectors in emb.values():
        assert all(v.shape == (256,) and abs(float(np.linalg.norm(v)) - 1) < 1e-4 for v in vectors)
    # every utterance is closest to another utterance of its own speaker
    items = [(s, v) for s, vs in emb.items() for v in vs]
    for i, (s, v) in enumerate(items):
        sims = [(float(v @ w), t) for j, (t, w) in enumerate(items) if j != i]
        assert max(sims)[1] == s
    same = np.mean([float(a @ b) for vs in emb.values() for i, a in enumerate(vs) for b in vs[i + 1 :]])
    diff = np.mean([float(a @ b) for s, vs in emb.items() for t, ws in emb.items() if s < t for a in vs for b in ws])
    assert same - diff > 0.1


@pytest.mark.media
def test_diarization_of_the_pyannote_sample(media_dir: Path, encoder) -> None:  # type: ignore[no-untyped-def]
    from m3agent.perception.audio.diarize import diarize

    folder = media_dir / "audio" / "diarization" / "pyannote_sample"
    result = diarize(_read(folder / "sample.wav"), encoder)
    hyp = [Turn(t.start_s, t.end_s, str(t.speaker)) for t in result.turns]
    assert diarization_error_rate(read_rttm(folder / "sample.rttm"), hyp).der <= 0.20
    talk: dict[int, float] = {}
    for t in result.turns:
        talk[t.speaker] = talk.get(t.speaker, 0.0) + t.end_s - t.start_s
    main_two = sorted(talk.values())[-2:]
    assert 2 <= result.n_speakers <= 3 and sum(main_two) >= 0.9 * sum(talk.values())
    assert [t.start_s for t in result.turns] == sorted(t.start_s for t in result.turns)
    assert result.turns[0].speaker == 0  # numbered by first appearance


@pytest.mark.media
def test_diarization_finds_three_sequential_speakers(media_dir: Path, encoder) -> None:  # type: ignore[no-untyped-def]
    from m3agent.perception.audio.diarize import diarize

    folder = media_dir / "audio" / "diarization" / "picovoice_falcon"
    result = diarize(_read(folder / "test.wav"), encoder)
    assert result.n_speakers == 3
    order = [t.speaker for t in result.turns if t.end_s - t.start_s > 0.5]
    assert order[0] == 0 and max(order) == 2 and sorted(set(order)) == [0, 1, 2]
    hyp = [Turn(t.start_s, t.end_s, str(t.speaker)) for t in result.turns]
    assert diarization_error_rate(read_rttm(folder / "test.rttm"), hyp).der <= 0.15


def test_silence_gives_no_turns(encoder) -> None:  # type: ignore[no-untyped-def]
    from m3agent.perception.audio.diarize import diarize

    assert diarize(np.zeros(16000 * 5, np.float32), encoder).turns == ()
    assert diarize(np.zeros(0, np.float32), encoder).turns == ()


# -- perceive_audio end to end ----------------------------------------------------------


def _settings(tmp_path: Path, **perception: object):  # type: ignore[no-untyped-def]
    from m3agent.settings import PerceptionSettings, Settings

    return Settings(cache_dir=tmp_path / "cache", perception=PerceptionSettings(asr_model="tiny.en", **perception))


def _clip(audio: np.ndarray, index: int = 0, start: float = 0.0) -> ClipMedia:
    return ClipMedia(Clip("v", index, start, start + len(audio) / 16000), (), audio)


def test_no_audio_or_silence_gives_no_segments(tmp_path: Path) -> None:
    from m3agent.perception.audio.voices import perceive_audio

    settings = _settings(tmp_path)
    assert perceive_audio(ClipMedia(Clip("v", 0, 0.0, 30.0), (), None), settings) == ()
    assert perceive_audio(_clip(np.zeros(0, np.float32)), settings) == ()
    timings: dict[str, float] = {}
    assert perceive_audio(_clip(np.zeros(16000 * 30, np.float32)), settings, timings) == ()
    assert set(timings) == {"vad", "diarize"}
    noise = (np.random.default_rng(1).standard_normal(16000 * 3) * 1e-4).astype(np.float32)
    assert perceive_audio(_clip(noise), settings) == ()
    assert perceive_audio(_clip(noise), _settings(tmp_path, voices=False)) == ()


@pytest.mark.media
def test_two_speakers_are_transcribed_and_attributed(media_dir: Path, tmp_path: Path) -> None:
    from m3agent.perception.audio.voices import perceive_audio

    woman = _read(sorted((media_dir / "audio/speaker_id/librispeech_test-other/1998").glob("*.flac"))[0])
    jfk = _read(media_dir / "audio/asr/jfk.flac")
    gap = np.zeros(8000, np.float32)
    audio = np.concatenate([woman, gap, jfk]).astype(np.float32)
    boundary = 120.0 + (len(woman) + len(gap)) / 16000
    timings: dict[str, float] = {}
    segments = perceive_audio(_clip(audio, index=4, start=120.0), _settings(tmp_path), timings)
    assert set(timings) == {"vad", "diarize", "voice_embed", "asr"}  # voice_embed: CAM++, the default
    assert all(s.clip_index == 4 and 120.0 <= s.start_s <= s.end_s <= 120.0 + len(audio) / 16000 for s in segments)
    # the last words before the pause may go either way: a 1.6 s window straddles the change there
    before = {s.speaker for s in segments if s.end_s <= boundary - 1.0}
    after = [s for s in segments if s.start_s >= boundary - 0.1]
    assert len(before) == 1 and {s.speaker for s in after} == {1 - next(iter(before))}
    jfk_text = " ".join(s.text for s in after).lower()
    assert "ask not what your country can do for you" in jfk_text
    assert all(s.embedding is not None and s.embedding.shape == (192,) for s in segments)
    assert float(after[0].embedding @ segments[0].embedding) < 0.9
    words = [w for s in after for w in s.words]
    assert words and all(boundary - 0.1 <= w.start_s <= w.end_s for w in words)


@pytest.mark.media
def test_a_short_utterance_is_kept(media_dir: Path, tmp_path: Path) -> None:
    from m3agent.perception.audio.voices import perceive_audio

    jfk = _read(media_dir / "audio/asr/jfk.flac")
    onset = int(np.argmax(np.abs(jfk) > 0.05))
    short = jfk[max(0, onset - 1600) : onset + int(1.6 * 16000)]  # "And so my fellow ..." (~1.7 s)
    silence = np.zeros(16000 * 4, np.float32)
    segments = perceive_audio(_clip(np.concatenate([silence, short, silence]), start=30.0), _settings(tmp_path))
    assert len(segments) >= 1
    text = " ".join(s.text for s in segments).lower()
    assert "fellow" in text
    assert all(s.start_s >= 33.5 and s.end_s <= 36.0 for s in segments)
    assert {s.speaker for s in segments} == {0}


def test_importing_voices_loads_nothing_heavy() -> None:
    code = (
        "import sys, m3agent.perception.audio.voices, m3agent.media; "
        "bad = [m for m in ('torch', 'faster_whisper', 'av', 'numpy', 'sklearn', 'resemblyzer') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.media
def test_clip_audio_at_another_rate_is_resampled(media_dir: Path, tmp_path: Path) -> None:
    from scipy.signal import resample_poly

    from m3agent.perception.audio.voices import perceive_audio

    jfk = _read(media_dir / "audio/asr/jfk.flac")
    at_8k = resample_poly(jfk, 1, 2).astype(np.float32)
    media = ClipMedia(Clip("v", 0, 0.0, len(jfk) / 16000), (), at_8k, audio_rate=8000)
    text = " ".join(s.text for s in perceive_audio(media, _settings(tmp_path))).lower()
    assert "my fellow" in text and "ask not what your country can do for you" in text
