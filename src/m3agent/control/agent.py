"""The control loop: a multi-turn agent that searches memory and answers with evidence.

:func:`answer_question` runs one of three modes (:mod:`m3agent.control.modes`):
this loop (``agent``), :mod:`~m3agent.control.baseline` or
:mod:`~m3agent.control.select`; all yield the same steps and Answer.

Each round the model returns ``{"thought", "action", "content"}`` validated
against ``prompts/control_agent.json``; ``search_clip``/``search_memory``
run the :class:`~m3agent.control.search.MemorySearcher` tool and the result
becomes the next observation; ``answer`` ends the run. The last round uses
``prompts/control_answer.json``, whose only action is ``answer`` (so
structured-output backends cannot do anything else). A reply that does not
match the schema becomes an observation telling the model what was wrong;
it costs its round but never runs a silent empty search.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.control.conversation import Conversation
from m3agent.control.evidence import cited_clips, cited_memory_ids, rank_evidence
from m3agent.control.modes import AUTO, Mode, resolve_mode
from m3agent.control.prompts import PromptSet, load_prompt_set
from m3agent.control.render import render_result
from m3agent.control.results import Hit, SearchResult
from m3agent.control.search import MemorySearcher
from m3agent.control.steps import Action, Answer, Observation, Step, Thought
from m3agent.errors import ConfigError, M3AgentError
from m3agent.llm import ChatModel, ChatReply, Usage
from m3agent.llm.schema import strip_thinking
from m3agent.text import clock

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.settings import ControlSettings
    from m3agent.store.protocol import MemoryStore

AGENT_PROMPT = "control_agent"
ANSWER_PROMPT = "control_answer"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Knobs of one run. ``clip_k`` clips per ``search_clip``, ``memory_k`` memories per ``search_memory``;
    ``select_k`` candidates shown to the model in select mode (``select_span``: it may quote a span)."""

    mode: Mode = "agent"
    rounds: int = 5
    clip_k: int = 2
    memory_k: int = 8
    max_context_tokens: int = 6000
    max_tokens: int = 512
    temperature: float = 0.0
    evidence_limit: int = 8
    min_similarity: float = 0.2
    seed_search: bool = True
    """Before round 1, run ``search_memory`` with the question itself (round 0), so the model
    starts from relevant knowledge instead of an empty context (the reference starts empty)."""
    select_k: int = 6
    select_span: bool = False
    """Select mode: answer with the model's quoted span instead of the whole memory (see select.py)."""

    @classmethod
    def from_settings(cls, control: ControlSettings, llm_spec: str | None = None, **overrides: Any) -> AgentConfig:
        """Config from settings. The mode (override, else ``control.mode``) ``auto`` follows ``llm_spec``:
        select for a local llama.cpp model or ``none``, agent otherwise (:func:`.modes.default_mode`)."""
        base = cls(
            mode=resolve_mode(overrides.pop("mode", None) or control.mode, llm_spec),
            rounds=control.rounds,
            memory_k=control.search_k,
            max_context_tokens=control.max_context_tokens,
            temperature=control.temperature,
        )
        return _replace(base, **overrides)


def _replace(config: AgentConfig, **overrides: Any) -> AgentConfig:
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})


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
) -> Iterator[Step]:
    """Answer ``question`` from ``store``; yields Thought/Action/Observation steps, then one Answer.

    ``before_clip`` (inclusive) hides every memory of a later clip. The mode is
    ``mode`` if given, else ``config.mode``; ``baseline`` is a shortcut for
    ``mode="baseline"``. ``chat`` may be None only in select mode (the reranker chooses).
    """
    chosen = "baseline" if baseline else None if mode in (None, AUTO) else resolve_mode(mode)
    config = _replace(config or AgentConfig(), rounds=rounds, mode=chosen)
    if not question.strip():
        raise ConfigError("the question is empty", hint="ask a question in words")
    if config.rounds < 1:
        raise ConfigError(f"rounds must be at least 1, got {config.rounds}")
    if chat is None and config.mode != "select":
        raise ConfigError(f"the {config.mode} mode needs a chat model", hint="pass --llm, or use --mode select")
    run = _Run(store, embedder, chat, question.strip(), video_id, before_clip, config)
    return _steps_for(run)


def _steps_for(run: _Run) -> Iterator[Step]:
    if run.config.mode == "baseline":
        from m3agent.control.baseline import baseline_steps

        return baseline_steps(run)
    if run.config.mode == "select":
        from m3agent.control.select import select_steps

        return select_steps(run)
    return _agent_steps(run)


def run_to_answer(steps: Iterable[Step]) -> Answer:
    """Drain a step stream and return its final :class:`Answer`."""
    answer = None
    for step in steps:
        if isinstance(step, Answer):
            answer = step
    if answer is None:
        raise M3AgentError("the agent stopped without an answer", hint="report this as a bug")
    return answer


def ask(
    store: MemoryStore, embedder: Embedder, chat: ChatModel | None, question: str, **options: Any
) -> Answer:
    """``run_to_answer(answer_question(...))``."""
    return run_to_answer(answer_question(store, embedder, chat, question, **options))


@dataclass
class _Run:
    """State of one question: tools, conversation, spending."""

    store: MemoryStore
    embedder: Embedder
    chat: ChatModel | None
    question: str
    video_id: str | None
    before_clip: int | None
    config: AgentConfig
    searcher: MemorySearcher = field(init=False)
    usage: Usage = field(default_factory=Usage)
    searches: list[SearchResult] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.searcher = MemorySearcher(
            self.store,
            self.embedder,
            video_id=self.video_id,
            before_clip=self.before_clip,
            min_similarity=self.config.min_similarity,
        )

    def time_context(self) -> str:
        if self.before_clip is None:
            return ""
        clip = self.searcher.clip_ref(self.video_id or "", self.before_clip) if self.video_id else None
        when = f" (video time {clock(clip.end_s)})" if clip and clip.end_s >= 0 else ""
        return f"The question is asked after CLIP_{self.before_clip}{when}; later clips do not exist yet."

    def call(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int | None = None) -> ChatReply:
        if self.chat is None:
            raise ConfigError(f"the {self.config.mode} mode needs a chat model", hint="pass --llm")
        reply = self.chat.chat(
            messages, schema=schema, max_tokens=max_tokens or self.config.max_tokens,
            temperature=self.config.temperature,
        )  # fmt: skip
        self.usage = self.usage + reply.usage
        return reply

    def search(self, tool: str, query: str, k: int | None = None) -> SearchResult:
        k = k or (self.config.clip_k if tool == "search_clip" else self.config.memory_k)
        result = self.searcher.search(tool, query, k)
        self.searches.append(result)
        return result

    def release(self, result: SearchResult, hits: list[Hit], whole: bool) -> None:
        """Memories trimmed out of the conversation may be returned again by later searches."""
        self.searcher.shown.difference_update(h.memory.id for h in hits)
        if whole:
            self.searcher.seen_clips.difference_update((c.clip.video_id, c.clip.index) for c in result.clips)

    def cited(self) -> set[int]:
        return cited_memory_ids(self.thoughts)

    def finish(
        self, content: str, rounds: int, mode: str, raw: str = "", failure: str | None = None,
        *, cited: set[int] | None = None, rewrite: bool = True,
    ) -> Answer:
        """The Answer for final ``content`` (``""``: none, ``failure`` says why), with ranked evidence.

        Cited memories are the ids named in thoughts and answer, or exactly ``cited``
        when given; ``rewrite=False`` keeps ``content``'s character tags.
        """
        final_texts = [content, *self.thoughts[-1:]]
        text = names_for_tags(content, self.searcher) if rewrite else content
        evidence, clips = rank_evidence(
            self.searches,
            self.embedder,
            question=self.question,
            answer=text,
            cited_ids=cited_memory_ids([content, *self.thoughts]) if cited is None else cited,
            cited_clip_ids=cited_clips(final_texts) if cited is None else set(),
            limit=self.config.evidence_limit,
        ) if content else ((), ())  # fmt: skip
        return Answer(
            question=self.question, text=text, answered=bool(content), rounds=rounds,
            max_rounds=self.config.rounds, mode=mode, searches=tuple(self.searches), evidence=evidence,
            clips=clips, usage=self.usage, latency_s=time.perf_counter() - self.started,
            model=self.chat.name if self.chat else "rerank", video_id=self.video_id, before_clip=self.before_clip,
            raw_text=raw or content, failure=failure,
        )  # fmt: skip


def names_for_tags(text: str, searcher: MemorySearcher) -> str:
    """Answer text with entity/character tags replaced by known names (tags without one are kept)."""
    index = searcher.index
    text = index.rewrite(text)
    characters = {tag for tag in tags.find_tags(text) if tag.kind == tags.TagKind.CHARACTER}
    names = {tag: name for tag in characters if (name := index.name_of(tag.id))}
    return tags.to_names(text, names)


def _agent_steps(run: _Run) -> Iterator[Step]:
    prompts = load_prompt_set(AGENT_PROMPT)
    system = prompts.render("system", question=run.question, time_context=run.time_context())
    conversation = Conversation(
        system,
        prompts.render("start"),
        budget_tokens=run.config.max_context_tokens - run.config.max_tokens,
        with_video=run.video_id is None,
    )
    if run.config.seed_search:
        yield Action(0, "search_memory", run.question)
        seed = _search_observation(run, prompts.render, 0, "search_memory", run.question)
        yield seed
        conversation.open_with(seed)
    for number in range(1, run.config.rounds + 1):
        answer = yield from _round(run, prompts, conversation, number)
        if answer is not None:
            yield answer
            return


def _round(
    run: _Run, prompts: PromptSet, conversation: Conversation, number: int
) -> Generator[Step, None, Answer | None]:
    """One model turn and its consequence; returns the Answer when the run ends."""
    final = number == run.config.rounds
    instruction = prompts.render("final" if final else "round", round=number, rounds=run.config.rounds)
    messages = conversation.fit(instruction, run.cited(), run.release)
    schema = load_prompt_set(ANSWER_PROMPT).schema if final else prompts.schema
    reply = run.call(messages, schema)
    if reply.parsed is None:
        error = reply.error or "no reply"
        observation = Observation(number, prompts.render("feedback", error=error), error=error)
        yield observation
        conversation.add(strip_thinking(reply.text) or reply.text.strip(), observation)
        failure = f"no usable answer in the last round: {error}"
        return run.finish("", number, "agent", reply.text, failure) if final else None
    thought, tool, content = (str(reply.parsed[key]).strip() for key in ("thought", "action", "content"))
    run.thoughts.append(thought)
    if thought:
        yield Thought(number, thought)
    yield Action(number, tool, content)
    if tool == "answer":
        return run.finish(content, number, "agent")
    observation = _search_observation(run, prompts.render, number, tool, content)
    yield observation
    conversation.add(_canonical(thought, tool, content), observation)
    return None


def _search_observation(
    run: _Run, render: Callable[..., str], number: int, tool: str, query: str
) -> Observation:
    result = run.search(tool, query)
    if result.empty:
        return Observation(number, render("empty", query=query), result)
    return Observation(number, render_result(result, with_video=run.video_id is None), result)


def _canonical(thought: str, tool: str, content: str) -> str:
    """The assistant turn as clean JSON (thinking text and formatting noise dropped)."""
    return json.dumps({"thought": thought, "action": tool, "content": content}, ensure_ascii=False)
