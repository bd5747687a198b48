"""Held-out answer F1 of a model in the agent loop, through the product's own path, with bootstrap intervals.

Each held-out question is answered by :func:`m3agent.control.ask` in ``agent`` mode with the model opened
from its spec exactly as ``--llm`` opens it (``llamacpp:qwen-0.5b`` or ``llamacpp:/path/trained.gguf``), and
scored by LoCoMo's token F1. Before / after compares two models on the same questions: the difference's
interval is a paired bootstrap over questions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.bench.stats import DEFAULT_RESAMPLES, DEFAULT_SEED

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore
    from m3agent.train.episodes import Episode


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean and its 95 % percentile bootstrap interval."""

    mean: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"mean": round(self.mean, 4), "ci95": [round(self.low, 4), round(self.high, 4)]}  # type: ignore[dict-item]


def answer_f1(
    settings: Settings,
    store: MemoryStore,
    embedder: Embedder,
    episodes: Sequence[Episode],
    llm_spec: str,
    *,
    rounds: int,
    on_answer: Callable[[dict[str, Any]], None] | None = None,
    mode: str = "agent",
    done: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One record per episode: ``qid``, ``f1``, the answer and its seconds (the model is opened once), answered in
    ``mode`` (the agent loop, or ``grounded`` for the one-shot answerer it is compared with); an episode whose
    record is in ``done`` (by ``qid``) keeps it and is not answered again (a run resumed)."""
    import time

    from m3agent.bench.qa_metrics import score
    from m3agent.control import AgentConfig, ask
    from m3agent.llm import chat_model_from_settings

    done = done or {}
    if all(e.qid in done for e in episodes):
        return [done[e.qid] for e in episodes]
    chat = chat_model_from_settings(settings, llm_spec)
    config = AgentConfig.from_settings(settings.control, llm_spec, mode=mode, rounds=rounds)
    records = []
    try:
        for episode in episodes:
            if episode.qid in done:
                records.append(done[episode.qid])
                continue
            started = time.perf_counter()
            answer = ask(store, embedder, chat, episode.question, video_id=episode.video_id, config=config)
            text = answer.text if answer.answered else ""
            record = {"qid": episode.qid, "category": episode.category, "answer": text,
                      "f1": score(episode.category, text, episode.answer)["f1"] if text else 0.0,
                      "seconds": round(time.perf_counter() - started, 2), "rounds": answer.rounds}  # fmt: skip
            records.append(record)
            if on_answer is not None:
                on_answer(record)
    finally:
        close = getattr(chat, "close", None)
        if callable(close):
            close()
    return records


def mean_interval(values: Sequence[float], seed: int = DEFAULT_SEED) -> Interval:
    """Mean of ``values`` with its percentile bootstrap interval (seeded)."""
    import numpy as np

    if not values:
        return Interval(0.0, 0.0, 0.0)
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(DEFAULT_RESAMPLES, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(data.mean()), float(low), float(high))


def paired_difference(before: Sequence[float], after: Sequence[float], seed: int = DEFAULT_SEED) -> Interval:
    """``after - before`` per question (same questions, same order), with its bootstrap interval."""
    if len(before) != len(after):
        raise ValueError("before and after must score the same questions")
    return mean_interval([a - b for a, b in zip(after, before, strict=True)], seed)
