"""Rapping heard where the sound classifier hears only speech and music: rhymed words over music.

YAMNet scores a rap as ``Speech`` (0.98) over ``Music`` (0.95) and its ``Rapping`` class stays at its floor
(0.02 on the White House Hamilton clip, the one rap in the shared media), so a performance is remembered as
someone talking with music behind them. The words tell it apart: lyrics rhyme. A stretch of speech whose words
hold a rhyme chain (at least :data:`CHAIN` different words sharing a rhyme, none the end of another: "smarter",
"self-starter", "charter") while music plays under most of it (:data:`MUSIC_SHARE`) is heard as rapping, unless
the classifier already heard singing there.

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
MUSIC_SHARE = 0.5
RHYME_LETTERS = 4
VOWELS = frozenset("aeiouy")


def rapping(voices: Sequence[VoiceSegment], sounds: Sequence[SoundEvent]) -> tuple[SoundEvent, ...]:
    """A ``Rapping`` event over each voice segment whose words hold a rhyme chain while music plays under at
    least :data:`MUSIC_SHARE` of it and no singing is heard there; its score is the music's highest."""
    out = []
    for voice in voices:
        music = [s for s in sounds if s.label.lower() == MUSIC and _overlap(s, voice) > 0]
        sung = any(s.label.lower() in SINGING and _overlap(s, voice) > 0 for s in sounds)
        length = voice.end_s - voice.start_s
        if sung or not music or length <= 0 or not rhyme_chains(voice.text):
            continue
        if sum(_overlap(s, voice) for s in music) >= MUSIC_SHARE * length:
            out.append(SoundEvent(RAPPING, voice.start_s, voice.end_s, max(s.score for s in music)))
    return tuple(out)


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


def _overlap(sound: SoundEvent, voice: VoiceSegment) -> float:
    return max(0.0, min(sound.end_s, voice.end_s) - max(sound.start_s, voice.start_s))
