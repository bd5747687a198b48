"""Rapping heard where the sound classifier hears only speech and music: rhymed words over music.

YAMNet scores a rap as ``Speech`` (0.98) over ``Music`` (0.95) and its ``Rapping`` class stays at its floor
(0.02 on the White House Hamilton clip, the one rap in the shared media), so a performance is remembered as
someone talking with music behind them. The words tell it apart: lyrics rhyme. A stretch of one voice whose
words hold a rhyme chain (at least :data:`CHAIN` different words sharing a rhyme, none the end of another:
"smarter", "self-starter", "charter") while music plays under most of it (:data:`MUSIC_SHARE`) is heard as
rapping, unless the classifier already heard singing there.

A rhyme here is spelled, not sounded: the word from its next-to-last vowel group on (``smarter`` -> ``arter``),
at least :data:`RHYME_LETTERS` letters; words of one vowel group have none ("night", "right" and "light" come
up in any talk), so a song that rhymes only such words is missed. Conversation rarely holds a chain: of the
5,882 LoCoMo turns, 3 do, and each rhymes by a suffix ("mentally", "physically", "emotionally") with no music to
go with it; a talk show's musical opening (Hot Ones) holds none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from m3agent.domain import SoundEvent, VoiceSegment
from m3agent.text import words

RAPPING = "Rapping"
"""The AudioSet display name the derived event takes (lower-cased in memories like every sound)."""
MUSIC = "music"
SINGING = frozenset({"singing", "song", "choir", "rapping"})
"""Sound labels (lower-cased) that already say the words are sung."""
CHAIN = 3
JOIN_S = 2.0
MUSIC_SHARE = 0.5
RHYME_LETTERS = 4
VOWELS = frozenset("aeiouy")


def rapping(voices: Sequence[VoiceSegment], sounds: Sequence[SoundEvent]) -> tuple[SoundEvent, ...]:
    """A ``Rapping`` event over each stretch of one voice (:func:`stretches`) whose words hold a rhyme chain while
    music plays under at least :data:`MUSIC_SHARE` of it and no singing is heard there; its score is the
    music's highest."""
    out = []
    for start, end, text in stretches(voices):
        music = [s for s in sounds if s.label.lower() == MUSIC and _overlap(s, start, end) > 0]
        sung = any(s.label.lower() in SINGING and _overlap(s, start, end) > 0 for s in sounds)
        if sung or not music or end <= start or not rhyme_chains(text):
            continue
        if sum(_overlap(s, start, end) for s in music) >= MUSIC_SHARE * (end - start):
            out.append(SoundEvent(RAPPING, start, end, max(s.score for s in music)))
    return tuple(out)


def stretches(voices: Sequence[VoiceSegment]) -> list[tuple[float, float, str]]:
    """``(start, end, words)`` of each run of one voice's segments in time order, a segment joining the run when
    it starts within :data:`JOIN_S` of its end: the recogniser cuts a verse into sentences, and a rhyme ends
    each line."""
    runs: list[tuple[float, float, str, int | None]] = []
    for v in sorted((v for v in voices if v.text.strip()), key=lambda v: v.start_s):
        who = v.entity_id if v.entity_id is not None else v.speaker
        if runs and runs[-1][3] == who and v.start_s - runs[-1][1] <= JOIN_S:
            start, _, text, _ = runs[-1]
            runs[-1] = (start, max(v.end_s, runs[-1][1]), f"{text} {v.text.strip()}", who)
        else:
            runs.append((v.start_s, v.end_s, v.text.strip(), who))
    return [(start, end, text) for start, end, text, _ in runs]


def rhyme_chains(text: str) -> list[tuple[str, ...]]:
    """The rhyme chains of ``text``: groups of at least :data:`CHAIN` different words sharing a spelled rhyme,
    leaving out a word that ends another of its group ("times" in "sometimes"), each group sorted."""
    groups: dict[str, set[str]] = defaultdict(set)
    for word in dict.fromkeys(words(text)):
        if (key := rhyme(word)) is not None:
            groups[key].add(word)
    chains = []
    for group in groups.values():
        kept = sorted(w for w in group if not any(o != w and w.endswith(o) for o in group))
        if len(kept) >= CHAIN:
            chains.append(tuple(kept))
    return chains


def rhyme(word: str) -> str | None:
    """``smarter`` -> ``arter``: ``word`` from its next-to-last vowel group on; None for a word of one vowel
    group or a rhyme shorter than :data:`RHYME_LETTERS` letters."""
    word = word.strip("'")
    starts = [i for i, c in enumerate(word) if c in VOWELS and (i == 0 or word[i - 1] not in VOWELS)]
    if len(starts) < 2 or len(word) - starts[-2] < RHYME_LETTERS:
        return None
    return word[starts[-2]:]


def _overlap(sound: SoundEvent, start: float, end: float) -> float:
    return max(0.0, min(sound.end_s, end) - max(sound.start_s, start))
