"""English word checks for text read on screen: is a line words or fragments, and where do missing spaces go.

The word list is the MiniLM (BERT uncased) WordPiece vocabulary that ships with the text embedder:
from id 1996 on its whole words are ordered roughly by frequency, so the id serves as a frequency
rank. Words above ``COMMON_WORD_ID`` are mostly rare words and fragments ("ying", "hem"), which
background lettering cut off by people in front of it often produces; the list also holds many
two-letter pieces ("pp", "di", "ct"), so a two-letter word counts only up to ``SHORT_WORD_ID``
(the function words: "of", "it", "oh"), and a one-letter word only as "a" or "I". Small text often
loses its spaces in recognition ("becauseIwasasenator"); :func:`respace` puts them back where the
run splits into common words only, preferring few, frequent words.
"""

from __future__ import annotations

import functools
import math
import re

COMMON_WORD_ID = 15000
SHORT_WORD_ID = 3000  # two-letter words up to here: "oh" 2821, "uk" 2866; "pp" 4903, "di" 4487, "mp" 6131 are pieces
FIRST_WORD_ID = 1996
SINGLE_LETTER_WORDS = {"a": FIRST_WORD_ID + 5, "i": FIRST_WORD_ID + 10}
CONTRACTIONS = frozenset({"'s", "'t", "'re", "'ll", "'ve", "'m", "'d"})
SUFFIXES = frozenset({"ing", "ed", "er", "es", "ly", "s"})  # whole "words" in the list, but never read as one
MIN_RUN = 7
LONGEST_WORD = 20
WORD_COST = 2.0  # added per word, so fewer words win over many short ones
_TOKEN = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_RUN = re.compile(rf"[A-Za-z][A-Za-z'’]{{{MIN_RUN - 1},}}")
_SHORT_RUN = re.compile(rf"\b[a-z]{{4,{MIN_RUN - 1}}}\b")


def readable(text: str) -> bool:
    """Whether a line reads like words rather than fragments: at least two thirds of its letter tokens are
    common words (of one letter "a" or "I"; of two, the function words), and it has a common word of 4+
    letters or two of 3+ letters. Lines without letters (numbers, times) count as readable; so does
    everything when no word list is installed."""
    tokens = _tokens(text)
    ranks = word_ranks()
    if not tokens or not ranks:
        return True
    known = [w for w in tokens if _is_word(w, ranks)]
    long = [w for w in known if len(w) >= 3]
    return len(known) * 3 >= 2 * len(tokens) and (len(long) >= 2 or any(len(w) >= 4 for w in long))


def common_words(text: str, min_letters: int = 1) -> int:
    """How many of the line's letter tokens of at least ``min_letters`` letters are common words; every such
    token counts when no word list is installed (then nothing tells words from fragments, and a line is not
    dropped for it)."""
    tokens = [w for w in _tokens(text) if len(w) >= min_letters]
    ranks = word_ranks()
    return sum(1 for w in tokens if _is_word(w, ranks)) if ranks else len(tokens)


def _tokens(text: str) -> list[str]:
    """Lower-cased letter tokens, a contraction's ending cut off ("didn't" -> "didn"), other apostrophes dropped."""
    out = []
    for token in _TOKEN.findall(text.replace("’", "'").lower()):
        stem, _, tail = token.partition("'")
        out.append(stem if "'" + tail in CONTRACTIONS else stem + tail)
    return out


def _is_word(word: str, ranks: dict[str, int]) -> bool:
    """A common word: "a" or "i"; two letters ranked up to ``SHORT_WORD_ID``; longer up to ``COMMON_WORD_ID``,
    or a common word of 3+ letters and an ending (``SUFFIXES``): the list keeps only the stem of many
    inflected words ("tubing" is "tub" + "##ing" in it)."""
    if len(word) == 1:
        return word in SINGLE_LETTER_WORDS
    limit = SHORT_WORD_ID if len(word) == 2 else COMMON_WORD_ID
    if ranks.get(word, limit + 1) <= limit:
        return True
    return any(word.endswith(end) and len(word) - len(end) >= 3
               and ranks.get(word[:-len(end)], COMMON_WORD_ID + 1) <= COMMON_WORD_ID for end in SUFFIXES)


def respace(text: str) -> str:
    """``text`` with each run of ``MIN_RUN``+ letters that is not a word split into common words (and
    contractions such as "'s"), when it splits. A shorter run is split only when it is lower case, in no
    word list, and two very common words (:func:`split_pair`: "doit" -> "do it"); other short runs are left
    alone: "tubing" is no "tub ing", and a capitalised short run is more often a name."""
    ranks = word_ranks()
    if not ranks:
        return text

    def fix_short(match: re.Match[str]) -> str:
        run = match.group(0)
        pair = None if run in ranks else split_pair(run, ranks)
        return run if pair is None else " ".join(pair)

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

    return _SHORT_RUN.sub(fix_short, _RUN.sub(fix, text))


def split_pair(run: str, ranks: dict[str, int]) -> tuple[str, str] | None:
    """``run`` as two words of 2+ letters each ranked up to ``SHORT_WORD_ID`` (the most frequent such split), or
    None: only the most frequent words, so that a rare word missing from the list is not cut into two."""
    def rank(word: str) -> int:
        return ranks.get(word.lower(), SHORT_WORD_ID + 1)

    pairs = [(run[:cut], run[cut:]) for cut in range(2, len(run) - 1)]
    fits = [p for p in pairs if max(rank(p[0]), rank(p[1])) <= SHORT_WORD_ID]
    return min(fits, key=lambda p: rank(p[0]) + rank(p[1])) if fits else None


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
