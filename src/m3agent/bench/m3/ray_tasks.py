"""M3-Bench questions as Ray tasks: answered and judged in workers, recorded here as each arrives.

A worker rebuilds the agent and the judge from the settings: ``llm`` and ``judge`` are endpoint
specs (vLLM replicas behind OpenAI-compatible URLs that every node reaches), the text embedder is
loaded once per worker process. It opens the question's memory by location: a PostgreSQL URL, or
SQLite files on a filesystem every node sees (always so on a local cluster). Each task declares
``executor.cpus_per_question`` CPUs; at most ``concurrency`` are in flight, so the endpoints see
the same load as with the local executor.

A task that fails (its worker died, an unexpected exception) is tried again up to
``executor.retries`` times; if it still fails the question is not logged, so the next run,
which skips only logged questions, tries it again. Agent and judge failures are ordinary
records, as in the local executor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent.errors import BenchmarkError

if TYPE_CHECKING:
    from m3agent.bench.judge import Judge
    from m3agent.bench.m3.answer import MemoryLocator
    from m3agent.bench.m3.data import M3Question
    from m3agent.bench.results_io import JsonlLog
    from m3agent.embed import Embedder
    from m3agent.executor import TaskResult
    from m3agent.settings import Settings

_EMBEDDERS: dict[str, Embedder] = {}  # per worker process: one text embedder per spec


def execute_on_ray(settings: Settings, todo: Sequence[M3Question], locator: MemoryLocator, judge: Judge,
                   log: JsonlLog, split: str, concurrency: int, show_progress: bool) -> list[dict[str, Any]]:
    """Answer and judge ``todo`` as Ray tasks, appending each record to ``log``; the tasks that failed."""
    from m3agent.bench.progress import progress
    from m3agent.executor import map_on_ray

    if not settings.llm or not settings.judge:
        raise BenchmarkError("Ray workers build the agent and the judge from the settings' llm and judge",
                             hint="pass --llm and --judge endpoint URLs")
    if not todo:
        return []
    settings_json = settings.model_dump_json()
    judging = {"prompt": judge.prompt.name, "retries": judge.retries}
    calls = [(settings_json, judging, q, locator, split) for q in todo]
    failed: list[dict[str, Any]] = []
    with progress(f"M3-Bench {split} on Ray", len(todo), show_progress) as advance:

        def done(result: TaskResult) -> None:
            if result.ok:
                log.append(result.value)
            else:
                question = todo[result.index]
                failed.append({"question_id": question.question_id, "attempts": result.attempts,
                               "error": result.error})
            advance()

        map_on_ray(settings, question_task, calls, num_cpus=settings.executor.cpus_per_question,
                   in_flight=concurrency, on_result=done)
    return failed


def question_task(settings_json: str, judging: dict[str, Any], question: M3Question, locator: MemoryLocator,
                  split: str) -> dict[str, Any]:
    """One question in a Ray worker: the record the local executor would write for it."""
    from m3agent.bench.agent_adapter import control_answerer
    from m3agent.bench.judge import Judge
    from m3agent.bench.m3.answer import answer_one
    from m3agent.llm import chat_model_from_settings
    from m3agent.settings import Settings

    settings = Settings.model_validate(json.loads(settings_json))
    answer = control_answerer(settings, chat_model_from_settings(settings, settings.llm), _embedder(settings))
    judge = Judge(chat_model_from_settings(settings, settings.judge), prompt=judging["prompt"],
                  retries=judging["retries"])
    return answer_one(question, locator, answer, judge, split)


def _embedder(settings: Settings) -> Embedder:
    from m3agent.embed import create_embedder

    if settings.embedder not in _EMBEDDERS:
        _EMBEDDERS[settings.embedder] = create_embedder(settings.embedder)
    return _EMBEDDERS[settings.embedder]
