"""Speech recognition with faster-whisper (CTranslate2, int8 on CPU), from packaged models only
(:mod:`m3agent.perception.audio.asr_models` finds them).

Only the given speech regions are transcribed (joined without their pauses,
as faster-whisper's own VAD filter does); timestamps are mapped back to the
original audio, with word-level times.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.domain import Word
from m3agent.errors import MissingExtraError, ModelError
from m3agent.perception.audio.asr_gaps import drop_jumped, drop_sparse, sparse, unheard
from m3agent.perception.audio.asr_models import resolve_asr_model
from m3agent.perception.audio.transcript import AsrResult, AsrSegment

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

RATE = 16000


# -- transcription -------------------------------------------------------------


class Transcriber:
    """A faster-whisper model loaded on first use; one instance per process is enough."""

    def __init__(self, model: str, cache_dir: Path, *, threads: int = 2, beam: int = 1) -> None:
        self.model_name = model
        self.cache_dir = cache_dir
        self.threads = threads
        self.beam = beam
        self._model: Any = None
        self._english_only = False
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                path, self._english_only = resolve_asr_model(self.model_name, self.cache_dir)
                model = _open_whisper(path, self.threads)
                model.model = _LanguageRecorder(model.model)
                self._model = model
        return self._model

    def transcribe(
        self,
        audio: npt.NDArray[np.float32],
        regions: list[tuple[float, float]] | tuple[tuple[float, float], ...],
        language: str | None = None,
    ) -> AsrResult:
        """Transcribe the ``regions`` (seconds) of 16 kHz mono ``audio``; no regions, no result.

        Whisper sometimes skips speech and never decodes it: it ends a window early (the token budget runs out
        on dense speech, or it stops after an overlap), or it stamps the first words of a window with a time
        20 s later and goes on from there. Speech that no segment covers is decoded once more on its own
        (measured: the last 17 s of a 30 s window of debate and a speech, and the first 20 s of a window of the
        people-and-order episode, a talking head and an interview, were lost without this). That speech is decoded in
        the caller's language, or its own when none is given, not the first pass's: a clip can change language (the
        people-and-order episode's Russian speech followed by English read over a dark screen, whose 14 s the
        Russian-bound pass dropped).
        """
        return self._transcribe(audio, regions, language, split=True)

    def _transcribe(self, audio: npt.NDArray[np.float32],
                    regions: list[tuple[float, float]] | tuple[tuple[float, float], ...], language: str | None, *,
                    split: bool) -> AsrResult:
        """:meth:`transcribe`; with ``split``, speech whose language was read with less than :data:`LANGUAGE_SURE`
        is two halves, each in the language read from it alone (a window of English debate followed by Russian
        speech was read as Russian, 0.52 against 0.47 for English, and the debate written in Russian; each part
        alone reads 0.99 English and 0.95 Russian). A half is split no further: an uncertain part is then noise
        or an accent, and decoding it again would only cost."""
        first = self._decode(audio, regions, language)
        if split and language is None and first.result.language \
                and first.result.language_probability < LANGUAGE_SURE and (halves := _halves(regions)):
            return _joined([self._transcribe(audio, half, None, split=False) for half in halves])
        stretches = unheard(regions, first.spans) if first.spans or first.sparse else []
        if not stretches:
            return first.result
        more = self._decode(audio, [piece for stretch in stretches for piece in stretch], language).result
        kept = drop_sparse(drop_jumped(first.result.segments, more.segments, stretches), first.sparse,
                           more.segments)
        segments = tuple(sorted(kept + more.segments, key=lambda s: s.start_s))
        return AsrResult(segments, first.result.language or more.language,
                         first.result.language_probability or more.language_probability)

    def _decode(
        self,
        audio: npt.NDArray[np.float32],
        regions: list[tuple[float, float]] | tuple[tuple[float, float], ...],
        language: str | None,
    ) -> _Pass:
        """One greedy pass; a second one that may not repeat itself when the first looped.

        Whisper loops on overlapped speech ("No, I did not." to the end of the window) and the quality gate
        then drops the whole window (measured: every word of the two-speaker interview was lost). Temperature
        fallback is random and looped again in half the seeds; forbidding a repeated 4-gram gave the
        interview's words and costs a second pass only where the first looped. It is not the first pass's
        setting because it also rewrites real repeats ("Why didn't you do it?" twice in the debate).
        """
        speech, chunk_map = _join_regions(audio, regions)
        if len(speech) < RATE // 10:
            return _Pass(AsrResult(()), looped=False)
        model = self._load()
        lang = "en" if self._english_only else language
        first = self._pass(model, speech, chunk_map, lang, repeat_guard=0)
        if not first.looped:
            return first
        second = self._pass(model, speech, chunk_map, lang or first.result.language or None,
                            repeat_guard=REPEAT_GUARD_NGRAM)
        if lang is None:  # decoded in the language the first pass read: as sure of it as that reading was
            second = replace(second, result=replace(second.result,
                                                    language_probability=first.result.language_probability))
        return second if _heard_s(second.result) > _heard_s(first.result) else first

    def _pass(self, model: Any, speech: npt.NDArray[np.float32], chunk_map: _ChunkMap, language: str | None,
              repeat_guard: int) -> _Pass:
        from threadpoolctl import threadpool_limits

        # One decoding pass with a token budget: Whisper's temperature fallback re-decodes hard
        # audio up to five more times, and on wind or crowd noise it loops ("a, a, a, ...") to
        # its 448-token limit; together that cost ~20 s per 30 s clip. Segments Whisper itself
        # scores as unreliable are dropped.
        # BLAS threads (numpy's mel filterbank) follow `threads` too: the float sums, and so the
        # words, must not depend on the process's default (a Ray task of 1 CPU gets 1 thread).
        # Without a language each window's language is read from the encoding it is decoded from
        # (`multilingual`): faster-whisper's own detection encodes the first window a second time
        # (3.0 of 8.8 s on the debate, one thread).
        detect = language is None and bool(model.model.is_multilingual)
        with threadpool_limits(limits=self.threads, user_api="blas"), model.model.recording() as heard:
            segments, info = model.transcribe(
                speech,
                language="en" if detect else language,
                multilingual=detect,
                beam_size=self.beam,
                temperature=0.0,
                no_repeat_ngram_size=repeat_guard,
                max_new_tokens=generation_limit(token_budget(len(speech) / RATE)),
                word_timestamps=True,
                vad_filter=False,
                condition_on_previous_text=False,
            )
            listed = list(segments)
        written = [(seg, _segment(seg, chunk_map)) for seg in listed if _reliable(seg)]
        thin = {id(seg) for seg, _ in written if sparse(len(seg.words or ()), seg.end - seg.start)}
        lang, probability = heard[0] if detect and heard else (str(info.language or ""),
                                                               float(info.language_probability or 0.0))
        written = [(seg, replace(s, language=lang)) for seg, s in written]
        out = tuple(s for _, s in written if s.text)
        looped = any(_repetitive(seg) for seg in listed)
        spans = tuple(chunk_map.original_bounds(seg.start, seg.end) for seg in listed if id(seg) not in thin)
        return _Pass(AsrResult(out, lang, probability), looped, spans,
                     tuple(s for seg, s in written if s.text and id(seg) in thin))


REPEAT_GUARD_NGRAM = 4  # the second pass after a loop may not repeat any 4 tokens in a row
LANGUAGE_SURE = 0.8
"""A window's language read with less probability than this may hold two (clean speech of one reads 0.93-0.99)."""
MIN_LANGUAGE_S = 4.0
"""Each half of an uncertain window holds at least this much speech: Whisper reads a language from a few seconds."""


def _halves(regions: list[tuple[float, float]] | tuple[tuple[float, float], ...]
            ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]] | None:
    """``regions`` cut in two at the pause between them nearest the middle of their speech (where one speaker or
    piece most likely gives way to the next), or at that middle when no pause lies within its middle half; None
    when a half would hold less than :data:`MIN_LANGUAGE_S` of speech."""
    total = sum(b - a for a, b in regions)
    if total < 2 * MIN_LANGUAGE_S:
        return None
    heard, pauses = 0.0, []
    for i, (a, b) in enumerate(regions[:-1]):
        heard += b - a
        pauses.append((abs(heard - total / 2), heard, regions[i + 1][0]))
    near = min(pauses, default=None)
    if near is not None and near[0] <= total / 4 and min(near[1], total - near[1]) >= MIN_LANGUAGE_S:
        cut = near[2]
    else:
        cut, left = regions[0][0], total / 2
        for a, b in regions:
            if b - a >= left:
                cut = a + left
                break
            left -= b - a
    return ([(a, min(b, cut)) for a, b in regions if a < cut], [(max(a, cut), b) for a, b in regions if b > cut])


def _joined(parts: list[AsrResult]) -> AsrResult:
    """One result of parts decoded apart: their segments in time order, each with its own language; the result's
    language is that of the most speech."""
    segments = tuple(sorted((s for r in parts for s in r.segments), key=lambda s: s.start_s))
    main = max(parts, key=_heard_s)
    return AsrResult(segments, main.language, main.language_probability)


@dataclass(frozen=True, slots=True)
class _Pass:
    result: AsrResult
    looped: bool  # some window was too repetitive to keep (Whisper's compression-ratio gate)
    spans: tuple[tuple[float, float], ...] = ()  # every segment Whisper wrote, kept or not, in the input's times,
    # but the sparse ones (asr_gaps.sparse: a few words over many seconds), which cover nothing
    sparse: tuple[AsrSegment, ...] = ()  # the kept segments that are sparse


def _heard_s(result: AsrResult) -> float:
    return sum(s.end_s - s.start_s for s in result.segments)


class _LanguageRecorder:
    """Stands in for a faster-whisper model's CTranslate2 model and records the languages it detects.

    faster-whisper reports only the language it was given when it detects each window's language itself;
    every other call passes through unchanged.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._heard = threading.local()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @contextmanager
    def recording(self) -> Iterator[list[tuple[str, float]]]:
        """The ``(language, probability)`` of each window decoded in this thread within the block."""
        heard: list[tuple[str, float]] = []
        self._heard.record = heard
        try:
            yield heard
        finally:
            self._heard.record = None

    def detect_language(self, *args: Any, **kwargs: Any) -> Any:
        results = self._inner.detect_language(*args, **kwargs)
        record = getattr(self._heard, "record", None)
        if record is not None and results and results[0]:
            token, probability = results[0][0]
            record.append((str(token).strip("<|>"), float(probability)))
        return results


BASE_TOKENS = 8
TOKENS_PER_SECOND = 3.0  # fast English speech is ~3.5 tokens/s with timestamps; loops are far above
MOST_TOKENS = 112
WINDOW_S = 30.0


def token_budget(speech_s: float) -> int:
    """Most tokens one 30 s Whisper window may produce for ``speech_s`` seconds of speech.

    Dense speech runs out of it; Whisper then goes on in a fresh window from its last timestamp. That costs
    an encoding more, but on the debate's overlapped speech the fresh window kept a repeated phrase that one
    long window dropped, and the speaker links that lip sync finds held in 100 % of the draws with each
    segment bound moved by up to 0.3 s, against 48-78 % with a budget twice this large (tests/test_lip_sync_
    debate.py). This is the budget the first versions had in effect (16 + 6 tokens/s, halved by CTranslate2).
    """
    return int(min(MOST_TOKENS, BASE_TOKENS + TOKENS_PER_SECOND * min(speech_s, WINDOW_S)))


PROMPT_ROOM = 8  # faster-whisper refuses prompt + max_new_tokens > 448; its prompt is 3-4 tokens here


def generation_limit(budget: int) -> int:
    """The ``max_new_tokens`` that lets a window produce ``budget`` tokens.

    CTranslate2's Whisper decoder stops at half the length it is given (``min(total / 2, total - prompt)``, as
    OpenAI's ``sample_len``; CTranslate2 issue 1856).
    """
    return min(2 * budget, 448 - PROMPT_ROOM)


MIN_AVG_LOGPROB = -1.0
MAX_COMPRESSION_RATIO = 2.4
NO_SPEECH_PROB = 0.6


def _repetitive(segment: Any) -> bool:
    """Whisper's compression-ratio gate: the window's text repeats itself (a decoding loop)."""
    return bool(segment.compression_ratio > MAX_COMPRESSION_RATIO)


def _reliable(segment: Any) -> bool:
    """Whisper's own quality gates: too unlikely, too repetitive, or probably not speech."""
    if segment.avg_logprob < MIN_AVG_LOGPROB or _repetitive(segment):
        return False
    return not (segment.no_speech_prob > NO_SPEECH_PROB and segment.avg_logprob < -0.5)


def _open_whisper(path: str, threads: int) -> Any:
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        raise MissingExtraError("speech recognition", "voices", package="faster-whisper") from None
    try:
        return WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=threads, local_files_only=True)
    except Exception as exc:  # CTranslate2 and the hub raise assorted types for a bad model
        raise ModelError(
            f"cannot load the Whisper model {path!r}: {exc}",
            hint="use 'base', 'tiny.en' or a folder with a CTranslate2 Whisper model (nothing is downloaded)",
        ) from None


class _ChunkMap:
    """Maps times in the joined speech back to times in the original audio."""

    def __init__(self) -> None:
        self.joined_starts: list[int] = []
        self.original_starts: list[int] = []

    def add(self, original_start: int, joined_start: int) -> None:
        self.original_starts.append(original_start)
        self.joined_starts.append(joined_start)

    def _chunk(self, sample: int) -> int:
        return max(0, bisect.bisect_right(self.joined_starts, sample) - 1)

    def original_bounds(self, start: float, end: float) -> tuple[float, float]:
        """Original times of a joined-audio span's two ends, each in its own chunk: what a long segment that
        crosses junctions covers (``original_span`` keeps a word inside one chunk)."""
        a, b = round(start * RATE), max(round(start * RATE), round(end * RATE) - 1)
        i, j = self._chunk(a), self._chunk(b)
        return ((a + self.original_starts[i] - self.joined_starts[i]) / RATE,
                (b + 1 + self.original_starts[j] - self.joined_starts[j]) / RATE)

    def original_span(self, start: float, end: float) -> tuple[float, float]:
        """Original ``(start, end)`` of a joined-audio span, kept inside one chunk.

        A span crossing a junction (the model placed a word boundary a little off)
        would otherwise stretch over the pause that was cut out; it is kept in the
        chunk that holds most of it.
        """
        a, b = round(start * RATE), max(round(start * RATE), round(end * RATE) - 1)
        i, j = self._chunk(a), self._chunk(b)
        if i != j:
            junction = self.joined_starts[j]
            if b - junction >= junction - a:
                i, a = j, junction
            else:
                j, b = i, junction - 1
        offset_a = self.original_starts[i] - self.joined_starts[i]
        offset_b = self.original_starts[j] - self.joined_starts[j]
        return (a + offset_a) / RATE, (b + 1 + offset_b) / RATE


def _join_regions(
    audio: npt.NDArray[np.float32], regions: list[tuple[float, float]] | tuple[tuple[float, float], ...]
) -> tuple[npt.NDArray[np.float32], _ChunkMap]:
    import numpy as np

    pieces, chunk_map, joined = [], _ChunkMap(), 0
    for a, b in regions:
        lo, hi = max(0, round(a * RATE)), min(len(audio), round(b * RATE))
        if hi > lo:
            chunk_map.add(lo, joined)
            pieces.append(audio[lo:hi])
            joined += hi - lo
    speech = np.concatenate(pieces).astype(np.float32) if pieces else np.zeros(0, dtype=np.float32)
    return speech, chunk_map


def _segment(seg: Any, chunk_map: _ChunkMap) -> AsrSegment:
    raw = [w for w in (seg.words or ()) if w.word.strip()]
    words = []
    for w in raw:
        start, end = chunk_map.original_span(w.start, w.end)
        words.append(Word(text=w.word.strip(), start_s=start, end_s=end, probability=float(w.probability)))
    if words:
        start, end = words[0].start_s, words[-1].end_s
    else:
        start, end = chunk_map.original_span(seg.start, seg.end)
    return AsrSegment(start, end, seg.text.strip(), tuple(words), tuple(w.word for w in raw))
