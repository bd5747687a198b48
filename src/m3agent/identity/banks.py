"""Matching observations to persistent entities through embedding banks.

An entity keeps a bank of at most ``cap`` exemplar embeddings. A candidate
(a face track's exemplars, or one speaker's voice embedding in a clip) joins
the entity whose bank is closest, only if that closeness passes an absolute
threshold AND beats the runner-up entity by a margin; otherwise it founds a
new entity. Candidates of one clip that co-occur in time are assigned jointly
so two of them can never land on the same entity. Bank updates are
deterministic (farthest-point selection), unlike the reference's random
subsampling (m3-agent.md §13.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class MatchRule:
    """When a candidate may join an existing entity.

    ``similarity`` is cosine similarity of unit vectors: a candidate joins
    when its score (mean of its best ``top`` similarities to the bank) is at
    least ``threshold`` and exceeds the runner-up entity's score by ``margin``.
    ``rejoin``: a candidate left with no entity joins its best one, held by a
    candidate it only softly conflicts with, from this score (above 1: never).
    """

    threshold: float
    margin: float = 0.04
    top: int = 3
    cap: int = 10
    rejoin: float = 2.0


def unit_rows(vectors: Sequence[npt.NDArray[np.float32]] | Matrix) -> Matrix:
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    result: Matrix = matrix / np.maximum(norms, 1e-12)
    return result


def bank_score(candidate: Matrix, bank: Matrix, top: int) -> float:
    """Mean of the ``top`` best cosine similarities between candidate and bank exemplars.

    Using the best few pairs (not all pairs) keeps a varied bank (several
    poses) from diluting a genuine match, while needing more than a single
    lucky pair.
    """
    import numpy as np

    sims = (candidate @ bank.T).ravel()
    k = min(top, sims.size)
    return float(np.sort(sims)[-k:].mean())


def score_matrix(candidates: Sequence[Matrix], banks: Sequence[Matrix], top: int) -> Matrix:
    import numpy as np

    scores = np.full((len(candidates), len(banks)), -1.0, dtype=np.float32)
    for i, cand in enumerate(candidates):
        for j, bank in enumerate(banks):
            if len(bank):
                scores[i, j] = bank_score(cand, bank, top)
    return scores


def assign(scores: Matrix, conflicts: set[tuple[int, int]], rule: MatchRule,
           hard: set[tuple[int, int]] | None = None) -> list[int | None]:
    """Pick an entity column for each candidate row, or ``None`` for a new entity.

    Pairs in ``conflicts`` (candidate indices that co-occur) never share an
    entity. Greedy in order of decreasing score, which for the handful of
    candidates in a clip gives the same result as a full assignment solve.
    A candidate left with no entity then joins its best one when it scores at
    least ``rule.rejoin`` there and none of the entity's holders is in ``hard``
    with it (``None``: every conflict is hard): a conflict outside ``hard`` is
    one account's (the diarizer's within a clip) against a bank's wider one.
    """
    n_cand, n_ent = scores.shape
    result: list[int | None] = [None] * n_cand
    if n_ent == 0:
        return result
    eligible = [_passes_margin(scores[i], rule) for i in range(n_cand)]
    order = sorted(((float(scores[i, j]), i, j) for i in range(n_cand) for j in range(n_ent)
                    if eligible[i] and scores[i, j] >= rule.threshold), reverse=True)
    taken: dict[int, list[int]] = {}
    for _, i, j in order:
        if result[i] is not None:
            continue
        if any((i, other) in conflicts or (other, i) in conflicts for other in taken.get(j, [])):
            continue
        result[i] = j
        taken.setdefault(j, []).append(i)
    if hard is not None:
        _rejoin(scores, result, taken, eligible, hard, rule)
    return result


def _rejoin(scores: Matrix, result: list[int | None], taken: dict[int, list[int]], eligible: list[bool],
            hard: set[tuple[int, int]], rule: MatchRule) -> None:
    """Candidates still without an entity join their best, taken one from ``rule.rejoin`` (see :func:`assign`)."""
    for i, column in enumerate(result):
        if column is not None or not eligible[i]:
            continue
        j = int(scores[i].argmax())
        holders = taken.get(j, [])
        if scores[i, j] >= rule.rejoin and not any((i, k) in hard or (k, i) in hard for k in holders):
            result[i] = j
            taken.setdefault(j, []).append(i)


def _passes_margin(row: Matrix, rule: MatchRule) -> bool:
    import numpy as np

    if row.size == 0:
        return False
    ranked = np.sort(row)[::-1]
    best = float(ranked[0])
    runner_up = float(ranked[1]) if ranked.size > 1 else -1.0
    return best >= rule.threshold and best - runner_up >= rule.margin


def update_bank(bank: Matrix, new: Matrix, cap: int) -> Matrix:
    """Merge exemplars and keep at most ``cap`` of them, deterministically.

    Farthest-point selection starting from the exemplar closest to the mean
    keeps the most varied views (poses, lighting), which is what matching
    later needs; the same inputs always give the same bank.
    """
    import numpy as np

    pool = np.concatenate([bank, new], axis=0) if len(bank) else new
    if len(pool) <= cap:
        return pool
    centre = pool.mean(axis=0)
    chosen = [int(np.argmax(pool @ centre))]
    best_sim = pool @ pool[chosen[0]]
    while len(chosen) < cap:
        nxt = int(np.argmin(best_sim))
        chosen.append(nxt)
        best_sim = np.maximum(best_sim, pool @ pool[nxt])
    result: Matrix = pool[sorted(chosen)]
    return result
