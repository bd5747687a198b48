"""The reward of one rollout, and why it is shaped so.

``reward = f1_weight · F1(answer, gold) + evidence_weight · F1(cited memories, gold evidence)
+ early_answer_weight · F1(answer, gold) · (rounds left unused) / (rounds − 1)
− format_penalty · (replies that broke the schema) − leak_penalty · [the answer shows an internal id]``

* **Answer F1** is LoCoMo's own score (:func:`m3agent.bench.qa_metrics.score`: stemmed token F1,
  per-category rules; adversarial questions score abstaining), computed on the answer a user would see
  (after the agent loop rewrote tags to names and dropped ``[m12]`` / ``CLIP_3``), so the policy is
  trained on exactly what the held-out evaluation measures. It is the main term: the product is judged by
  its answers.
* **Evidence overlap** is the F1 between the dialog turns of the memories the policy *cited* (``[m12]``
  in its thoughts or answer, the loop's citation convention) and the question's gold evidence turns.
  Citing is what makes an answer checkable, and F1 (not recall) means citing everything earns little. Its
  weight is half the answer's: a right answer with wrong citations is still mostly right.
* **Answering early** earns a share of the answer's own F1 for each round the rollout did not need: the
  untrained loop spends every round it is given (60 of 60 held-out answers took all 3) and ends at 7-9 words
  where a one-shot grounded answer says 3, and every round costs seconds of prompt reading. Scaled by the F1,
  the term is worth nothing to a wrong answer, so answering at once cannot be farmed: it only breaks ties
  between right answers in favour of the one that stopped searching when it had what it needed.
* **Format errors** cost per reply the agent schema could not read: the runtime constrains its output with
  a grammar, a sampled rollout does not, and a policy that breaks the JSON wastes a round at run time too.
* **Leaked internal ids** (a ``<face_3>``, ``<voice_1>`` or ``<character_2>`` tag left in the answer, or
  an ``[m12]`` / ``CLIP_4`` the loop could not rewrite) are never acceptable in a user's answer.
* **No reward for searching.** Nothing is paid for a search as such, and an empty search adds nothing: a
  search is only worth what it lets the answer and its citations earn, so the policy cannot farm reward
  by searching, and shaping terms cannot be gamed.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.bench.qa_metrics import score

if TYPE_CHECKING:
    from m3agent.settings import TrainSettings

_INTERNAL_ID = re.compile(r"\bCLIP_\d+\b|\[m\d+\]")


@dataclass(frozen=True, slots=True)
class Reward:
    """The terms of one rollout's reward (each unweighted) and their weighted ``total``."""

    f1: float
    evidence_f1: float
    format_errors: int
    leaked: bool
    total: float
    rounds_left: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def leaks_internal_id(answer: str) -> bool:
    """True when ``answer`` shows an entity tag, a clip id or a memory id a user must never see."""
    return bool(tags.find_tags(answer)) or bool(_INTERNAL_ID.search(answer))


def set_f1(predicted: Collection[str], gold: Collection[str]) -> float:
    """F1 of two sets of ids (0 when either is empty)."""
    common = len(set(predicted) & set(gold))
    if not common:
        return 0.0
    precision, recall = common / len(set(predicted)), common / len(set(gold))
    return 2 * precision * recall / (precision + recall)


def reward(
    weights: TrainSettings,
    *,
    answer: str,
    gold: str,
    category: int,
    cited_evidence: Collection[str],
    gold_evidence: Collection[str],
    format_errors: int,
    rounds_used: int | None = None,
) -> Reward:
    """The reward of a rollout that ended with ``answer`` (``""``: none) citing ``cited_evidence`` turns in round
    ``rounds_used`` of ``weights.rounds`` (``None``: rounds not counted, as a one-shot answer)."""
    f1 = score(category, answer, gold)["f1"] if answer else 0.0
    evidence = set_f1(cited_evidence, gold_evidence)
    leaked = leaks_internal_id(answer)
    left = max(0, weights.rounds - rounds_used) if rounds_used is not None else 0
    early = f1 * left / (weights.rounds - 1) if weights.rounds > 1 else 0.0
    total = (weights.f1_weight * f1 + weights.evidence_weight * evidence + weights.early_answer_weight * early
             - weights.format_penalty * format_errors - weights.leak_penalty * leaked)  # fmt: skip
    return Reward(round(f1, 6), round(evidence, 6), format_errors, leaked, round(total, 6), left)
