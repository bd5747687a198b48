"""``run_m3``: answer M3-Bench questions on stored memories, judge them, report accuracy.

Each question is answered on the memory of its video, truncated at its
``before_clip`` (robot questions), by the control agent; the judge of the
published protocol grades the answer. Every outcome is appended to a JSONL
file as soon as it is known, so a killed run resumes where it stopped
(question ids already in the file are skipped). Judge failures are kept
apart from wrong answers; agent failures (no usable answer) count as wrong,
as in the published protocol.

With ``settings.executor.kind == "ray"`` the questions become Ray tasks
(:mod:`m3agent.bench.m3.ray_tasks`); this process still writes the log and the report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.bench.environment import environment
from m3agent.bench.m3.answer import MemoryLocator, answer_one
from m3agent.bench.m3.data import Answerer, M3Question, load_m3bench, resolve_split
from m3agent.bench.m3.report import summarise_m3, write_m3_report
from m3agent.bench.progress import progress
from m3agent.bench.results_io import JsonlLog
from m3agent.errors import BenchmarkError

if TYPE_CHECKING:
    from m3agent.bench.judge import Judge
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings


def run_m3(
    settings: Settings,
    split: str,
    memories_dir: Path | str,
    llm: ChatModel | None,
    judge: Judge,
    *,
    out_dir: Path | str | None = None,
    answerer: Answerer | None = None,
    concurrency: int = 2,
    limit: int | None = None,
    question_ids: Sequence[str] | None = None,
    seed: int = 20250811,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run M3-Bench ``split`` (robot, web or an annotation path) and write JSONL + report.

    ``answerer`` defaults to the control agent driven by ``llm``. Questions
    whose video has no memory are listed as skipped, not scored. ``memories_dir``
    is a folder of ``<video_id>.db`` files, one memory file, or a store URL.
    Returns the summary (also written to ``summary.json``).
    """
    name, annotations = resolve_split(split, settings.shared_dir)
    questions = _select(load_m3bench(annotations), limit, question_ids)
    out = Path(out_dir) if out_dir else Path("bench-results") / f"m3-{name}"
    log = JsonlLog(out / f"{name}.jsonl")
    locator = MemoryLocator(str(memories_dir))
    on_ray = settings.executor.kind == "ray"
    if on_ray and answerer is not None:
        raise BenchmarkError("a custom answerer runs only in this process", hint="use --executor local")
    answer = answerer or default_answerer(settings, llm)
    done = {r["question_id"] for r in log.read()}
    todo, missing = _plan(questions, done, locator)
    started = time.perf_counter()
    failed: list[dict[str, Any]] = []
    if on_ray:
        from m3agent.bench.m3.ray_tasks import execute_on_ray

        failed = execute_on_ray(settings, todo, locator, judge, log, name, concurrency, show_progress)
    else:
        _execute(todo, locator, answer, judge, log, name, concurrency, show_progress)
    wanted = {q.question_id for q in questions}
    records = [r for r in log.read() if r["question_id"] in wanted]
    models = {"agent": getattr(llm, "name", "custom answerer"), "embedder": settings.embedder}
    env = environment(models=models, judge=judge.info())
    summary = summarise_m3(records, seed=seed)
    summary.update(_run_info(name, annotations, locator, questions, missing, done, todo, started, concurrency))
    summary.update(executor=settings.executor.kind, failed_tasks=failed)
    summary["environment"] = env
    write_m3_report(out, summary)
    return summary


def _select(questions: list[M3Question], limit: int | None, ids: Sequence[str] | None) -> list[M3Question]:
    if ids:
        wanted = set(ids)
        questions = [q for q in questions if q.question_id in wanted]
        if not questions:
            raise BenchmarkError("none of the given question ids is in the annotations")
    return questions[:limit] if limit else questions


def _plan(
    questions: Sequence[M3Question], done: set[str], locator: MemoryLocator
) -> tuple[list[M3Question], list[str]]:
    """Questions still to run, and ids skipped because their video has no memory."""
    todo, missing = [], []
    videos_cache: dict[str, set[str]] = {}
    for q in questions:
        if q.question_id in done:
            continue
        path = locator.path_for(q.video_id)
        if path is None or q.video_id not in _videos(path, videos_cache):
            missing.append(q.question_id)
        else:
            todo.append(q)
    return todo, missing


def _videos(path: str, cache: dict[str, set[str]]) -> set[str]:
    if path not in cache:
        from m3agent.store import open_store

        with open_store(path, readonly=True, create=False) as store:
            cache[path] = {v.video_id for v in store.videos()}
    return cache[path]


def _execute(
    todo: Sequence[M3Question],
    locator: MemoryLocator,
    answer: Answerer,
    judge: Judge,
    log: JsonlLog,
    split: str,
    concurrency: int,
    show_progress: bool,
) -> None:
    """Answer and judge ``todo`` with at most ``concurrency`` requests in flight."""
    with (
        progress(f"M3-Bench {split}", len(todo), show_progress) as advance,
        ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool,
    ):
        futures = [pool.submit(answer_one, q, locator, answer, judge, split) for q in todo]
        for future in as_completed(futures):
            log.append(future.result())
            advance()


def _run_info(
    name: str,
    annotations: Path,
    locator: MemoryLocator,
    questions: Sequence[M3Question],
    missing: Sequence[str],
    done: set[str],
    todo: Sequence[M3Question],
    started: float,
    concurrency: int,
) -> dict[str, Any]:
    return {
        "benchmark": "m3-bench",
        "split": name,
        "annotations": str(annotations),
        "memories": locator.shown(),
        "questions_selected": len(questions),
        "questions_run_now": len(todo),
        "questions_resumed": len({q.question_id for q in questions} & done),
        "skipped_no_memory": list(missing),
        "wall_s": round(time.perf_counter() - started, 1),
        "concurrency": concurrency,
    }


def default_answerer(settings: Settings, llm: ChatModel | None) -> Answerer:
    """The control agent with ``llm``, searching the memory of the question's video up to ``before_clip``."""
    if llm is None:
        raise BenchmarkError("M3-Bench needs an answering LLM", hint="pass --llm openai://host:port/v1?model=NAME")
    from m3agent.bench.agent_adapter import control_answerer

    return control_answerer(settings, llm)
