"""LLM-free retrieval evaluation on LoCoMo: evidence recall against context cost.

For each question with evidence, recall is the fraction of its evidence
``dia_id``s found among the memories a search returns. It is reported for
our ``search_memory`` at several ``k`` and for the reference clip search
(§5.1), always next to the mean number of memories returned, since
returning whole clips buys recall with context.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.bench.locomo.data import ANSWERABLE_CATEGORIES, CATEGORY_NAMES, LocomoSample, QAItem
from m3agent.bench.locomo.ingest import dia_id_of
from m3agent.bench.progress import progress
from m3agent.bench.reference_search import REFERENCE_THRESHOLD, REFERENCE_TOP_CLIPS, ReferenceClipSearch
from m3agent.domain import Memory

if TYPE_CHECKING:
    from m3agent.control.people.characters import CharacterIndex
    from m3agent.embed import Embedder
    from m3agent.store.protocol import MemoryStore


@dataclass(frozen=True, slots=True)
class QuestionRecall:
    """Recall and returned count per ``k`` for ours, and for the reference search."""

    sample_id: str
    category: int
    evidence: int
    ours: dict[int, tuple[float, int]]
    reference: tuple[float, int]
    references: dict[str, tuple[float, int]] = field(default_factory=dict)


def evidence_recall(evidence: Sequence[str], memories: Iterable[Memory]) -> float:
    """Fraction of ``evidence`` dia ids that some returned memory came from."""
    if not evidence:
        return 0.0
    found = {dia_id_of(m) for m in memories}
    return sum(1 for e in evidence if e in found) / len(evidence)


@dataclass
class RetrievalRun:
    """Evaluates one store; ``extra_thresholds`` adds reference variants with other thresholds."""

    store: MemoryStore
    embedder: Embedder
    ks: tuple[int, ...] = (5, 10, 20)
    extra_thresholds: tuple[float, ...] = (0.0,)
    timings: dict[str, float] = field(default_factory=lambda: {"ours_s": 0.0, "reference_s": 0.0})

    def evaluate(self, samples: Sequence[LocomoSample], show_progress: bool = True) -> list[QuestionRecall]:
        questions = sum(1 for s in samples for q in s.qa if q.evidence)
        records: list[QuestionRecall] = []
        with progress("LoCoMo retrieval", questions, show_progress) as advance:
            for sample in samples:
                records += self._sample(sample, advance)
        return records

    def _sample(self, sample: LocomoSample, advance: Any) -> list[QuestionRecall]:
        from m3agent.control.people.characters import build_index

        index = build_index(self.store, video_id=sample.sample_id)
        searches = {
            "reference": ReferenceClipSearch(self.store, sample.sample_id, REFERENCE_THRESHOLD, REFERENCE_TOP_CLIPS),
            **{
                f"reference_threshold_{t:g}": ReferenceClipSearch(self.store, sample.sample_id, t, REFERENCE_TOP_CLIPS)
                for t in self.extra_thresholds
            },
        }
        questions = [q for q in sample.qa if q.evidence]
        vectors = self.embedder.embed([q.question for q in questions])
        records = []
        for item, vector in zip(questions, vectors, strict=True):
            ours = self._ours(sample.sample_id, item, index)
            started = time.perf_counter()
            refs = {name: s.search(vector).memories for name, s in searches.items()}
            self.timings["reference_s"] += time.perf_counter() - started
            scored = {name: (evidence_recall(item.evidence, m), len(m)) for name, m in refs.items()}
            main = scored.pop("reference")
            records.append(QuestionRecall(sample.sample_id, item.category, len(item.evidence), ours, main, scored))
            advance()
        return records

    def _ours(self, video_id: str, item: QAItem, index: CharacterIndex) -> dict[int, tuple[float, int]]:
        from m3agent.control.retrieval.search import MemorySearcher

        started = time.perf_counter()
        searcher = MemorySearcher(self.store, self.embedder, video_id=video_id, index=index)
        hits = searcher.search_memory(item.question, max(self.ks)).hits
        self.timings["ours_s"] += time.perf_counter() - started
        ranked = [h.memory for h in sorted(hits, key=lambda h: (-h.score, h.memory.id))]
        return {k: (evidence_recall(item.evidence, ranked[:k]), len(ranked[:k])) for k in self.ks}


def summarise(records: Sequence[QuestionRecall], ks: Sequence[int]) -> dict[str, Any]:
    """Overall (categories 1-4), per category 1-4, and adversarial (category 5) figures."""
    answerable = [r for r in records if r.category in ANSWERABLE_CATEGORIES]
    by_category = {
        str(c): {"name": CATEGORY_NAMES[c], **_group([r for r in records if r.category == c], ks)}
        for c in ANSWERABLE_CATEGORIES
    }
    adversarial = [r for r in records if r.category == 5]
    return {
        "overall": _group(answerable, ks),
        "by_category": by_category,
        "adversarial": {"name": CATEGORY_NAMES[5], **_group(adversarial, ks)},
    }


def _group(records: Sequence[QuestionRecall], ks: Sequence[int]) -> dict[str, Any]:
    n = len(records)
    if n == 0:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    returned: dict[str, float] = {}
    per_returned: dict[str, float] = {}
    for k in ks:
        recall = sum(r.ours[k][0] for r in records) / n
        mean = sum(r.ours[k][1] for r in records) / n
        out[f"recall_at_{k}"] = round(recall, 4)
        returned[str(k)] = round(mean, 2)
        per_returned[str(k)] = round(recall / mean, 5) if mean else 0.0
    out["mean_returned"] = returned
    out["recall_per_returned"] = per_returned
    out["reference"] = _reference(n, [r.reference for r in records])
    for name in records[0].references:
        out[name] = _reference(n, [r.references[name] for r in records])
    return out


def _reference(n: int, pairs: Sequence[tuple[float, int]]) -> dict[str, float]:
    recall = sum(p[0] for p in pairs) / n
    mean = sum(p[1] for p in pairs) / n
    return {
        "recall": round(recall, 4),
        "mean_returned": round(mean, 2),
        "recall_per_returned": round(recall / mean, 5) if mean else 0.0,
    }
