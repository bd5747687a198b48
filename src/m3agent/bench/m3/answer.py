"""One M3-Bench question answered and judged on its video's memory, and where that memory is.

Shared by the local executor (:mod:`m3agent.bench.m3.run`) and Ray workers
(:mod:`m3agent.bench.m3.ray_tasks`), so both write the same record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.bench.m3.data import Answerer, M3Question
from m3agent.errors import BenchmarkError, M3AgentError
from m3agent.store.location import StoreKind, StoreLocation, parse_location

if TYPE_CHECKING:
    from m3agent.bench.judge import Judge, Verdict
    from m3agent.control.steps import Answer


@dataclass(frozen=True, slots=True)
class MemoryLocator:
    """Where each video's memory is: ``DIR/<video_id>.db`` files, one SQLite file holding many videos,
    or one store URL (``postgresql://...``) holding many videos."""

    root: str

    @property
    def location(self) -> StoreLocation:
        """The root parsed as a memory spec (a folder of memory files parses as a SQLite path)."""
        return parse_location(self.root)

    @property
    def is_url(self) -> bool:
        return self.location.kind is StoreKind.POSTGRES

    def path_for(self, video_id: str) -> str | None:
        """The store to open for ``video_id``, or ``None`` when it has no memory file."""
        path = self.location.path
        if path is None:
            return self.root
        if path.is_dir():
            candidate = path / f"{video_id}.db"
            return str(candidate) if candidate.is_file() else None
        return self.root if path.is_file() else None

    def shown(self) -> str:
        """The location as reports may show it (no password)."""
        from m3agent.store.postgres.schema import redacted

        return redacted(self.root) if self.is_url else self.root


def answer_one(q: M3Question, locator: MemoryLocator, answer: Answerer, judge: Judge, split: str) -> dict[str, Any]:
    """Answer and judge one question; every failure of the agent or the judge becomes part of the record."""
    from m3agent.store import open_store

    path = locator.path_for(q.video_id)
    if path is None:
        raise BenchmarkError(f"no memory of video {q.video_id} in {locator.shown()}")
    record = _base_record(q, split, locator.shown() if locator.is_url else path)
    started = time.perf_counter()
    try:
        with open_store(path, readonly=True, create=False) as store:
            outcome = answer(store, q)
        record.update(_answer_fields(outcome))
    except M3AgentError as exc:
        record.update(response="", answered=False, agent_failure=f"{type(exc).__name__}: {exc}")
    record["latency_s"] = round(time.perf_counter() - started, 3)
    record.update(_verdict_fields(judge.judge(q.question, q.answer, record["response"])))
    return record


def _base_record(q: M3Question, split: str, path: str) -> dict[str, Any]:
    return {
        "question_id": q.question_id,
        "video_id": q.video_id,
        "split": split,
        "question": q.question,
        "ground_truth": q.answer,
        "types": list(q.types),
        "before_clip": q.before_clip,
        "memory": path,
    }


def _answer_fields(outcome: Answer) -> dict[str, Any]:
    return {
        "response": outcome.text if outcome.answered else "",
        "answered": outcome.answered,
        "agent_failure": outcome.failure,
        "rounds": outcome.rounds,
        "usage": outcome.usage.to_dict(),
        "agent_latency_s": round(outcome.latency_s, 3),
        "model": outcome.model,
        "searches": [s.query for s in outcome.searches],
        "clips": [c.index for c in outcome.clips],
    }


def _verdict_fields(verdict: Verdict) -> dict[str, Any]:
    return {
        "correct": verdict.correct,
        "verdict": verdict.verdict,
        "judge_error": verdict.error,
        "judge_raw": verdict.raw,
        "judge_attempts": verdict.attempts,
        "judge_latency_s": verdict.latency_s,
        "judge_usage": verdict.usage,
    }
