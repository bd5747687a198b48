"""English word checks for text read on screen: is a line words or fragments, and where do missing spaces go.

The word list is the MiniLM (BERT uncased) WordPiece vocabulary that ships with the text embedder:
from id 1996 on its whole words are ordered roughly by frequency, so the id serves as a frequency
rank. Words above ``COMMON_WORD_ID`` are mostly rare words and fragments ("ying", "hem"), which
background lettering cut off by people in front of it often produces. Small text often loses its
spaces in recognition ("becauseIwasasenator"); :func:`respace` puts them back where the run splits
into common words only, preferring few, frequent words.
"""

from __future__ import annotations

import functools
import math
import re

COMMON_WORD_ID = 15000
FIRST_WORD_ID = 1996
SINGLE_LETTER_WORDS = {"a": FIRST_WORD_ID + 5, "i": FIRST_WORD_ID + 10}
CONTRACTIONS = frozenset({"'s", "'t", "'re", "'ll", "'ve", "'m", "'d"})
SUFFIXES = frozenset({"ing", "ed", "er", "es", "ly", "s"})  # whole "words" in the list, but never read as one
MIN_RUN = 7
LONGEST_WORD = 20
WORD_COST = 2.0  # added per word, so fewer words win over many short ones
_WORD = re.compile(r"[A-Za-z]{3,}")
_RUN = re.compile(rf"[A-Za-z][A-Za-z'’]{{{MIN_RUN - 1},}}")


def readable(text: str) -> bool:
    """Whether a line reads like words rather than fragments: at least two thirds of its words of 3+
    letters are common, and it has a common word of 4+ letters or two common words. Lines without
    such words (numbers, times) count as readable; so does everything when no word list is installed."""
    words = [w.lower() for w in _WORD.findall(text)]
    ranks = word_ranks()
    if not words or not ranks:
        return True
    known = [w for w in words if ranks.get(w, COMMON_WORD_ID + 1) <= COMMON_WORD_ID]
    return len(known) * 3 >= 2 * len(words) and (len(known) >= 2 or any(len(w) >= 4 for w in known))


def respace(text: str) -> str:
    """``text`` with each run of ``MIN_RUN``+ letters that is not a word split into common words (and
    contractions such as "'s"), when it splits. Shorter runs are left alone: "tubing" is no "tub ing"."""
    ranks = word_ranks()
    if not ranks:
        return text

    def fix(match: re.Match[str]) -> str:
        run = match.group(0)
        if run.lower() in ranks:
            return run
        pieces = split_words(run.replace("’", "'"), ranks)
        if not pieces:
            return run
        out = pieces[0]
        for piece in pieces[1:]:
            out += piece if piece.lower() in CONTRACTIONS else " " + piece
        return out

    return _RUN.sub(fix, text)


def split_words(run: str, ranks: dict[str, int]) -> list[str] | None:
    """The cheapest split of ``run`` into common words (cost: log rank + ``WORD_COST`` each), or None."""
    lower = run.lower()
    best = [0.0] + [math.inf] * len(lower)
    back = [0] * (len(lower) + 1)
    for end in range(1, len(lower) + 1):
        for start in range(max(0, end - LONGEST_WORD), end):
            rank = _rank(lower[start:end], ranks)
            if rank is None or best[start] == math.inf:
                continue
            cost = best[start] + math.log(rank - FIRST_WORD_ID + 2) + WORD_COST
            if cost < best[end]:
                best[end], back[end] = cost, start
    if best[-1] == math.inf:
        return None
    pieces, end = [], len(lower)
    while end > 0:
        pieces.append(run[back[end]:end])
        end = back[end]
    return pieces[::-1]


def _rank(word: str, ranks: dict[str, int]) -> int | None:
    if word in CONTRACTIONS:
        return FIRST_WORD_ID + 10
    if word in SUFFIXES or "'" in word:
        return None
    if len(word) == 1:
        return SINGLE_LETTER_WORDS.get(word)
    rank = ranks.get(word)
    return rank if rank is not None and FIRST_WORD_ID <= rank <= COMMON_WORD_ID else None


@functools.lru_cache(maxsize=1)
def word_ranks() -> dict[str, int]:
    """Whole alphabetic words of the MiniLM vocabulary with their ids; empty when the tokenizer is not installed."""
    import json

    try:
        from m3agent.embed.minilm import model_files

        data = json.loads(model_files()[1].read_text(encoding="utf-8"))
    except Exception:  # no tokenizer installed: no word checks rather than no text
        return {}
    vocab = data.get("model", {}).get("vocab", {})
    return {w: int(i) for w, i in vocab.items() if w.isalpha() and w.isascii()}
