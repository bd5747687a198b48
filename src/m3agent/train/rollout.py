"""A rollout: the agent loop played by a policy that is being trained, kept as one token sequence.

The rollout uses the agent mode's own parts: its prompts (``prompts/control_agent.txt``: system, the round-0
seed search, the round / final instructions, the feedback on an unreadable reply, the empty-search text), its
typed replies (:class:`~m3agent.control.replies.AgentReply`, :class:`~m3agent.control.replies.AnswerReply`),
the real :class:`~m3agent.control.run_context.RunContext` search on the real store, observations rendered by
:func:`~m3agent.control.retrieval.render.render_result`, and :meth:`RunContext.finish` for the answer a user sees.

What differs from :mod:`m3agent.control.modes.agent`, and why: the loop re-renders the whole conversation each
round (canonical JSON for the model's earlier replies, older observations squeezed to fit the budget).
Trained tokens must be the tokens the policy sampled, in the context it sampled them in, so here the
conversation only grows: each round's context is the previous context, the sampled reply tokens and the
observation tokens, framed by the runtime model's own chat template (:class:`ChatFrame`). Where the loop
would start squeezing (the context passes ``max_context_tokens``), the next round is the final one and must
answer. ``env_mask`` marks the sampled tokens (1) apart from the template and observation tokens (0), which
are masked out of the loss.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from m3agent.control.people.graph_tools import GRAPH_TOOLS
from m3agent.control.replies import AgentReply, AnswerReply
from m3agent.control.retrieval.render import render_result
from m3agent.control.run_context import RunContext
from m3agent.errors import MalformedReplyError
from m3agent.llm import ChatReply
from m3agent.llm.prompts import PromptSet, load_prompt_set
from m3agent.llm.schema import parse_reply

if TYPE_CHECKING:
    from m3agent.control.config import AgentConfig
    from m3agent.control.steps import Answer
    from m3agent.embed import Embedder
    from m3agent.settings import TrainSettings
    from m3agent.store.protocol import MemoryStore
    from m3agent.train.episodes import Episode
    from m3agent.train.reward import Reward

AGENT_PROMPT = "control_agent"
ANSWER_PROMPT = "control_answer"
_REPLY, _USER = "\x00REPLY\x00", "\x00USER\x00"


class Tokenizer(Protocol):
    """The part of a transformers tokenizer a rollout uses."""

    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


class Policy(Protocol):
    """Samples a continuation of ``ids`` (it ends with the end-of-turn token unless ``max_new_tokens`` cut it);
    with ``schema``, only tokens of a reply matching it, where the policy can constrain its sampling."""

    def generate(self, ids: Sequence[int], max_new_tokens: int, temperature: float,
                 schema: Mapping[str, Any] | None = None) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class ChatFrame:
    """The runtime model's chat template, split into the pieces a growing conversation needs.

    ``prompt`` renders system + first user message with the generation prompt; ``between`` is what follows an
    assistant reply up to the next user text (the reply's end-of-turn marker first), ``after`` what follows the
    user text up to the next assistant reply.
    """

    tokenizer: Tokenizer
    between: str
    after: str
    end_of_turn: str

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> ChatFrame:
        """Read the pieces off the template by rendering a conversation with markers in it."""
        rendered = tokenizer.apply_chat_template(
            [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
             {"role": "assistant", "content": _REPLY}, {"role": "user", "content": _USER}],
            tokenize=False, add_generation_prompt=True,
        )  # fmt: skip
        tail = str(rendered).split(_REPLY, 1)[1]
        between, after = tail.split(_USER, 1)
        end = between.split("\n", 1)[0] if between.startswith("<") else ""
        return cls(tokenizer, between, after, end)

    def prompt(self, system: str, user: str) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            tokenize=True, add_generation_prompt=True,
        )  # fmt: skip
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    def closes(self, sampled: Sequence[int]) -> bool:
        """True when the sampled reply ended with the template's end-of-turn marker (it stopped by itself)."""
        return bool(self.end_of_turn) and self.tokenizer.decode(sampled[-1:]) == self.end_of_turn

    def observation(self, text: str, reply_closed: bool) -> list[int]:
        """The tokens between a reply and the next: the turn end (unless the reply emitted it), the user turn."""
        between = self.between[len(self.end_of_turn):] if reply_closed else self.between
        return self.tokenizer.encode(between + text + self.after, add_special_tokens=False)


@dataclass
class Trajectory:
    """One rollout: ``prompt_ids`` then ``completion_ids`` (sampled and observation tokens, ``env_mask`` 1/0)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    format_errors: int = 0
    rounds: int = 0
    answer: Answer | None = None
    cited_evidence: tuple[str, ...] = ()
    transcript: list[str] = field(default_factory=list)
    reward: Reward | None = None

    def add(self, ids: Sequence[int], sampled: bool) -> None:
        self.completion_ids.extend(ids)
        self.env_mask.extend([int(sampled)] * len(ids))


@dataclass
class Rollout:
    """The environment of one episode: the real store and search, the agent prompts, the frame."""

    store: MemoryStore
    embedder: Embedder
    frame: ChatFrame
    config: AgentConfig
    train: TrainSettings

    def play(self, episode: Episode, policy: Policy) -> Trajectory:
        """Roll ``episode`` out with ``policy`` and score it (:func:`m3agent.train.reward.reward`)."""
        from m3agent.train.reward import reward

        run = RunContext(self.store, self.embedder, None, episode.question, episode.video_id, None, self.config)
        prompts = load_prompt_set(AGENT_PROMPT)
        system = prompts.render("system", question=episode.question, time_context="", graph_tools="")
        observation = self._search(run, prompts, "search_memory", episode.question) if self.config.seed_search \
            else prompts.render("start")
        trajectory = self._rounds(run, prompts, system, observation, policy)
        answer = trajectory.answer
        trajectory.cited_evidence = cited_dia_ids(run, answer)
        trajectory.reward = reward(
            self.train, answer=answer.text if answer and answer.answered else "", gold=episode.answer,
            category=episode.category, cited_evidence=trajectory.cited_evidence,
            gold_evidence=episode.evidence, format_errors=trajectory.format_errors, rounds_used=trajectory.rounds,
        )  # fmt: skip
        return trajectory

    def _rounds(self, run: RunContext, prompts: PromptSet, system: str, observation: str, policy: Policy
                ) -> Trajectory:  # fmt: skip
        rounds = self.train.rounds
        trajectory: Trajectory | None = None
        closed = True
        for number in range(1, rounds + 1):
            final = number == rounds or (trajectory is not None and self._full(trajectory))
            user = observation + "\n\n" + prompts.render("final" if final else "round", round=number, rounds=rounds)
            if trajectory is None:
                trajectory = Trajectory(self.frame.prompt(system, user))
            else:
                trajectory.add(self.frame.observation(user, closed), sampled=False)
            schema = rollout_schema(final, self.train.max_new_tokens) if self.train.rollout_grammar else None
            sampled = policy.generate(trajectory.prompt_ids + trajectory.completion_ids,
                                      self.train.max_new_tokens, self.train.temperature, schema)  # fmt: skip
            trajectory.add(sampled, sampled=True)
            trajectory.rounds = number
            text = self.frame.tokenizer.decode(sampled, skip_special_tokens=True)
            closed = self.frame.closes(sampled)
            trajectory.transcript += [f"[user] {user}", f"[policy] {text}"]
            step, malformed = self._act(run, prompts, number, text, final)
            trajectory.format_errors += malformed
            if not isinstance(step, str):
                trajectory.answer = step
                return trajectory
            observation = step
        assert trajectory is not None  # rounds >= 1
        return trajectory

    def _full(self, trajectory: Trajectory) -> bool:
        """The loop would squeeze older observations now: answer in this round instead."""
        used = len(trajectory.prompt_ids) + len(trajectory.completion_ids)
        return used + self.train.max_new_tokens > self.train.max_context_tokens

    def _act(self, run: RunContext, prompts: PromptSet, number: int, text: str, final: bool
             ) -> tuple[Answer | str, bool]:  # fmt: skip
        """The Answer that ends the run or the next observation, and whether the reply broke the schema."""
        schema = load_prompt_set(ANSWER_PROMPT if final else AGENT_PROMPT).schema
        parsed, error = parse_reply(text, schema)
        try:
            reply = (AnswerReply if final else AgentReply).read(ChatReply(text, parsed, error))
        except MalformedReplyError as exc:
            if final:
                return run.finish("", number, text, f"no usable answer in the last round: {exc.message}"), True
            return prompts.render("feedback", error=exc.message), True
        run.thoughts.append(reply.thought)
        if reply.action == "answer":
            return run.finish(reply.content, number), False
        if reply.action in GRAPH_TOOLS:  # no people graph in a conversation: the schema did not offer it
            return prompts.render("feedback", error=f"{reply.action} is not offered"), True
        return self._search(run, prompts, reply.action, reply.content), False

    @staticmethod
    def _search(run: RunContext, prompts: PromptSet, tool: str, query: str) -> str:
        result = run.search(tool, query)
        if result.empty:
            return prompts.render("empty", query=query)
        return render_result(result, with_video=run.video_id is None)


REPLY_SKELETON_TOKENS = 24
"""About what a reply's JSON costs besides its free strings (``{"thought": "", "action": "search_memory",
"content": ""}``)."""


def rollout_schema(final: bool, max_new_tokens: int) -> dict[str, Any]:
    """The reply schema of a rollout's round, as the agent mode asks it of the model (no people graph in a
    conversation: no graph tools), each free string capped so that a reply of two of them ends within
    ``max_new_tokens`` at two characters a token: a reply the limit cuts is unreadable, a format error."""
    from m3agent.control.modes.agent import agent_schema
    from m3agent.llm.schema import cap_strings

    schema = load_prompt_set(ANSWER_PROMPT).schema if final else agent_schema(load_prompt_set(AGENT_PROMPT).schema,
                                                                              False)
    return cap_strings(schema, max(16, max_new_tokens - REPLY_SKELETON_TOKENS))


def cited_dia_ids(run: RunContext, answer: Answer | None) -> tuple[str, ...]:
    """The LoCoMo dialog turns of the memories the answer cites (``[m12]`` in its thoughts or answer)."""
    from m3agent.bench.locomo.ingest import dia_id_of

    if answer is None:
        return ()
    memories = {h.memory.id: h.memory for s in run.searches for h in s.hits}
    cited = (memories.get(e.memory_id) for e in answer.evidence if e.cited)
    return tuple(sorted({d for m in cited if m is not None and (d := dia_id_of(m)) is not None}))
