"""``m3agent ask``: answer a question from memory, with evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from m3agent.cli.common import CLIP_INDEX, COUNT, build_settings, json_option, memory_option
from m3agent.cli.output import console, print_json
from m3agent.domain import CONTROL_MODE_SETTINGS
from m3agent.terminal import markup_literal as escape

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from m3agent.control.steps import Answer, Step
    from m3agent.settings import Settings


@click.command()
@click.argument("question")
@memory_option
@click.option("--video", "video_id", default=None, help="restrict to one video of the memory")
@click.option("--before-clip", type=CLIP_INDEX, default=None,
              help="answer as of this clip (inclusive): nothing later is seen")
@click.option("--llm", default=None,
              help="control LLM: openai://host:port/v1?model=NAME, llamacpp:smollm2, none (select by reranking)")
@click.option("--mode", type=click.Choice(CONTROL_MODE_SETTINGS), default=None,
              help="agent: multi-round; baseline: one retrieval + answer; select: the model picks a retrieved "
                   "memory; auto (default): select for llamacpp:/none, agent for endpoints")
@click.option("--rounds", type=COUNT, default=None, help="most search rounds (default: control.rounds)")
@click.option("--baseline", is_flag=True, help="shortcut for --mode baseline")
@json_option
@click.pass_context
def ask(ctx: click.Context, question: str, memory: str | None, video_id: str | None, before_clip: int | None,
        llm: str | None, mode: str | None, rounds: int | None, baseline: bool, as_json: bool) -> None:
    """Answer QUESTION from the memory (see --mode); print the steps, or the Answer as JSON."""
    from m3agent.embed import prewarm

    settings = build_settings(ctx, memory=memory, llm=llm)
    loading = prewarm(settings.embedder)  # its load overlaps the imports below and the opening of the memory
    try:
        answer = _answer(question, settings, video_id=video_id, before_clip=before_clip,
                         mode="baseline" if baseline else mode, rounds=rounds, show=not as_json)
    finally:
        if loading is not None:  # ended before the process does, whatever happened (a store of another embedder
            loading.join()       # never waited for it); a process ending inside ONNX Runtime's code aborts
    if as_json:
        print_json(answer)
    else:
        _print_answer(answer)


def _answer(question: str, settings: Settings, *, show: bool, **options: Any) -> Answer:
    """The Answer to ``question`` (its steps printed when ``show``), the local model kept loaded after it."""
    from m3agent.control import answer_steps
    from m3agent.llm import chat_model_from_settings
    from m3agent.llm.spec import uses_llm
    from m3agent.store import open_memory

    chat = chat_model_from_settings(settings, resident=True) if uses_llm(settings.llm) else None
    try:
        with open_memory(settings, readonly=True, create=False) as store:
            return _consume(answer_steps(question, store, settings, chat=chat, **options), show=show)
    finally:
        if chat is not None and hasattr(chat, "close"):
            chat.close()


def _consume(steps: Iterator[Step], show: bool) -> Answer:
    """Drain the step stream, printing each step when ``show``; return the final Answer."""
    from m3agent.control.steps import Answer

    for step in steps:
        if isinstance(step, Answer):
            return step
        if show:
            _print_step(step)
    raise RuntimeError("the agent stopped without an answer")


def _print_step(step: Step) -> None:
    from m3agent.control.steps import Action, Observation, Thought

    con = console()
    if isinstance(step, Thought):
        con.print(f"[dim]round {step.round} · thinking:[/] {escape(step.text)}")
    elif isinstance(step, Action):
        con.print(f"[cyan]round {step.round} · {escape(step.tool)}:[/] {escape(step.content)}")
    elif isinstance(step, Observation):
        lines = step.text.strip().splitlines()
        more = f" … (+{len(lines) - 4} lines)" if len(lines) > 4 else ""
        con.print("[dim]" + escape("\n".join(lines[:4]) + more) + "[/]")


def _print_answer(answer: Answer) -> None:
    con = console()
    status = "" if answer.answered else f" [yellow](no usable answer: {escape(answer.failure)})[/]"
    con.print(f"\n[bold green]answer:[/] {escape(answer.text)}{status}")
    con.print(f"[dim]{answer.rounds} round(s), {answer.usage.total_tokens} tokens, {answer.latency_s:.1f} s, "
              f"model {escape(answer.model)}[/]")
    for ev in answer.evidence[:8]:
        mark = "*" if ev.cited else " "
        where = escape(f"[{ev.clip.video_id} clip {ev.clip.index} {ev.start_s:.1f}-{ev.end_s:.1f}s]")
        con.print(f" {mark} {where} {escape(ev.text)}")


COMMANDS = [ask]
