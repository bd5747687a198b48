"""``run_locomo``: LoCoMo retrieval recall (LLM-free) and, with an LLM and a judge, QA accuracy."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.bench.environment import environment
from m3agent.bench.locomo.data import LocomoSample, adversarial_attribution, default_locomo_path, load_locomo
from m3agent.bench.locomo.ingest import INGEST_FORMAT, ingest_sample
from m3agent.bench.locomo.retrieval import RetrievalRun, summarise
from m3agent.bench.progress import progress
from m3agent.bench.reference_search import REFERENCE_THRESHOLD, REFERENCE_TOP_CLIPS
from m3agent.domain import ClipStatus
from m3agent.errors import BenchmarkError

if TYPE_CHECKING:
    from m3agent.bench.judge import Judge
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore

TARGETS = {"recall_at_10": 0.55, "recall_at_20": 0.65}


def run_locomo(
    settings: Settings,
    retrieval_only: bool = True,
    ks: Sequence[int] = (5, 10, 20),
    *,
    data_path: Path | str | None = None,
    store_path: Path | str | None = None,
    sample_ids: Sequence[str] | None = None,
    embedder: Embedder | None = None,
    llm: ChatModel | None = None,
    judge: Judge | None = None,
    qa_limit: int | None = None,
    out_dir: Path | str | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Ingest LoCoMo into a store (reused when complete) and evaluate it.

    Retrieval recall is always measured; QA accuracy only when
    ``retrieval_only`` is False and both ``llm`` and ``judge`` are given.
    ``store_path`` defaults to ``<cache_dir>/bench/locomo-v<ingest format>-<embedder>.db``.
    """
    from m3agent.embed import create_embedder
    from m3agent.store import open_store

    embedder = embedder or create_embedder(settings.embedder)
    data = Path(data_path) if data_path else default_locomo_path(settings.shared_dir)
    samples = _select(load_locomo(data), sample_ids)
    path = Path(store_path) if store_path else default_store(settings, embedder)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_store(str(path)) as store:
        ingest = ensure_ingested(store, embedder, samples, settings.media.clip_seconds, show_progress)
        run = RetrievalRun(store, embedder, tuple(ks))
        records = run.evaluate(samples, show_progress)
        result = _result(settings, embedder, data, path, samples, ingest, run, summarise(records, ks))
        if not retrieval_only:
            result["qa"] = _qa(settings, store, embedder, samples, llm, judge, qa_limit, out_dir, show_progress)
    return result


def ensure_ingested(
    store: MemoryStore,
    embedder: Embedder,
    samples: Sequence[LocomoSample],
    clip_seconds: float = 30.0,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Ingest samples whose video is missing or incomplete; complete ones are reused."""
    store.set_embedding_model(embedder.name, embedder.dim)
    todo = [s for s in samples if not _complete(store, s)]
    started = time.perf_counter()
    memories = 0
    with progress("LoCoMo ingest", len(todo), show_progress and bool(todo)) as advance:
        for sample in todo:
            if any(v.video_id == sample.sample_id for v in store.videos()):
                store.delete_video(sample.sample_id)
            memories += ingest_sample(store, embedder, sample, clip_seconds).memories
            advance()
    seconds = time.perf_counter() - started
    return {
        "ingested": [s.sample_id for s in todo],
        "reused": [s.sample_id for s in samples if s not in todo],
        "memories_written": memories,
        "seconds": round(seconds, 1),
    }


def _complete(store: MemoryStore, sample: LocomoSample) -> bool:
    if not any(v.video_id == sample.sample_id for v in store.videos()):
        return False
    clips = store.clips(sample.sample_id)
    return len(clips) == len(sample.sessions) and all(status is ClipStatus.DONE for _, status, _ in clips)


def _select(samples: list[LocomoSample], sample_ids: Sequence[str] | None) -> list[LocomoSample]:
    if not sample_ids:
        return samples
    chosen = [s for s in samples if s.sample_id in set(sample_ids)]
    missing = set(sample_ids) - {s.sample_id for s in chosen}
    if missing:
        known = ", ".join(s.sample_id for s in samples)
        raise BenchmarkError(f"unknown LoCoMo samples: {', '.join(sorted(missing))}", hint=f"use some of: {known}")
    return chosen


def default_store(settings: Settings, embedder: Embedder) -> Path:
    """``<cache_dir>/bench/locomo-v<ingest format>-<embedder>.db``: one store per layout and embedder, so a
    store written by another ingest format or embedder is never reused."""
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", embedder.name)
    return settings.resolved_cache_dir() / "bench" / f"locomo-v{INGEST_FORMAT}-{slug}.db"


def _result(
    settings: Settings,
    embedder: Embedder,
    data: Path,
    store_path: Path,
    samples: Sequence[LocomoSample],
    ingest: dict[str, Any],
    run: RetrievalRun,
    figures: dict[str, Any],
) -> dict[str, Any]:
    questions = figures["overall"]["n"] + figures["adversarial"]["n"]
    overall = figures["overall"]
    return {
        "benchmark": "locomo-retrieval",
        **figures,
        "targets": _targets(overall, run.ks),
        "setup": {
            "data": str(data),
            "samples": [s.sample_id for s in samples],
            "questions_with_evidence": questions,
            "questions_without_evidence": sum(1 for s in samples for q in s.qa if not q.evidence),
            "dropped_evidence_ids": sum(s.dropped_evidence for s in samples),
            "adversarial_naming_one_speaker_and_evidence_by_other": adversarial_attribution(list(samples)),
            "store": str(store_path),
            "ks": list(run.ks),
            "reference": {"threshold": REFERENCE_THRESHOLD, "top_clips": REFERENCE_TOP_CLIPS},
            "ingest": ingest,
        },
        "latency_ms": {
            "ours_per_query": round(1000 * run.timings["ours_s"] / max(1, questions), 2),
            "reference_per_query": round(1000 * run.timings["reference_s"] / max(1, questions), 2),
        },
        "environment": environment(models={"embedder": embedder.name, "embedding_dim": embedder.dim}),
    }


def _targets(overall: dict[str, Any], ks: Sequence[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, goal in TARGETS.items():
        if key in overall:
            out[key] = {"goal": goal, "value": overall[key], "met": overall[key] >= goal}
    ref = overall["reference"]["recall_per_returned"]
    beats = {str(k): overall["recall_per_returned"][str(k)] > ref for k in ks}
    out["recall_per_returned_beats_reference"] = {"by_k": beats, "met": all(beats.values())}
    return out


def _qa(
    settings: Settings,
    store: MemoryStore,
    embedder: Embedder,
    samples: Sequence[LocomoSample],
    llm: ChatModel | None,
    judge: Judge | None,
    limit: int | None,
    out_dir: Path | str | None,
    show_progress: bool,
) -> dict[str, Any]:
    if llm is None or judge is None:
        raise BenchmarkError(
            "LoCoMo QA accuracy needs an answering LLM and a judge",
            hint="pass --llm and --judge, or --retrieval-only",
        )
    from m3agent.bench.locomo.qa import evaluate_qa

    return evaluate_qa(settings, store, embedder, samples, llm, judge, limit, out_dir, show_progress)
