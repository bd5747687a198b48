"""The prompting baseline: one retrieval with the question, one answer call, no iteration.

It measures what the multi-turn loop adds: the same store, tools, prompts
conventions and Answer object, but the model never chooses a query.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from m3agent.control.replies import AnswerReply
from m3agent.control.retrieval.render import render_result
from m3agent.control.steps import Action, Observation, Step, Thought
from m3agent.errors import MalformedReplyError
from m3agent.llm.prompts import load_prompt_set

if TYPE_CHECKING:
    from m3agent.control.run_context import RunContext

BASELINE_TOOL = "search_clip"


def baseline_steps(run: RunContext) -> Iterator[Step]:
    """Action + Observation of the retrieval, then Thought + Answer from one model call."""
    prompts = load_prompt_set("control_answer")
    yield Action(1, BASELINE_TOOL, run.question)
    result = run.search(BASELINE_TOOL, run.question)
    knowledge = "No memories found."
    if not result.empty:
        knowledge = render_result(result, with_video=run.video_id is None)
    yield Observation(1, knowledge, result)
    system = prompts.render("system", question=run.question, time_context=run.time_context())
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompts.render("user", knowledge=knowledge)},
    ]
    reply = run.call(messages, prompts.schema)
    try:
        parsed = AnswerReply.read(reply)
    except MalformedReplyError as exc:
        yield Observation(1, exc.message, error=exc.message)
        yield run.finish("", 1, reply.text, f"no usable answer: {exc.message}")
        return
    run.thoughts.append(parsed.thought)
    if parsed.thought:
        yield Thought(1, parsed.thought)
    yield run.finish(parsed.content, 1)
