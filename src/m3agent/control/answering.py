"""The public entry points of control: answer a question from a memory store.

- :func:`answer` / :func:`answer_steps`: from :class:`~m3agent.settings.Settings`,
  exactly as ``m3agent ask`` does (the CLI calls :func:`answer_steps`): the
  config, the chat model and the embedder all come from the settings.
- :func:`answer_question` / :func:`ask`: with explicit models and an
  :class:`~m3agent.control.config.AgentConfig` (tests, benchmarks).

Every mode is a function of a :class:`~m3agent.control.run_context.RunContext`
listed once in :data:`MODE_STEPS`; all yield Thought/Action/Observation
steps and end with one :class:`~m3agent.control.steps.Answer`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from m3agent.control.config import AgentConfig
from m3agent.control.modes import Mode
from m3agent.control.modes.agent import agent_steps
from m3agent.control.modes.baseline import baseline_steps
from m3agent.control.modes.grounded import grounded_steps
from m3agent.control.modes.select import select_steps
from m3agent.control.run_context import DEFAULT_FRAME_SIDE, RunContext
from m3agent.control.steps import Answer, Step
from m3agent.errors import ConfigError, M3AgentError
from m3agent.llm.spec import NO_LLM, uses_llm

if TYPE_CHECKING:
    from m3agent.control.people.characters import CharacterIndex
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore

MODE_STEPS: Mapping[Mode, Callable[[RunContext], Iterator[Step]]] = {
    "agent": agent_steps,
    "baseline": baseline_steps,
    "grounded": grounded_steps,
    "select": select_steps,
}
"""The one dispatch table: mode -> the steps of a run in that mode."""


def config_for(settings: Settings, **overrides: Any) -> AgentConfig:
    """The run config ``settings`` give (``auto`` mode resolved against ``settings.llm``), with ``overrides``."""
    return AgentConfig.from_settings(settings.control, settings.llm or NO_LLM, **overrides)


def answer_steps(
    question: str,
    store: MemoryStore,
    settings: Settings,
    *,
    video_id: str | None = None,
    before_clip: int | None = None,
    chat: ChatModel | None = None,
    embedder: Embedder | None = None,
    index: CharacterIndex | None = None,
    **overrides: Any,
) -> Iterator[Step]:
    """The steps of answering ``question`` as ``m3agent ask`` does with ``settings``.

    ``overrides`` are control settings for this question (``mode``, ``rounds``, ...;
    ``None`` values ignored). ``chat`` and ``embedder`` default to the ones the
    settings name (``settings.llm``, and the embedder the store was built with); ``index`` is a
    prebuilt character index of the same scope (built from the store when ``None``).
    Builds the models before the first step is taken, so setting errors surface here.
    """
    from m3agent.embed import embedder_for_store
    from m3agent.llm import chat_model_from_settings

    config = config_for(settings, **overrides)
    if chat is None and uses_llm(settings.llm):
        chat = chat_model_from_settings(settings)
    embedder = embedder or embedder_for_store(store.embedding_model(), settings.embedder)
    return answer_question(store, embedder, chat, question, video_id=video_id, before_clip=before_clip, config=config,
                           index=index, max_frame_side=settings.media.max_frame_side)


def answer(question: str, store: MemoryStore, settings: Settings, **options: Any) -> Answer:
    """``run_to_answer(answer_steps(...))``: the final Answer, with its evidence."""
    return run_to_answer(answer_steps(question, store, settings, **options))


def answer_question(
    store: MemoryStore,
    embedder: Embedder,
    chat: ChatModel | None,
    question: str,
    *,
    video_id: str | None = None,
    before_clip: int | None = None,
    rounds: int | None = None,
    baseline: bool = False,
    mode: str | None = None,
    config: AgentConfig | None = None,
    index: CharacterIndex | None = None,
    max_frame_side: int = DEFAULT_FRAME_SIDE,
) -> Iterator[Step]:
    """Answer ``question`` from ``store``; yields Thought/Action/Observation steps, then one Answer.

    ``config`` defaults to the settings' defaults (:meth:`AgentConfig.from_settings`).
    ``before_clip`` (inclusive) hides every memory of a later clip. The mode is
    ``mode`` if given (``auto``: keep ``config.mode``), else ``config.mode``; ``baseline``
    is a shortcut for ``mode="baseline"``. ``chat`` may be None only in select mode.
    ``max_frame_side`` is the ``media.max_frame_side`` setting (:class:`RunContext`).
    """
    base = config or AgentConfig.from_settings()
    config = base.replace(rounds=rounds, mode="baseline" if baseline else mode)
    if not question.strip():
        raise ConfigError("the question is empty", hint="ask a question in words")
    if chat is None and config.mode != "select":
        raise ConfigError(f"the {config.mode} mode needs a chat model", hint="pass --llm, or use --mode select")
    run = RunContext(store, embedder, chat, question.strip(), video_id, before_clip, config, index, max_frame_side)
    return MODE_STEPS[config.mode](run)


def run_to_answer(steps: Iterable[Step]) -> Answer:
    """Drain a step stream and return its final :class:`Answer`."""
    answer = None
    for step in steps:
        if isinstance(step, Answer):
            answer = step
    if answer is None:
        raise M3AgentError("the agent stopped without an answer", hint="report this as a bug")
    return answer


def ask(store: MemoryStore, embedder: Embedder, chat: ChatModel | None, question: str, **options: Any) -> Answer:
    """``run_to_answer(answer_question(...))``."""
    return run_to_answer(answer_question(store, embedder, chat, question, **options))
