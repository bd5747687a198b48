"""``m3agent bench``: benchmarks that print JSON and write their results to docs/benchmarks.md.

``store``, ``perception`` and ``ingest`` run the scripts under ``bench/`` of a
source checkout (they need the reference media in ``../shared``); ``locomo``
and ``m3`` run from the package; ``all`` runs everything that needs no
external endpoint and prints one JSON object.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from m3agent.cli.common import build_settings, json_option
from m3agent.cli.output import print_json
from m3agent.errors import BenchmarkError

SCRIPTS = {"store": "store.py", "perception": "perception.py", "ingest": "ingest.py"}
QUICK_ARGS = {"store": ["--sizes", "100000", "--queries", "100"], "perception": [], "ingest": []}


def bench_dir() -> Path:
    """``bench/`` of the source checkout this package was installed from (editable install)."""
    path = Path(__file__).resolve().parents[3] / "bench"
    if not path.is_dir():
        raise BenchmarkError(
            f"benchmark scripts not found at {path}",
            hint="run benchmarks from a clone of the repository (pip install -e .)",
        )
    return path


def run_script(name: str, args: list[str], capture: bool) -> dict[str, Any] | None:
    """Run ``bench/<script>`` with the current Python; return its JSON output when ``capture``."""
    script = bench_dir() / SCRIPTS[name]
    if not script.is_file():
        raise BenchmarkError(f"the {name} benchmark ({script.name}) is not available yet")
    command = [sys.executable, str(script), *args]
    if not capture:
        code = subprocess.call(command, cwd=script.parents[1])
        if code:
            raise BenchmarkError(f"the {name} benchmark failed (exit {code})", hint="see its messages above")
        return None
    out = subprocess.run(command, cwd=script.parents[1], stdout=subprocess.PIPE, text=True)
    if out.returncode:
        raise BenchmarkError(f"the {name} benchmark failed (exit {out.returncode})", hint="see its messages above")
    return _last_json(out.stdout, name)


def _last_json(text: str, name: str) -> dict[str, Any]:
    start = text.find("{")
    try:
        value = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise BenchmarkError(f"the {name} benchmark printed no JSON result")
    return value


@click.group()
def bench() -> None:
    """Run a benchmark suite: store, perception, ingest, locomo, m3, episode, episodes, all."""


def _script_command(name: str, summary: str) -> click.Command:
    @click.command(name=name, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @json_option
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(as_json: bool, args: tuple[str, ...]) -> None:
        result = run_script(name, list(args), capture=as_json)
        if as_json and result is not None:
            print_json(result)

    command.help = f"{summary} Extra arguments go to bench/{SCRIPTS[name]} (see its --help)."
    return command


bench.add_command(_script_command("store", "Insert rate and search latency of the memory store."))
bench.add_command(_script_command("perception", "Face, diarization, ASR and identity quality; perception speed."))
bench.add_command(_script_command("ingest", "End-to-end ingest speed, memories per minute, store size per hour."))


@bench.command()
@click.option("--retrieval-only", is_flag=True, help="evidence recall only, no LLM")
@click.option("--llm", default=None, help="agent LLM for QA accuracy")
@click.option("--judge", default=None, help="judge LLM for QA accuracy")
@click.option("--samples", multiple=True,
              help="LoCoMo sample ids, repeated or comma-separated (default: all 10)")
@click.option("--qa-limit", type=int, default=None, help="most questions answered per sample")
@click.option("--no-doc", is_flag=True, help="leave docs/benchmarks.md alone")
@json_option
@click.pass_context
def locomo(ctx: click.Context, retrieval_only: bool, llm: str | None, judge: str | None, samples: tuple[str, ...],
           qa_limit: int | None, no_doc: bool, as_json: bool) -> None:
    """LoCoMo: evidence recall of our search vs the reference's clip search, and QA accuracy with --llm/--judge."""
    result = locomo_result(build_settings(ctx, llm=llm, judge=judge), retrieval_only or not (llm and judge),
                           [s.strip() for arg in samples for s in arg.split(",") if s.strip()] or None, qa_limit,
                           write_doc=not no_doc)
    print_json(result if as_json else _locomo_summary(result))


def locomo_result(settings: Any, retrieval_only: bool, samples: list[str] | None, qa_limit: int | None,
                  write_doc: bool) -> dict[str, Any]:
    from m3agent.bench.locomo.doc import write_locomo_section
    from m3agent.bench.locomo.run import run_locomo

    kwargs: dict[str, Any] = {"sample_ids": samples, "show_progress": True}
    if not retrieval_only:
        agent, judge = chat_models(settings, settings.llm, settings.judge, prompt="judge_locomo")
        kwargs.update(llm=agent, judge=judge, qa_limit=qa_limit)
    result: dict[str, Any] = run_locomo(settings, retrieval_only=retrieval_only, **kwargs)
    if write_doc and samples is None:
        doc = bench_dir().parent / "docs" / "benchmarks.md"
        write_locomo_section(doc, result, "m3agent bench locomo --retrieval-only")
    return result


def _locomo_summary(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("overall", "by_category", "adversarial", "targets", "qa")
    return {k: result[k] for k in keys if k in result}


@bench.command()
@click.option("--split", default="robot", show_default=True, help="robot, web, or a path to an annotation file")
@click.option("--memories", "memories_dir", required=True,
              help="folder of <video_id>.db memories, one memory file, or a postgresql:// URL holding many videos")
@click.option("--llm", required=True, help="agent LLM endpoint")
@click.option("--judge", required=True, help="judge LLM endpoint (GPT-4o-class for published numbers)")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("out/bench-m3"), show_default=True)
@click.option("--concurrency", type=int, default=2, show_default=True)
@click.option("--limit", type=int, default=None, help="answer at most this many questions")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="local: threads in this process (default); ray: one Ray task per question")
@click.option("--ray-address", default=None, help="Ray cluster to join (default: start a local one)")
@json_option
@click.pass_context
def m3(ctx: click.Context, split: str, memories_dir: str, llm: str, judge: str, out_dir: Path, concurrency: int,
       limit: int | None, executor: str | None, ray_address: str | None, as_json: bool) -> None:
    """M3-Bench: answer every question on its video's memory (truncated at before_clip) and judge it.

    With --executor ray every question is a Ray task (at most --concurrency in flight) that builds the agent
    and the judge from the --llm and --judge URLs, which every node must reach; --memories must be a
    postgresql:// URL or a path every node sees. A question whose task fails is listed under failed_tasks
    and not logged: rerun to try it again.
    """
    from m3agent.bench.m3.run import run_m3

    run = {k: v for k, v in {"kind": executor, "ray_address": ray_address}.items() if v is not None}
    settings = build_settings(ctx, llm=llm, judge=judge, executor=run or None)
    agent, judge_model = chat_models(settings, llm, judge)
    result = run_m3(settings, split, memories_dir, agent, judge_model, out_dir=out_dir, concurrency=concurrency,
                    limit=limit, show_progress=not as_json)
    print_json(result)


def chat_models(settings: Any, llm: str | None, judge: str | None, prompt: str = "judge_m3") -> tuple[Any, Any]:
    """The agent chat model and the :class:`~m3agent.bench.judge.Judge` for QA benchmarks."""
    from m3agent.bench.judge import Judge
    from m3agent.llm import chat_model_from_settings

    if not llm or not judge:
        raise BenchmarkError("QA accuracy needs both --llm and --judge endpoints")
    return chat_model_from_settings(settings, llm), Judge(chat_model_from_settings(settings, judge), prompt=prompt)


@bench.command()
@click.option("--set", "set_name", default=None, help="evaluation set: a packaged name or a JSON file "
              "(default: episode_people_v1)")
@click.option("--memory", "memory", default=None, help="ingest into this memory (default: a file beside the "
              "cached episode)")
@click.option("--fresh", is_flag=True, help="delete the default memory first, so the ingest is measured anew")
@click.option("--judge", default=None, help="judge model (default: the answering model, --llm)")
@click.option("--no-judge", is_flag=True, help="keyword scoring only")
@click.option("--limit", type=int, default=None, help="answer at most this many questions")
@click.option("--out", "out_file", type=click.Path(path_type=Path), default=None,
              help="also write the full report (every answer) to this JSON file")
@click.option("--label", default=None, help="record the run under this label in bench/scores/people_eval.jsonl "
              "and the People and order section of docs/benchmarks.md")
@json_option
@click.pass_context
def episode(ctx: click.Context, set_name: str | None, memory: str | None, fresh: bool, judge: str | None,
            no_judge: bool, limit: int | None, out_file: Path | None, label: str | None, as_json: bool) -> None:
    """People and order: identity, temporal, cross-modal, counting and description questions on a real episode."""
    from m3agent.bench.episodes.people_run import run_people_eval
    from m3agent.bench.judge import Judge
    from m3agent.llm import chat_model_from_settings
    from m3agent.llm.spec import uses_llm

    settings = build_settings(ctx)
    chat = chat_model_from_settings(settings) if uses_llm(settings.llm) else None
    judge_chat = chat_model_from_settings(settings, judge) if judge and not no_judge else chat
    judge_model = Judge(judge_chat) if judge_chat is not None and not no_judge else None
    result = run_people_eval(settings, set_name=set_name, memory=memory, chat=chat, judge=judge_model,
                             limit=limit, fresh=fresh, show_progress=not as_json)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps(result, indent=1))
    if label:
        from m3agent.bench.environment import environment
        from m3agent.bench.episodes.people_doc import record_run

        root = bench_dir()
        record_run(root / "scores" / "people_eval.jsonl", root.parent / "docs" / "benchmarks.md", result, label,
                   environment())
    print_json(result if as_json else {k: v for k, v in result.items() if k != "answers"})


@bench.command()
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True,
              help="which seeds and phrasings: test ones are reported, never debugged question by question")
@click.option("--seeds", multiple=True, help="seeds, repeated or comma-separated (default: the split's list; "
              "a seed of the other split is refused)")
@click.option("--fresh-wording", is_flag=True, help="dev only: ask the same facts in a later hand's phrasings, "
              "to measure how far answering leans on the dev wording")
@click.option("--minutes", type=float, default=3.0, show_default=True, help="length of each episode (2 to 30)")
@click.option("--llm", default=None, help="answering model (default: the settings'; none: no model)")
@click.option("--judge", default=None, help="judge model (default: the answering model)")
@click.option("--no-judge", is_flag=True, help="keyword scoring only")
@click.option("--label", default=None, help="the run's name in bench/scores/episodes.jsonl (default: the split)")
@click.option("--no-record", is_flag=True, help="leave bench/scores and docs/benchmarks.md alone")
@click.option("--out", "out_file", type=click.Path(path_type=Path), default=None,
              help="also write the full report (every answer) to this JSON file")
@json_option
@click.pass_context
def episodes(ctx: click.Context, split: str, seeds: tuple[str, ...], fresh_wording: bool, minutes: float,
             llm: str | None, judge: str | None, no_judge: bool, label: str | None, no_record: bool,
             out_file: Path | None, as_json: bool) -> None:
    """Generated episodes: accuracy per question type with 95 % intervals on seeds nobody tuned to."""
    from m3agent.bench.episodes.run import gap, record_run, run_episodes
    from m3agent.bench.judge import Judge
    from m3agent.bench.results_io import JsonlLog
    from m3agent.llm import chat_model_from_settings
    from m3agent.llm.spec import uses_llm

    settings = build_settings(ctx, **({"llm": llm} if llm is not None else {}))
    chat = chat_model_from_settings(settings) if uses_llm(settings.llm) else None
    judge_chat = chat_model_from_settings(settings, judge) if judge and not no_judge else chat
    judge_model = Judge(judge_chat) if judge_chat is not None and not no_judge else None
    if fresh_wording and split == "test":
        raise click.UsageError("--fresh-wording is for dev seeds; test seeds are asked only test phrasings")
    numbers = [int(s) for arg in seeds for s in arg.split(",") if s.strip()]
    result = run_episodes(settings, "test" if split == "test" else "dev", numbers or None, minutes, chat=chat,
                          judge=judge_model, show_progress=not as_json,
                          wording="fresh" if fresh_wording else None)
    scores = bench_dir() / "scores" / "episodes.jsonl"
    result["gap"] = gap(JsonlLog(scores).read(), result)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps(result, indent=1))
    if not no_record:
        from m3agent.bench.environment import environment

        record_run(scores, bench_dir().parent / "docs" / "benchmarks.md", result, label or split, environment())
    print_json(result if as_json else {k: v for k, v in result.items() if k != "answers"})


@bench.command(name="all")
@click.option("--quick", is_flag=True, help="smaller store sizes")
@json_option
@click.pass_context
def bench_all(ctx: click.Context, quick: bool, as_json: bool) -> None:
    """Everything that needs no external endpoint, as one JSON object."""
    settings = build_settings(ctx)
    results: dict[str, Any] = {}
    for name in ("store", "perception", "ingest"):
        args = QUICK_ARGS[name] if quick else []
        try:
            results[name] = run_script(name, args, capture=True)
        except BenchmarkError as exc:
            results[name] = {"error": exc.message}
    results["locomo"] = _locomo_summary(locomo_result(settings, True, None, None, write_doc=True))
    print_json(results)


COMMANDS = [bench]
