"""The message list of one agent run, kept within a token budget.

When the estimated prompt exceeds the budget, the oldest observations are
squeezed first (level 1: only matched or cited memories; level 2: a stub
listing ids). Memories that leave the conversation are *released* back to
the searcher, so a later search may return them again instead of treating
them as already seen.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from m3agent.control.results import Hit, SearchResult
from m3agent.control.retrieval.render import FULL, STUB, dropped_at, render_result
from m3agent.control.steps import Observation

CHARS_PER_TOKEN = 4
"""Rough estimate for English text; exact counts come back in usage, this only guards the budget."""
MESSAGE_OVERHEAD_TOKENS = 4
MAX_BAD_REPLY_CHARS = 400

Release = Callable[[SearchResult, list[Hit], bool], None]


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) // CHARS_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS for m in messages)


@dataclass
class _Turn:
    reply: str
    observation: Observation
    level: int = FULL


class Conversation:
    """System prompt, opening message, and (reply, observation) turns."""

    def __init__(self, system: str, start: str, *, budget_tokens: int, with_video: bool = False) -> None:
        self.system = system
        self.start = start
        self.budget_tokens = budget_tokens
        self.with_video = with_video
        self.turns: list[_Turn] = []
        self.opening: _Turn | None = None

    def open_with(self, observation: Observation) -> None:
        """Start from a retrieval made before the first round instead of the empty ``start`` text."""
        self.opening = _Turn("", observation)

    def add(self, reply: str, observation: Observation) -> None:
        if observation.error is not None and len(reply) > MAX_BAD_REPLY_CHARS:
            reply = reply[:MAX_BAD_REPLY_CHARS] + " …"
        self.turns.append(_Turn(reply, observation))

    def messages(self, instruction: str, cited: Collection[int] = ()) -> list[dict[str, str]]:
        """The chat messages, the instruction appended to the last user message."""
        first = self._observation_text(self.opening, cited) if self.opening else self.start
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": first}]
        for turn in self.turns:
            messages.append({"role": "assistant", "content": turn.reply})
            messages.append({"role": "user", "content": self._observation_text(turn, cited)})
        messages[-1] = {"role": "user", "content": messages[-1]["content"] + "\n\n" + instruction}
        return messages

    def fit(self, instruction: str, cited: Collection[int], release: Release) -> list[dict[str, str]]:
        """``messages`` squeezed oldest-first until the estimate fits the budget (or nothing is left)."""
        messages = self.messages(instruction, cited)
        while estimate_tokens(messages) > self.budget_tokens:
            turns = [self.opening, *self.turns] if self.opening else self.turns
            turn = next((t for t in turns if t.level < STUB and t.observation.result is not None), None)
            if turn is None or turn.observation.result is None:
                break
            turn.level += 1
            result = turn.observation.result
            release(result, dropped_at(result, turn.level, cited), turn.level >= STUB)
            messages = self.messages(instruction, cited)
        return messages

    def _observation_text(self, turn: _Turn, cited: Collection[int]) -> str:
        result = turn.observation.result
        if result is None or result.empty:
            return turn.observation.text
        return render_result(result, level=turn.level, cited=cited, with_video=self.with_video)
