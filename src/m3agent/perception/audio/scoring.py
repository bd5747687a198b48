"""Standard scores for the audio side: diarization error rate (DER) and word error rate (WER).

DER follows the NIST md-eval definition: over the scored time, (missed speech +
false alarm + speaker confusion) / total reference speech, where overlapping
reference speech counts once per speaker, hypothesis speakers are mapped one to
one onto reference speakers to maximise their overlap (Hungarian algorithm), and
a ``collar`` around every reference turn boundary is not scored.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

STEP_S = 0.01


@dataclass(frozen=True, slots=True)
class Turn:
    """A stretch of one speaker's speech, in seconds."""

    start_s: float
    end_s: float
    speaker: str


@dataclass(frozen=True, slots=True)
class DerResult:
    """DER and its parts, in seconds of scored time."""

    der: float
    missed_s: float
    false_alarm_s: float
    confusion_s: float
    reference_s: float

    def as_dict(self) -> dict[str, float]:
        return {
            "der": round(self.der, 4),
            "missed_s": round(self.missed_s, 3),
            "false_alarm_s": round(self.false_alarm_s, 3),
            "confusion_s": round(self.confusion_s, 3),
            "reference_s": round(self.reference_s, 3),
        }


def read_rttm(path: Path, file_id: str | None = None) -> list[Turn]:
    """``SPEAKER <file> <chan> <start> <dur> ... <speaker> ...`` lines (optionally of one file)."""
    turns = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) < 8 or parts[0] != "SPEAKER" or (file_id is not None and parts[1] != file_id):
            continue
        start, duration = float(parts[3]), float(parts[4])
        turns.append(Turn(start, start + duration, parts[7]))
    return turns


def diarization_error_rate(
    reference: Sequence[Turn],
    hypothesis: Sequence[Turn],
    *,
    collar_s: float = 0.25,
    scored: tuple[float, float] | None = None,
) -> DerResult:
    """DER of ``hypothesis`` against ``reference`` within ``scored`` (default: 0 to the last end)."""
    import numpy as np

    end = scored[1] if scored else max([t.end_s for t in (*reference, *hypothesis)], default=0.0)
    start = scored[0] if scored else 0.0
    n = max(0, math.ceil(end / STEP_S))
    ref = _activity(reference, n)
    hyp = _activity(hypothesis, n)
    centres = (np.arange(n) + 0.5) * STEP_S
    mask = (centres >= start) & (centres < end) & ~_collar_mask(reference, centres, collar_s)
    ref, hyp = ref[mask], hyp[mask]
    n_ref, n_hyp = ref.sum(axis=1), hyp.sum(axis=1)
    correct = _mapped_correct(ref, hyp)
    total = float(n_ref.sum()) * STEP_S
    missed = float(np.maximum(0, n_ref - n_hyp).sum()) * STEP_S
    false_alarm = float(np.maximum(0, n_hyp - n_ref).sum()) * STEP_S
    confusion = float((np.minimum(n_ref, n_hyp) - correct).sum()) * STEP_S
    der = (missed + false_alarm + confusion) / total if total > 0 else 0.0
    return DerResult(der, missed, false_alarm, confusion, total)


def _activity(turns: Iterable[Turn], n: int) -> npt.NDArray[np.bool_]:
    """Frames x speakers activity matrix (frame k covers [k, k+1) * STEP_S, judged at its centre)."""
    import numpy as np

    turns = list(turns)
    labels = sorted({t.speaker for t in turns})
    act = np.zeros((n, len(labels)), dtype=bool)
    for t in turns:
        a = max(0, round(t.start_s / STEP_S))
        b = min(n, round(t.end_s / STEP_S))
        act[a:b, labels.index(t.speaker)] = True
    return act


def _collar_mask(
    reference: Sequence[Turn], centres: npt.NDArray[np.floating[Any]], collar_s: float
) -> npt.NDArray[np.bool_]:
    import numpy as np

    mask = np.zeros(len(centres), dtype=bool)
    if collar_s <= 0:
        return mask
    for t in reference:
        for edge in (t.start_s, t.end_s):
            mask |= np.abs(centres - edge) < collar_s
    return mask


def _mapped_correct(ref: npt.NDArray[np.bool_], hyp: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Per frame, how many reference speakers are matched by their mapped hypothesis speaker."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    correct = np.zeros(len(ref), dtype=np.int64)
    if ref.shape[1] == 0 or hyp.shape[1] == 0:
        return correct
    overlap = ref.T.astype(np.int64) @ hyp.astype(np.int64)
    rows, cols = linear_sum_assignment(-overlap)
    for r, c in zip(rows, cols, strict=True):
        correct += ref[:, r] & hyp[:, c]
    return correct


# -- WER -----------------------------------------------------------------------

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def normalise_words(text: str) -> list[str]:
    """Lower case, no punctuation, digits spelled out (up to 99), accents and hyphens removed."""
    text = unicodedata.normalize("NFKD", text.replace("\ufeff", "")).encode("ascii", "ignore").decode()
    text = text.lower().replace("%", " percent").replace("&", " and ")
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    text = re.sub(r"[-‐–—/]", " ", text)
    text = re.sub(r"[^a-z0-9' ]+", " ", text).replace("'", "")
    words: list[str] = []
    for word in text.split():
        words.extend(_spell_number(word).split() if word.isdigit() else [word])
    return words


def _spell_number(digits: str) -> str:
    """Numbers below 100 as words ("42" -> "forty two"); longer ones digit by digit."""
    value = int(digits)
    if len(digits) > 2 or (len(digits) == 2 and digits[0] == "0"):
        return " ".join(_ONES[int(d)] for d in digits)
    if value < 20:
        return _ONES[value]
    return _TENS[value // 10] + ("" if value % 10 == 0 else f" {_ONES[value % 10]}")


def word_errors(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Levenshtein distance between two word sequences (substitutions + deletions + insertions)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, start=1):
        current = [i] + [0] * len(hypothesis)
        for j, hyp_word in enumerate(hypothesis, start=1):
            current[j] = min(
                previous[j] + 1,
                current[j - 1] + 1,
                previous[j - 1] + (ref_word != hyp_word),
            )
        previous = current
    return previous[-1]


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus WER: total edits over total reference words, after :func:`normalise_words`."""
    errors = words = 0
    for ref, hyp in zip(references, hypotheses, strict=True):
        ref_words = normalise_words(ref)
        errors += word_errors(ref_words, normalise_words(hyp))
        words += len(ref_words)
    return errors / words if words else 0.0
