"""Audio perception of one clip: VAD, within-clip speaker turns, ASR, speaker-attributed segments.

:func:`perceive_audio` is what the pipeline calls. Every transcribed word is
given to the diarized speaker whose turns overlap it most; a Whisper segment
whose words change speaker is split there. ``VoiceSegment.speaker`` is the
within-clip speaker index (0, 1, ... by first appearance) and
``VoiceSegment.embedding`` is that speaker's clip-level voice embedding (the
normalised mean of all its d-vector windows in the clip), so all segments of one
speaker in a clip share one, more reliable, vector for cross-clip matching. With
``perception.voice_embedder = "campplus"`` that vector is instead the CAM++
embedding of all the speaker's turns in the clip (the diarizer keeps the d-vector), and a short turn that holds two
voices gives each side to the speaker it is (:mod:`m3agent.perception.audio.changes`).
:func:`perceive_speech` (the pipeline's call) also diarizes the previous clip's last seconds with the clip, so a
voice that runs over the boundary is one speaker on both sides (``ClipPerception.carried``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from m3agent.domain import CarriedTurn, ClipMedia, VoiceSegment, Word
from m3agent.perception.audio.asr import Transcriber
from m3agent.perception.audio.campplus import CamppEmbedder
from m3agent.perception.audio.changes import split_apart, split_changes
from m3agent.perception.audio.diarize import Diarization, DiarizationParams, SpeakerTurn, diarize
from m3agent.perception.audio.speakers import RATE, SpeakerEncoder
from m3agent.perception.audio.transcript import AsrResult, AsrSegment
from m3agent.perception.audio.vad import speech_probabilities
from m3agent.text import SPACELESS_LANGUAGES

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

    from m3agent.settings import Settings

MAX_ATTRIBUTION_GAP_S = 1.0
SHORT_SPEAKER_S = 2.0  # a speaker with less speech than this in a clip has a less reliable embedding
LABELLED_TURN_S = 1.6
"""The diarizer's window: a shorter turn is labelled by windows that mostly hold its neighbours' speech, so it may
be someone else's (the people-and-order episode: a woman's last second before a cut took the label of a man who
spoke two cuts later, and the two together scored 0.48 against her voice elsewhere, the man alone 0.20)."""


class AudioModels:
    """The speaker encoder, the identity embedder (None: the encoder's) and the transcriber, each loaded on
    first use."""

    def __init__(self, asr_model: str, cache_dir: Path, *, threads: int = 2, beam: int = 1,
                 voice_embedder: str = "resemblyzer") -> None:
        self.encoder = SpeakerEncoder(threads)
        self.identity: CamppEmbedder | None = None
        if voice_embedder == "campplus":
            self.identity = CamppEmbedder(threads, cache_dir=cache_dir)
        self.transcriber = Transcriber(asr_model, cache_dir, threads=threads, beam=beam)
        self.diarization = DiarizationParams()


_MODELS: dict[tuple[str, str, int, int, str], AudioModels] = {}
_MODELS_LOCK = threading.Lock()


def audio_models(settings: Settings) -> AudioModels:
    """The process-wide :class:`AudioModels` for these settings (created once, loaded lazily)."""
    p = settings.perception
    cache_dir = settings.resolved_cache_dir()
    key = (p.asr_model, str(cache_dir), p.threads, p.asr_beam, p.voice_embedder)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = AudioModels(p.asr_model, cache_dir, threads=p.threads, beam=p.asr_beam,
                                       voice_embedder=p.voice_embedder)
        return _MODELS[key]


def perceive_audio(
    media: ClipMedia,
    settings: Settings,
    timings: dict[str, float] | None = None,
    models: AudioModels | None = None,
) -> tuple[VoiceSegment, ...]:
    """Speaker-attributed transcript segments of ``media`` (absolute times); ``()`` without speech.

    ``timings`` (if given) receives seconds spent in ``vad``, ``diarize``, ``voice_embed`` (CAM++ only) and ``asr``.
    """
    return perceive_speech(media, settings, timings, models)[0]


def perceive_speech(
    media: ClipMedia,
    settings: Settings,
    timings: dict[str, float] | None = None,
    models: AudioModels | None = None,
) -> tuple[tuple[VoiceSegment, ...], tuple[CarriedTurn, ...]]:
    """:func:`perceive_audio`'s segments, and where their speakers were heard in ``media.context_audio``.

    The last ``perception.voice_context_seconds`` before the clip are diarized with it: a voice that runs over
    the boundary then has enough windows to be a speaker of its own (alone, its first second or two in the clip
    were folded into the next speaker: one voice entity for two people), its embedding covers both sides, and
    identity can continue the entity heard there. Only the clip's own speech is transcribed.
    """
    audio = _clip_audio(media)
    if audio is None or not settings.perception.voices:
        return (), ()
    import numpy as np

    context = _context_audio(media, settings.perception.voice_context_seconds)
    heard = np.concatenate([context, audio]) if len(context) else audio
    m = models or audio_models(settings)
    with _timed(timings, "vad"):
        probs = speech_probabilities(heard)
    with _timed(timings, "diarize"):
        diarization = diarize(heard, m.encoder, m.diarization, probs)
    if m.identity is not None and diarization.speech:
        with _timed(timings, "voice_embed"):
            diarization = speaker_embeddings(heard, diarization, m.identity,
                                             settings.perception.voice_clip_merge_similarity,
                                             settings.perception.voice_clip_short_merge_similarity)
            diarization = _split_changes(heard, diarization, m.identity, settings)
    diarization, before = after_context(diarization, len(context) / RATE)
    if not diarization.speech:
        return (), ()
    with _timed(timings, "asr"):
        asr = m.transcriber.transcribe(audio, diarization.speech)
    start = media.clip.start_s
    carried = tuple(CarriedTurn(t.speaker, start + t.start_s, start + t.end_s) for t in before)
    return attribute(asr, diarization, clip_index=media.clip.index, offset_s=start), carried


def _split_changes(audio: npt.NDArray[np.float32], diarization: Diarization, embedder: CamppEmbedder,
                   settings: Settings) -> Diarization:
    """:func:`split_changes` and :func:`split_apart` with the settings' bars; the embeddings of the speakers that
    took speech, and of both sides of a speaker split apart, taken again."""
    p = settings.perception
    bars = {"change_below": p.voice_change_similarity, "join_from": p.voice_clip_short_merge_similarity}
    split, gained = split_changes(audio, diarization, embedder, **bars)
    split, apart = split_apart(audio, split, embedder, **bars)
    if not gained and not apart:
        return diarization
    known = {k: v for k, v in diarization.embeddings.items() if k not in gained | apart}
    return speaker_embeddings(audio, split, embedder, known=known)


def after_context(diarization: Diarization, lead_s: float) -> tuple[Diarization, tuple[SpeakerTurn, ...]]:
    """The clip's part of a diarization of ``lead_s`` seconds of context followed by the clip, in clip time, and
    the context turns of the clip's speakers (negative times). Speakers heard only in the context are dropped;
    the rest are renumbered by first appearance in the clip (as :func:`diarize` numbers them)."""
    if lead_s <= 0:
        return diarization, ()
    inside = [SpeakerTurn(max(t.start_s, lead_s) - lead_s, t.end_s - lead_s, t.speaker)
              for t in diarization.turns if t.end_s > lead_s]
    order = {old: new for new, old in enumerate(dict.fromkeys(t.speaker for t in inside))}
    before = tuple(SpeakerTurn(t.start_s - lead_s, min(t.end_s, lead_s) - lead_s, order[t.speaker])
                   for t in diarization.turns if t.start_s < lead_s and t.speaker in order)
    speech = tuple((max(a, lead_s) - lead_s, b - lead_s) for a, b in diarization.speech if b > lead_s)
    embeddings = {order[k]: v for k, v in diarization.embeddings.items() if k in order}
    turns = tuple(SpeakerTurn(t.start_s, t.end_s, order[t.speaker]) for t in inside)
    return Diarization(turns, embeddings, speech), before


def speaker_embeddings(
    audio: npt.NDArray[np.float32], diarization: Diarization, embedder: CamppEmbedder, merge_from: float = 1.0,
    short_merge_from: float = 1.0, known: Mapping[int, npt.NDArray[np.float32]] | None = None,
) -> Diarization:
    """``diarization`` with each speaker's embedding taken by ``embedder`` over its turns joined; the embedding kept
    for identity across clips, over its turns at least ``LABELLED_TURN_S`` long when they hold ``SHORT_SPEAKER_S``
    of speech.

    Then, while two speakers score at least ``merge_from`` (1: never), or at least ``short_merge_from`` when one of
    them spoke less than ``SHORT_SPEAKER_S``, the most similar such pair becomes one speaker (the d-vector
    diarizer splits some voices in two; a split inside a clip cannot be re-joined later, as identity takes a
    clip's speakers for different people). A short speaker gets the lower bar because a short stretch of one
    voice scores lower against the rest of it, while different people do not score higher (docs/benchmarks.md,
    "Voice embedders"). Speakers are renumbered by first turn. ``known`` holds the final embeddings of speakers
    whose turns have not changed since they were taken (not embedded again; only without merges).
    """
    import numpy as np

    turns = list(diarization.turns)

    def joined(selected: list[SpeakerTurn]) -> npt.NDArray[np.float32]:
        parts = [audio[round(t.start_s * RATE) : round(t.end_s * RATE)] for t in selected]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)

    def own(speaker: int) -> list[SpeakerTurn]:
        return [t for t in turns if t.speaker == speaker]

    heard = {k: joined(own(k)) for k in dict.fromkeys(t.speaker for t in turns)}
    known = known or {}
    vectors = {k: known[k] if k in known else embedder.embed(speech) for k, speech in heard.items() if len(speech)}
    seconds = {k: len(speech) / RATE for k, speech in heard.items()}
    turns = [t for t in turns if t.speaker in vectors]

    def bar(a: int, b: int) -> float:
        return short_merge_from if min(seconds[a], seconds[b]) < SHORT_SPEAKER_S else merge_from

    while min(merge_from, short_merge_from) < 1 and len(vectors) > 1:
        keys = sorted(vectors)
        pairs = [(float(vectors[a] @ vectors[b]), a, b) for i, a in enumerate(keys) for b in keys[i + 1 :]]
        fit = [(score - bar(a, b), score, a, b) for score, a, b in pairs if score >= bar(a, b)]
        if not fit:
            break
        _, _, keep, gone = max(fit)
        turns = [SpeakerTurn(t.start_s, t.end_s, keep) if t.speaker == gone else t for t in turns]
        del vectors[gone]
        seconds[keep] += seconds.pop(gone)
        vectors[keep] = embedder.embed(joined(own(keep)))
    order = {old: new for new, old in enumerate(dict.fromkeys(t.speaker for t in turns))}
    embeddings = {}
    for k, vector in vectors.items():
        mine = own(k)
        labelled = labelled_turns(mine)
        if k in known or len(labelled) == len(mine):
            embeddings[order[k]] = vector
        else:
            embeddings[order[k]] = embedder.embed(joined(labelled))
    renumbered: list[SpeakerTurn] = []
    for t in turns:
        speaker = order[t.speaker]
        if renumbered and renumbered[-1].speaker == speaker and t.start_s - renumbered[-1].end_s < 1e-6:
            renumbered[-1] = SpeakerTurn(renumbered[-1].start_s, t.end_s, speaker)
        else:
            renumbered.append(SpeakerTurn(t.start_s, t.end_s, speaker))
    return dataclasses.replace(diarization, turns=tuple(renumbered), embeddings=embeddings)


def labelled_turns(turns: list[SpeakerTurn]) -> list[SpeakerTurn]:
    """The turns of one speaker its identity vector is taken over: those at least ``LABELLED_TURN_S`` long when
    they hold ``SHORT_SPEAKER_S`` of speech, else all of them."""
    long = [t for t in turns if t.end_s - t.start_s >= LABELLED_TURN_S]
    return long if sum(t.end_s - t.start_s for t in long) >= SHORT_SPEAKER_S else turns


def _clip_audio(media: ClipMedia) -> npt.NDArray[np.float32] | None:
    """The clip's audio as 16 kHz mono float32, or None when there is none."""
    if media.audio is None or len(media.audio) == 0:
        return None
    return _at_rate(media.audio, media.audio_rate)


def _context_audio(media: ClipMedia, seconds: float) -> npt.NDArray[np.float32]:
    """The last ``seconds`` of ``media.context_audio`` as 16 kHz mono float32 (empty when there is none)."""
    import numpy as np

    context = media.context_audio
    if context is None or seconds <= 0 or len(context) == 0:
        return np.zeros(0, dtype=np.float32)
    audio = _at_rate(context, media.audio_rate)
    return audio[max(0, len(audio) - round(seconds * RATE)) :]


def _at_rate(samples: Any, rate: int) -> npt.NDArray[np.float32]:
    import numpy as np

    audio = np.asarray(samples, dtype=np.float32).reshape(-1)
    if rate != RATE:
        from math import gcd

        from scipy.signal import resample_poly

        g = gcd(RATE, rate)
        audio = resample_poly(audio, RATE // g, rate // g).astype(np.float32)
    return audio


@contextmanager
def _timed(timings: dict[str, float] | None, name: str) -> Iterator[None]:
    """Add the seconds spent in the block to ``timings[name]``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - start


# -- attribution ---------------------------------------------------------------


def attribute(
    asr: AsrResult, diarization: Diarization, *, clip_index: int, offset_s: float
) -> tuple[VoiceSegment, ...]:
    """Split ASR segments at speaker changes and label each part with its speaker."""
    out: list[VoiceSegment] = []
    for segment in asr.segments:
        language = segment.language or asr.language
        for speaker, words, text in _speaker_runs(segment, diarization.turns, language):
            start = words[0].start_s if words else segment.start_s
            end = words[-1].end_s if words else segment.end_s
            out.append(
                VoiceSegment(
                    clip_index=clip_index,
                    start_s=offset_s + start,
                    end_s=offset_s + max(start, end),
                    text=text,
                    speaker=speaker,
                    embedding=diarization.embeddings.get(speaker),
                    words=tuple(_shift(w, offset_s) for w in words),
                    language=language,
                )
            )
    return tuple(out)


def _speaker_runs(
    segment: AsrSegment, turns: tuple[SpeakerTurn, ...], language: str
) -> list[tuple[int, tuple[Word, ...], str]]:
    """``(speaker, words, text)`` for each run of consecutive words by one speaker."""
    if not segment.words:
        return [(speaker_of(segment.start_s, segment.end_s, turns), (), segment.text)]
    labels = _smooth([speaker_of(w.start_s, w.end_s, turns) for w in segment.words], segment.words)
    runs: list[tuple[int, tuple[Word, ...], str]] = []
    start = 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            if start == 0 and i == len(labels):
                text = segment.text
            else:
                text = _join(segment.spellings[start:i], segment.words[start:i], language)
            runs.append((labels[start], segment.words[start:i], text))
            start = i
    return runs


def speaker_of(start_s: float, end_s: float, turns: tuple[SpeakerTurn, ...]) -> int:
    """The speaker with most overlap with [start_s, end_s]; else the nearest turn within 1 s; else -1."""
    overlap: dict[int, float] = {}
    nearest, nearest_gap = -1, MAX_ATTRIBUTION_GAP_S
    for t in turns:
        shared = min(end_s, t.end_s) - max(start_s, t.start_s)
        if shared > 0:
            overlap[t.speaker] = overlap.get(t.speaker, 0.0) + shared
        gap = max(t.start_s - end_s, start_s - t.end_s, 0.0)
        if gap < nearest_gap:
            nearest, nearest_gap = t.speaker, gap
    if overlap:
        return max(overlap, key=lambda k: overlap[k])
    return nearest


def _smooth(labels: list[int], words: tuple[Word, ...]) -> list[int]:
    """A single short word (< 0.4 s) labelled differently from both neighbours takes their label."""
    out = list(labels)
    for i in range(1, len(out) - 1):
        short = words[i].end_s - words[i].start_s < 0.4
        if short and out[i - 1] == out[i + 1] != out[i]:
            out[i] = out[i - 1]
    return out


def _join(spellings: tuple[str, ...], words: tuple[Word, ...], language: str) -> str:
    if len(spellings) == len(words):
        return "".join(spellings).strip()
    sep = "" if language in SPACELESS_LANGUAGES else " "
    return sep.join(w.text for w in words)


def _shift(word: Word, offset_s: float) -> Word:
    return Word(word.text, word.start_s + offset_s, word.end_s + offset_s, word.probability)
