"""What speech recognition returns: transcribed segments with their words (:mod:`m3agent.perception.audio.asr`
writes them, :mod:`m3agent.perception.audio.asr_gaps` and the voices stage read them)."""

from __future__ import annotations

from dataclasses import dataclass

from m3agent.domain import Word


@dataclass(frozen=True, slots=True)
class AsrSegment:
    """A transcribed stretch (seconds in the input audio) with its words.

    ``spellings`` are the words as the model wrote them (with their leading
    spaces), so any run of words can be joined back into text in any script.
    """

    start_s: float
    end_s: float
    text: str
    words: tuple[Word, ...]
    spellings: tuple[str, ...] = ()
    language: str = ""  # the language it was decoded in ("" when not known: the result's)


@dataclass(frozen=True, slots=True)
class AsrResult:
    segments: tuple[AsrSegment, ...]
    language: str = ""
    language_probability: float = 0.0
