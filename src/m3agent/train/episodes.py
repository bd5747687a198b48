"""Episodes: a LoCoMo question, its gold answer and evidence, over its conversation's memories.

The conversations are ingested into a real store exactly as the LoCoMo benchmarks do
(:func:`m3agent.bench.locomo.run.ensure_ingested`, cached under ``<cache>/bench/locomo-<embedder>.db``), so an
episode's observations are what ``m3agent ask`` would find. The split is **by conversation**: a held-out
conversation's questions (and memories) are never trained on, so the evaluation measures a policy on
memories it has not seen, not answers it has memorised.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.bench.locomo.data import LocomoSample
from m3agent.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from m3agent.embed import Embedder
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore


@dataclass(frozen=True, slots=True)
class Episode:
    """One question: ``video_id`` is the conversation's video in the store, ``evidence`` its gold dialog ids."""

    qid: str
    video_id: str
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True, slots=True)
class Split:
    """Training and held-out episodes, and which conversations each comes from (disjoint)."""

    train: tuple[Episode, ...]
    held_out: tuple[Episode, ...]
    train_conversations: tuple[str, ...]
    held_out_conversations: tuple[str, ...]


def episodes_of(sample: LocomoSample, categories: Sequence[int]) -> list[Episode]:
    """The questions of one conversation in ``categories`` (those with gold evidence, or adversarial ones)."""
    return [
        Episode(f"{sample.sample_id}#{i}", sample.sample_id, q.question, q.answer, q.evidence, q.category)
        for i, q in enumerate(sample.qa)
        if q.category in categories and (q.evidence or q.adversarial)
    ]


def split_by_conversation(
    samples: Sequence[LocomoSample],
    held_out: Sequence[str],
    categories: Sequence[int],
    *,
    max_train: int | None = None,
    max_held_out: int | None = None,
    seed: int = 27,
) -> Split:
    """Episodes of ``samples`` split by conversation: ``held_out`` names the evaluation conversations.

    ``max_train`` / ``max_held_out`` draw a seeded subset of each side (after the split, so the split
    itself never depends on them). A held-out name that is no conversation is a :class:`ConfigError`.
    """
    known = {s.sample_id for s in samples}
    unknown = sorted(set(held_out) - known)
    if unknown:
        raise ConfigError(f"unknown LoCoMo conversation(s) to hold out: {', '.join(unknown)}",
                          hint=f"use: {', '.join(sorted(known))}")  # fmt: skip
    train_side = [s for s in samples if s.sample_id not in held_out]
    test_side = [s for s in samples if s.sample_id in held_out]
    if not train_side:
        raise ConfigError("every conversation is held out; nothing is left to train on",
                          hint="hold out fewer conversations (train.held_out)")  # fmt: skip
    rng = random.Random(seed)
    return Split(
        train=_draw([e for s in train_side for e in episodes_of(s, categories)], max_train, rng),
        held_out=_draw([e for s in test_side for e in episodes_of(s, categories)], max_held_out, rng),
        train_conversations=tuple(s.sample_id for s in train_side),
        held_out_conversations=tuple(s.sample_id for s in test_side),
    )


def _draw(episodes: list[Episode], limit: int | None, rng: random.Random) -> tuple[Episode, ...]:
    return tuple(episodes if limit is None or limit >= len(episodes) else rng.sample(episodes, limit))


def locomo_store_path(settings: Settings, embedder: Embedder) -> Path:
    """The LoCoMo store the benchmarks build and reuse (one per embedder)."""
    return settings.resolved_cache_dir() / "bench" / f"locomo-{embedder.name}.db"


def load_samples(settings: Settings, data: Path | None = None) -> list[LocomoSample]:
    """LoCoMo's conversations from ``data`` (default: the shared ``locomo10.json``)."""
    from m3agent.bench.locomo.data import default_locomo_path, load_locomo

    return load_locomo(data or default_locomo_path(settings.shared_dir))


def ingest(store: MemoryStore, embedder: Embedder, samples: Sequence[LocomoSample], clip_seconds: float) -> None:
    """Make sure every conversation of ``samples`` is in ``store`` (complete ones are reused)."""
    from m3agent.bench.locomo.run import ensure_ingested

    ensure_ingested(store, embedder, samples, clip_seconds, show_progress=False)
