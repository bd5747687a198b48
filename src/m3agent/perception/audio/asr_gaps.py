"""Speech Whisper skipped: what no segment covers, decoded again, and the words it stamped too late.

Whisper ends a window early when its token budget runs out, and sometimes stamps a window's first words with a
time 20 s later and goes on from there (the people-and-order episode's fourth window). Both leave speech that
the VAD heard and no segment covers; :class:`~m3agent.perception.audio.asr.Transcriber` decodes it once more on its own.
It also jumps inside one segment: a few words, then one word stamped many seconds on, the segment spanning all
the speech between (the two-speaker interview on an AVX-512 host: eight words over 13.6 s of argument). Such a
*sparse* segment covers nothing; the speech it spans is decoded again, and the segment gives way to the second
decoding when that hears more words there.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from m3agent.intervals import union
from m3agent.text import words as text_words

if TYPE_CHECKING:
    from m3agent.perception.audio.transcript import AsrSegment

MIN_UNHEARD_S = 1.5  # a stretch with less speech than this that no segment covers is not decoded again
COVER_SLACK_S = 0.3  # a segment covers this much speech beyond its bounds (they are known to about this)
JUMP_SIMILARITY = 0.8  # words in common (difflib's ratio) of a segment stamped late and the words it skipped
JUMP_MIN_WORDS = 3
SPARSE_MIN_S = 4.0  # a segment over at least this much speech ...
SPARSE_WORDS_PER_S = 1.0  # ... with fewer words per second of it than this skipped most of it (speech: 2-4)

Stretch = tuple[tuple[float, float], ...]


def unheard(regions: list[tuple[float, float]] | tuple[tuple[float, float], ...],
            spans: tuple[tuple[float, float], ...]) -> list[Stretch]:
    """The speech of ``regions`` that no segment span covers, as stretches between covered spans, each with at
    least ``MIN_UNHEARD_S`` of speech. The caller decides whether to look at all (nothing written, no second try).

    Spans include the segments the quality gates dropped: Whisper did decode that speech, and a second decoding
    of noise or music on its own would only write something worse.
    """
    covered = union((a - COVER_SLACK_S, b + COVER_SLACK_S) for a, b in spans)
    open_at = -float("inf")
    stretches = []
    for closed_from, closed_to in [*covered, (float("inf"), float("inf"))]:
        pieces = tuple((max(a, open_at), min(b, closed_from)) for a, b in regions
                       if min(b, closed_from) > max(a, open_at))
        if sum(b - a for a, b in pieces) >= MIN_UNHEARD_S:
            stretches.append(pieces)
        open_at = closed_to
    return stretches


def drop_jumped(first: tuple[AsrSegment, ...], again: tuple[AsrSegment, ...],
                stretches: list[Stretch]) -> tuple[AsrSegment, ...]:
    """``first`` without the segments Whisper stamped late: the first segment after an unheard stretch whose
    words are the words the stretch begins with, decoded again (the same speech, at its right time)."""
    jumped = set()
    for stretch in stretches:
        start, end = stretch[0][0], stretch[-1][1]
        heard = [s for s in again if start - COVER_SLACK_S <= s.start_s < end]
        after = [s for s in first if s.start_s >= end - COVER_SLACK_S]
        if not heard or not after:
            continue
        skipped, late = text_words(min(heard, key=lambda s: s.start_s).text), min(after, key=lambda s: s.start_s)
        stamped = text_words(late.text)
        if (min(len(skipped), len(stamped)) >= JUMP_MIN_WORDS
                and difflib.SequenceMatcher(None, skipped, stamped).ratio() >= JUMP_SIMILARITY):
            jumped.add(id(late))
    return tuple(s for s in first if id(s) not in jumped)


def sparse(words: int, speech_s: float) -> bool:
    """A segment of ``words`` over ``speech_s`` seconds of speech (pauses removed) skipped most of it."""
    return speech_s >= SPARSE_MIN_S and words < SPARSE_WORDS_PER_S * speech_s


def drop_sparse(first: tuple[AsrSegment, ...], sparse_ones: tuple[AsrSegment, ...],
                again: tuple[AsrSegment, ...]) -> tuple[AsrSegment, ...]:
    """``first`` without each sparse segment whose time the second decoding filled with more words."""
    def count(segment: AsrSegment) -> int:
        return len(segment.words) or len(text_words(segment.text))

    def words_in(start: float, end: float) -> int:
        return sum(count(s) for s in again if start - COVER_SLACK_S <= s.start_s and s.end_s <= end + COVER_SLACK_S)

    gone = {id(s) for s in sparse_ones if words_in(s.start_s, s.end_s) > count(s)}
    return tuple(s for s in first if id(s) not in gone)
