"""A change of voice inside one diarized turn goes to the speaker it is (issue 48, item 3).

Real voices (a LibriSpeech reader and JFK) and the real CAM++ embedder; the diarization is written by hand so that
one turn holds both voices, as the d-vector diarizer leaves a short answer inside the next speaker's turn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from m3agent.perception.audio.diarize import Diarization, SpeakerTurn

pytestmark = pytest.mark.media

RATE = 16000


@pytest.fixture(scope="module")
def voices(media_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """A woman (LibriSpeech 1998) and JFK, at least 11 s each."""
    from m3agent.media import read_audio

    files = sorted((media_dir / "audio/speaker_id/librispeech_test-other/1998").glob("*.flac"))
    woman = np.concatenate([np.asarray(read_audio(f), np.float32) for f in files[:3]])
    jfk = np.asarray(read_audio(media_dir / "audio/asr/jfk.flac"), np.float32)
    assert len(woman) >= 11 * RATE and len(jfk) >= 10 * RATE
    return woman, jfk


@pytest.fixture(scope="module")
def embedder() -> object:
    from m3agent.perception.audio.campplus import CamppEmbedder
    from m3agent.settings import Settings

    return CamppEmbedder(2, cache_dir=Settings().resolved_cache_dir())


def _s(seconds: float) -> int:
    return round(seconds * RATE)


def _diarized(audio: np.ndarray, turns: tuple[SpeakerTurn, ...], embedder: object) -> Diarization:
    from m3agent.perception.audio.voices import speaker_embeddings

    blank = Diarization(turns, {0: np.zeros(192, np.float32), 1: np.zeros(192, np.float32)}, ((0.0, 15.0),))
    return speaker_embeddings(audio, blank, embedder)  # type: ignore[arg-type]


TURNS = (SpeakerTurn(0.0, 4.0, 0), SpeakerTurn(4.0, 7.5, 1), SpeakerTurn(8.0, 11.0, 1), SpeakerTurn(11.0, 15.0, 0))
"""Her, him, a turn after a pause that the diarizer gave him, her. A turn longer than 4 s is not searched."""


def test_her_answer_inside_his_turn_goes_to_her(voices: tuple[np.ndarray, np.ndarray], embedder: object) -> None:
    from m3agent.perception.audio.changes import split_changes

    woman, jfk = voices
    # she 0-4 s, he 4-8 s, she 8-9.5 s and he 9.5-11 s (one turn, labelled his), she 11-15 s
    audio = np.concatenate([woman[: _s(4)], jfk[: _s(4)], woman[_s(4) : _s(5.5)], jfk[_s(4) : _s(5.5)],
                            woman[_s(5.5) : _s(9.5)]])
    diarization = _diarized(audio, TURNS, embedder)
    split, changed = split_changes(audio, diarization, embedder, change_below=0.3,  # type: ignore[arg-type]
                                   join_from=0.45)
    assert changed == {0}, "she took speech; he only gave some"
    hers = [t for t in split.turns if t.speaker == 0 and 7.9 <= t.start_s < 11.0]
    assert len(hers) == 1, split.turns
    assert hers[0].start_s == 8.0 and 9.0 <= hers[0].end_s <= 10.0, "the cut is where the voices change"
    assert any(t.speaker == 1 and t.start_s == hers[0].end_s and t.end_s == 11.0 for t in split.turns)


def test_one_voice_in_a_turn_stays_whole(voices: tuple[np.ndarray, np.ndarray], embedder: object) -> None:
    from m3agent.perception.audio.changes import split_changes

    woman, jfk = voices
    audio = np.concatenate([woman[: _s(4)], jfk[: _s(7)], woman[_s(4) : _s(8)]])
    diarization = _diarized(audio, TURNS, embedder)
    split, changed = split_changes(audio, diarization, embedder, change_below=0.3,  # type: ignore[arg-type]
                                   join_from=0.45)
    assert not changed and split is diarization
    off, nothing = split_changes(audio, diarization, embedder, change_below=-1, join_from=0.45)  # type: ignore[arg-type]
    assert off is diarization and not nothing


def test_the_speaker_that_took_speech_is_embedded_anew(voices: tuple[np.ndarray, np.ndarray], embedder: object) -> None:
    from m3agent.perception.audio.voices import _split_changes
    from m3agent.settings import Settings

    woman, jfk = voices
    audio = np.concatenate([woman[: _s(4)], jfk[: _s(4)], woman[_s(4) : _s(5.5)], jfk[_s(4) : _s(5.5)],
                            woman[_s(5.5) : _s(9.5)]])
    diarization = _diarized(audio, TURNS, embedder)
    after = _split_changes(audio, diarization, embedder, Settings())  # type: ignore[arg-type]
    assert [t.speaker for t in after.turns] == [0, 1, 0, 1, 0], after.turns
    her_alone = embedder.embed(np.concatenate([woman[: _s(4)], woman[_s(5.5) : _s(9.5)]]))  # type: ignore[attr-defined]
    assert float(after.embeddings[0] @ her_alone) > 0.9
    assert np.array_equal(after.embeddings[1], diarization.embeddings[1]), "his stays that of his whole turns"
    unchanged = _split_changes(audio, diarization, embedder,  # type: ignore[arg-type]
                               Settings(perception={"voice_change_similarity": -1}))
    assert unchanged is diarization


APART = (SpeakerTurn(0.0, 3.0, 0), SpeakerTurn(3.0, 6.0, 1), SpeakerTurn(12.0, 15.0, 0))
"""Speaker 0 heard at 0-3 s and again 9 s later (12-15 s), as the diarizer clusters two people it hears far apart."""


def _apart(first: np.ndarray, second: np.ndarray, other: np.ndarray) -> np.ndarray:
    silence = np.zeros(_s(6), np.float32)
    return np.concatenate([first[: _s(3)], other[: _s(3)], silence, second[_s(3) : _s(6)]])


def test_two_voices_heard_far_apart_as_one_speaker_are_split(voices: tuple[np.ndarray, np.ndarray],
                                                              embedder: object, media_dir: Path) -> None:
    """Her at 0-3 s and JFK at 12-15 s, clustered as one speaker: his side becomes a speaker of its own (the clip's
    other speaker is a third reader, so he fits no one heard); her again at 12-15 s stays one speaker."""
    from m3agent.media import read_audio
    from m3agent.perception.audio.changes import split_apart

    woman, jfk = voices
    readers = sorted(p for p in (media_dir / "audio/speaker_id/librispeech_test-other").iterdir() if p.is_dir())
    other = np.concatenate([np.asarray(read_audio(f), np.float32)
                            for f in sorted(next(r for r in readers if r.name != "1998").glob("*.flac"))[:2]])
    audio = _apart(woman, jfk, other)
    split, changed = split_apart(audio, _diarized(audio, APART, embedder), embedder,  # type: ignore[arg-type]
                                 change_below=0.3, join_from=0.45)
    assert changed == {0, 2}, split.turns
    assert [t.speaker for t in split.turns] == [0, 1, 2]
    same = _apart(woman, woman, other)
    kept, nothing = split_apart(same, _diarized(same, APART, embedder), embedder,  # type: ignore[arg-type]
                                change_below=0.3, join_from=0.45)
    assert not nothing and kept.turns == APART
