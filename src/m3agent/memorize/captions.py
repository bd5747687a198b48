"""Captions of speech: on-screen lines that restate what someone says at that moment.

Subtitles and news captions repeat the speech beside them. Written as memories of their own they are
near-duplicates of the utterance memories (the debate's 13 s wrote seven caption lines beside four
utterances), and the shot summary copied them a third time. A caption read while an utterance is said
and made mostly of that utterance's words (:data:`MIN_SHARED`, at least :data:`MIN_WORDS` words) is
merged into the utterance's memory instead, quoted as what the screen showed: the evidence stays (a
human caption often corrects the recogniser: "if you were an effective senator" under "if you were
effective senator"), the row does not. Text that nobody says (a sign, a name plate, a logo) stays a
memory of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from m3agent.domain import ScreenText
from m3agent.memorize.utterances import Utterance
from m3agent.text import stem, words

MIN_SHARED = 0.6  # share of the caption's words the utterance must hold
MIN_WORDS = 3  # shorter lines ("oh", "yes sir") match too much speech by chance
SLACK_S = 1.5  # a caption may lag or lead its speech by this much


def spoken_captions(texts: Sequence[ScreenText], said: Sequence[Utterance]) -> dict[int, tuple[ScreenText, ...]]:
    """``{index into said: the captions restating that utterance}``, captions in time order; each caption goes
    to the overlapping utterance that holds the largest share of its words (none: it restates nothing)."""
    vocab = [{stem(w) for w in words(u.text)} for u in said]
    out: dict[int, list[ScreenText]] = {}
    for text in sorted(texts, key=lambda t: t.start_s):
        best = _restated_by(text, said, vocab)
        if best is not None:
            out.setdefault(best, []).append(text)
    return {i: tuple(captions) for i, captions in out.items()}


def _restated_by(text: ScreenText, said: Sequence[Utterance], vocab: Sequence[set[str]]) -> int | None:
    """The utterance restated by ``text`` (largest share of its words, then longest overlap), or None."""
    stems = [stem(w) for w in words(text.text)]
    if len(stems) < MIN_WORDS:
        return None
    scored = []
    for i, utterance in enumerate(said):
        overlap = min(utterance.end_s, text.end_s) - max(utterance.start_s, text.start_s)
        share = sum(s in vocab[i] for s in stems) / len(stems)
        if overlap >= -SLACK_S and share >= MIN_SHARED:
            scored.append((share, overlap, -i))
    return -max(scored)[2] if scored else None
