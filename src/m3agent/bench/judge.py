"""The LLM judge of the published M3-Bench protocol (reference doc §6), with a strict verdict format.

The judge reads the question, the ground truth and the agent's answer and
decides whether the ground truth follows from the answer. Its reply must be
``{"verdict": "yes" | "no"}`` (JSON schema in ``prompts/judge_*.json``);
a reply that does not match after the retries is a *judge failure*, recorded
apart from wrong answers. An empty answer is wrong without asking the judge,
as in the published protocol.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from m3agent.errors import BenchmarkError, M3AgentError, MalformedReplyError

if TYPE_CHECKING:
    from m3agent.llm import ChatModel, Usage
    from m3agent.llm.prompts import PromptSet

JUDGE_MAX_TOKENS = 32
JUDGE_TEMPERATURE = 0.0


@dataclass(frozen=True, slots=True)
class Prompt:
    """A judge prompt (``[system]``/``[user]`` sections, ``$name`` fields), its reply schema and its sha256."""

    name: str
    prompts: PromptSet
    sha256: str

    @property
    def schema(self) -> dict[str, Any]:
        return self.prompts.schema

    def messages(self, **fields: str) -> list[dict[str, str]]:
        """The chat; every field of the ``[user]`` section must be given (else :class:`PromptError`)."""
        return [
            {"role": "system", "content": self.prompts.render("system")},
            {"role": "user", "content": self.prompts.render("user", **fields)},
        ]


def load_prompt(name: str) -> Prompt:
    """``prompts/<name>.txt`` (``[system]``/``[user]`` sections) and ``.json``, with their sha256."""
    from m3agent.llm.prompts import load_prompt_set

    try:
        prompts = load_prompt_set(name)
    except M3AgentError as exc:
        raise BenchmarkError(f"judge prompt {name!r} is unusable: {exc.message}", hint=exc.hint) from None
    if not {"system", "user"} <= set(prompts.sections):
        raise BenchmarkError(f"judge prompt {name!r} needs a [system] and a [user] section")
    folder = resources.files("m3agent") / "prompts"
    raw = (folder / f"{name}.txt").read_bytes() + b"\n" + (folder / f"{name}.json").read_bytes()
    return Prompt(name, prompts, hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True, slots=True)
class Verdict:
    """``correct`` is ``None`` when the judge failed (``error`` says why)."""

    correct: bool | None
    verdict: str | None = None
    error: str | None = None
    raw: str = ""
    attempts: int = 0
    latency_s: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.correct is None


class Judge:
    """Judges answers with ``model`` under one prompt; thread-safe if the model is."""

    def __init__(self, model: ChatModel, prompt: str = "judge_m3", retries: int = 2) -> None:
        self.model = model
        self.prompt = load_prompt(prompt)
        self.retries = retries

    def info(self) -> dict[str, Any]:
        """What a report must record about the judge."""
        return {
            "model": self.model.name,
            "prompt": self.prompt.name,
            "prompt_sha256": self.prompt.sha256,
            "temperature": JUDGE_TEMPERATURE,
            "max_tokens": JUDGE_MAX_TOKENS,
            "retries": self.retries,
            "verdict_schema": self.prompt.schema,
        }

    def judge(self, question: str, ground_truth: str, answer: str) -> Verdict:
        from m3agent.control.replies import VerdictReply

        if not answer.strip():
            return Verdict(False, None, None, "", 0)
        messages = self.prompt.messages(question=question, ground_truth=ground_truth, answer=answer)
        started = time.perf_counter()
        error, raw, spent = "", "", _no_usage()
        for attempt in range(1, self.retries + 2):
            try:
                reply = self.model.chat(
                    messages,
                    schema=self.prompt.schema,
                    max_tokens=JUDGE_MAX_TOKENS,
                    temperature=JUDGE_TEMPERATURE,
                )
            except M3AgentError as exc:
                error = f"{type(exc).__name__}: {exc.message}"
                continue
            spent, raw = spent + reply.usage, reply.text
            try:
                parsed = VerdictReply.read(reply)
            except MalformedReplyError as exc:
                error = exc.message
                continue
            return Verdict(parsed.correct, parsed.verdict, None, raw, attempt, _since(started), spent.to_dict())
        return Verdict(None, None, error, raw, self.retries + 1, _since(started), spent.to_dict())


def _no_usage() -> Usage:
    from m3agent.llm import Usage

    return Usage()


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)
