"""LoCoMo QA accuracy: the control agent answers from the ingested conversation, an LLM judges.

Categories 1-4 make the overall accuracy; adversarial questions (category 5,
whose right answer is that the conversation does not say) are reported
separately. Outcomes go to a resumable JSONL like the M3-Bench runner's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.bench.locomo.data import ANSWERABLE_CATEGORIES, CATEGORY_NAMES, LocomoSample, QAItem
from m3agent.bench.progress import progress
from m3agent.bench.results_io import JsonlLog
from m3agent.bench.stats import accuracy_by_label, bootstrap_accuracy
from m3agent.errors import M3AgentError

if TYPE_CHECKING:
    from m3agent.bench.judge import Judge
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore


def evaluate_qa(
    settings: Settings,
    store: MemoryStore,
    embedder: Embedder,
    samples: Sequence[LocomoSample],
    llm: ChatModel,
    judge: Judge,
    limit: int | None = None,
    out_dir: Path | str | None = None,
    show_progress: bool = True,
    concurrency: int = 1,
) -> dict[str, Any]:
    """Answer (up to ``limit``) questions per sample and judge them; returns accuracy figures."""
    log = JsonlLog(Path(out_dir or "bench-results/locomo") / "locomo_qa.jsonl")
    done = {r["question_id"] for r in log.read()}
    items = [(s, i, q) for s in samples for i, q in enumerate(s.qa[:limit] if limit else s.qa)]
    todo = [(s, i, q) for s, i, q in items if _qid(s, i) not in done]
    with (
        progress("LoCoMo QA", len(todo), show_progress) as advance,
        ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool,
    ):
        futures = [pool.submit(_one, settings, store, embedder, llm, judge, s, i, q) for s, i, q in todo]
        for future in as_completed(futures):
            log.append(future.result())
            advance()
    wanted = {_qid(s, i) for s, i, _ in items}
    summary = summarise_qa([r for r in log.read() if r["question_id"] in wanted], judge, log.path)
    summary["agent"] = {"model": llm.name, "rounds": settings.control.rounds, "embedder": embedder.name}
    return summary


def _qid(sample: LocomoSample, index: int) -> str:
    return f"{sample.sample_id}#{index}"


def _one(
    settings: Settings,
    store: MemoryStore,
    embedder: Embedder,
    llm: ChatModel,
    judge: Judge,
    sample: LocomoSample,
    index: int,
    item: QAItem,
) -> dict[str, Any]:
    from m3agent.bench.agent_adapter import chat_spec
    from m3agent.control import AgentConfig, ask

    record: dict[str, Any] = {
        "question_id": _qid(sample, index),
        "category": item.category,
        "question": item.question,
        "ground_truth": item.answer,
        "evidence": list(item.evidence),
    }
    started = time.perf_counter()
    try:
        config = AgentConfig.from_settings(settings.control, chat_spec(settings))
        answer = ask(store, embedder, llm, item.question, video_id=sample.sample_id, config=config)
        response = answer.text if answer.answered else ""
        record.update(response=response, rounds=answer.rounds, usage=answer.usage.to_dict(), failure=answer.failure)
    except M3AgentError as exc:
        record.update(response="", rounds=0, usage={}, failure=f"{type(exc).__name__}: {exc}")
    record["latency_s"] = round(time.perf_counter() - started, 3)
    verdict = judge.judge(item.question, item.answer, record["response"])
    record.update(correct=verdict.correct, verdict=verdict.verdict, judge_error=verdict.error, judge_raw=verdict.raw)
    return record


def summarise_qa(records: Sequence[dict[str, Any]], judge: Judge, path: Path) -> dict[str, Any]:
    judged = [r for r in records if r.get("correct") is not None]
    answerable = [r for r in judged if r["category"] in ANSWERABLE_CATEGORIES]
    labelled = [((CATEGORY_NAMES[r["category"]],), bool(r["correct"])) for r in judged]
    return {
        "questions": len(records),
        "judged": len(judged),
        "judge_failures": len(records) - len(judged),
        "accuracy": bootstrap_accuracy([bool(r["correct"]) for r in answerable]).to_dict(),
        "by_category": {k: v.to_dict() for k, v in accuracy_by_label(labelled).items()},
        "mean_rounds": round(sum(float(r.get("rounds") or 0) for r in records) / max(1, len(records)), 2),
        "mean_tokens": round(
            sum(float((r.get("usage") or {}).get("total_tokens", 0)) for r in records) / max(1, len(records)),
            1,
        ),
        "judge": judge.info(),
        "jsonl": str(path),
    }
