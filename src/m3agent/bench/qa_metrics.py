"""Answer scores of the LoCoMo paper: token F1 and exact match after its normalisation.

Normalisation: lower case, punctuation removed, the words "a", "an", "the"
and "and" removed, whitespace collapsed, every token Porter-stemmed (nltk,
the ``bench`` extra). Per category, as the paper scores them: multi-hop
(1) golds list several items separated by commas and each gold item takes
its best F1 against the predicted items, averaged; open-domain (3) golds
keep the part before the first ``;``; adversarial (5) questions score
whether the answer abstains.
"""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from typing import Any

from m3agent.errors import MissingExtraError

MULTI_HOP, OPEN_DOMAIN, ADVERSARIAL = 1, 3, 5
_DROPPED_WORDS = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ABSTAINS = ("not mentioned", "no information", "does not say", "not in memory", "not say", "unknown")


@functools.cache
def _stemmer() -> Any:
    try:
        from nltk.stem import PorterStemmer
    except ImportError as exc:
        raise MissingExtraError("LoCoMo answer scoring (Porter stemming)", "bench", package="nltk") from exc
    return PorterStemmer()


def normalise(text: str) -> str:
    """The paper's answer normalisation, before stemming."""
    text = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_DROPPED_WORDS.sub(" ", text).split())


def tokens(text: str) -> list[str]:
    stem = _stemmer().stem
    return [stem(word) for word in normalise(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall (multiset overlap of stemmed tokens)."""
    predicted, wanted = tokens(prediction), tokens(gold)
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> bool:
    return tokens(prediction) == tokens(gold)


def abstains(prediction: str) -> bool:
    """True when the answer says the conversation or memory does not hold it (or is empty)."""
    flat = normalise(prediction)
    return not flat or any(phrase in flat for phrase in _ABSTAINS)


def score(category: int, prediction: str, gold: str) -> dict[str, float]:
    """``f1`` and ``em`` of one answer as the paper scores its category (adversarial: abstention)."""
    if category == ADVERSARIAL:
        ok = float(abstains(prediction))
        return {"f1": ok, "em": ok}
    if category == OPEN_DOMAIN:
        gold = gold.split(";")[0]
    if category == MULTI_HOP:
        golds = [g for g in gold.split(",") if g.strip()] or [gold]
        preds = [p for p in prediction.split(",") if p.strip()] or [prediction]
        f1 = sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)
        return {"f1": f1, "em": float(exact_match(prediction, gold))}
    return {"f1": token_f1(prediction, gold), "em": float(exact_match(prediction, gold))}
