"""The agent mode: a multi-turn loop in which the model searches memory and answers with evidence.

Each round the model returns an :class:`~m3agent.control.replies.AgentReply`
(schema ``prompts/control_agent.json``); ``search_clip``/``search_memory``
run the :class:`~m3agent.control.retrieval.search.MemorySearcher` tool and the result
becomes the next observation; ``answer`` ends the run. The last round uses
``prompts/control_answer.json`` (:class:`~m3agent.control.replies.AnswerReply`),
whose only action is ``answer`` (so structured-output backends cannot do
anything else). A reply that does not match the schema becomes an
observation telling the model what was wrong; it costs its round but never
runs a silent empty search.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Generator, Iterator
from typing import Any

from m3agent.control.modes.conversation import Conversation
from m3agent.control.people.graph_tools import GRAPH_TOOLS, graph_search_result, graph_tool_lines, graph_video
from m3agent.control.replies import AgentReply, AnswerReply
from m3agent.control.retrieval.render import render_result
from m3agent.control.run_context import RunContext
from m3agent.control.steps import Action, Answer, Observation, Step, Thought
from m3agent.errors import ContextOverflowError, MalformedReplyError
from m3agent.llm import context_window
from m3agent.llm.prompts import PromptSet, load_prompt_set
from m3agent.llm.schema import strip_thinking

AGENT_PROMPT = "control_agent"
ANSWER_PROMPT = "control_answer"


def agent_steps(run: RunContext) -> Iterator[Step]:
    """The ``agent`` mode: an optional round-0 seed search, then up to ``rounds`` model turns."""
    prompts = load_prompt_set(AGENT_PROMPT)
    video_id = graph_video(run, [])
    tools = prompts.render("graph_tools") + "\n" if video_id is not None else ""
    system = prompts.render("system", question=run.question, time_context=run.time_context(), graph_tools=tools)
    conversation = Conversation(
        system,
        prompts.render("start"),
        budget_tokens=prompt_budget(run),
        with_video=run.video_id is None,
    )
    if run.config.seed_search:
        yield Action(0, "search_memory", run.question)
        seed = _search_observation(run, prompts.render, 0, "search_memory", run.question)
        yield seed
        conversation.open_with(seed)
    for number in range(1, run.config.rounds + 1):
        answer = yield from _round(run, prompts, conversation, number, video_id)
        if answer is not None:
            yield answer
            return


CONTEXT_SAFETY = 0.8
"""Share of a known context window the *estimated* prompt may fill: the estimate (4 characters a token)
runs low on tags, numbers and JSON, and an over-long prompt ends the run."""


def prompt_budget(run: RunContext) -> int:
    """Tokens the conversation may fill: the configured budget, cut to the model's context window where the
    backend knows it (a 4,096-token local model cannot take the default 6,000), less the reply budget."""
    budget = run.config.max_context_tokens
    window = context_window(run.chat)
    if window is not None:
        budget = min(budget, int(window * CONTEXT_SAFETY))
    return max(budget - run.config.max_tokens, 256)


def _round(
    run: RunContext, prompts: PromptSet, conversation: Conversation, number: int, video_id: str | None = None
) -> Generator[Step, None, Answer | None]:
    """One model turn and its consequence; returns the Answer when the run ends."""
    final = number == run.config.rounds
    instruction = prompts.render("final" if final else "round", round=number, rounds=run.config.rounds)
    messages = conversation.fit(instruction, run.cited(), run.release)
    schema = load_prompt_set(ANSWER_PROMPT).schema if final else agent_schema(prompts.schema, video_id is not None)
    try:
        reply = run.call(messages, schema)
    except ContextOverflowError as exc:  # the conversation outgrew the model: end with what is known
        return run.finish("", number, "", f"the conversation no longer fits the model's context: {exc.message}")
    try:
        parsed: AgentReply | AnswerReply = (AnswerReply if final else AgentReply).read(reply)
    except MalformedReplyError as exc:
        observation = Observation(number, prompts.render("feedback", error=exc.message), error=exc.message)
        yield observation
        conversation.add(strip_thinking(reply.text) or reply.text.strip(), observation)
        failure = f"no usable answer in the last round: {exc.message}"
        return run.finish("", number, reply.text, failure) if final else None
    thought, tool, content = parsed.thought, parsed.action, parsed.content
    run.thoughts.append(thought)
    if thought:
        yield Thought(number, thought)
    yield Action(number, tool, content)
    if tool == "answer":
        return run.finish(content, number)
    if tool in GRAPH_TOOLS and video_id is None:
        observation = Observation(number, prompts.render("empty", query=content), error=f"{tool} is not offered")
    elif tool in GRAPH_TOOLS:
        observation = _graph_observation(run, number, tool, content, video_id or "")
    else:
        observation = _search_observation(run, prompts.render, number, tool, content)
    yield observation
    conversation.add(_canonical(thought, tool, content), observation)
    return None


def _search_observation(
    run: RunContext, render: Callable[..., str], number: int, tool: str, query: str
) -> Observation:
    result = run.search(tool, query)
    if result.empty:
        return Observation(number, render("empty", query=query), result)
    return Observation(number, render_result(result, with_video=run.video_id is None), result)


def _graph_observation(run: RunContext, number: int, tool: str, content: str, video_id: str) -> Observation:
    """The operators' lines for a graph tool, with the shot summaries they rest on as the result's hits."""
    lines = graph_tool_lines(run.entity_graph(), video_id, tool, content)
    result = graph_search_result(run, tool, [m for f in lines for m in f.memory_ids], [f.text for f in lines])
    run.searches.append(result)
    return Observation(number, "\n".join(f.text for f in lines), result)


def agent_schema(template: dict[str, Any], graph: bool) -> dict[str, Any]:
    """The agent's reply schema, without the graph tools where no people graph is offered."""
    if graph:
        return template
    schema = copy.deepcopy(template)
    actions = schema["properties"]["action"]["enum"]
    schema["properties"]["action"]["enum"] = [a for a in actions if a not in GRAPH_TOOLS]
    return schema


def _canonical(thought: str, tool: str, content: str) -> str:
    """The assistant turn as clean JSON (thinking text and formatting noise dropped)."""
    return json.dumps({"thought": thought, "action": tool, "content": content}, ensure_ascii=False)
