"""Typed replies of the control and judge prompts, read by attribute.

Each model mirrors its prompt's reply schema (``prompts/<name>.json``, which
backends turn into a grammar or structured output; tests keep the two in
step). The backend has already checked the JSON against that schema;
:meth:`Reply.read` turns it into a frozen value and is where a reply that is
absent or does not fit becomes a :class:`~m3agent.errors.MalformedReplyError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from m3agent.errors import MalformedReplyError

if TYPE_CHECKING:
    from m3agent.llm import ChatReply

Stripped = Annotated[str, AfterValidator(str.strip)]
"""Checked as sent (``minLength`` counts the raw text), then stripped, as the loop always did."""
Content = Annotated[str, Field(min_length=1), AfterValidator(str.strip)]


class Reply(BaseModel):
    """Base of prompt replies: frozen, no fields beyond the schema's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def read(cls, reply: ChatReply) -> Self:
        """The reply as this model; :class:`MalformedReplyError` (message: what was wrong) when unusable."""
        if reply.parsed is None:
            raise MalformedReplyError(reply.error or "no reply")
        try:
            return cls.model_validate(reply.parsed)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise MalformedReplyError(f"the reply does not fit {cls.__name__}: {problems}") from None


class AgentReply(Reply):
    """``control_agent``: a thought and the next action (a search with its query, or the answer)."""

    thought: Stripped
    action: Literal["search_clip", "search_memory", "answer"]
    content: Content


class AnswerReply(Reply):
    """``control_answer``: the last round and the baseline, where the only action is ``answer``."""

    thought: Stripped
    action: Literal["answer"]
    content: Content


NO_CHOICE = "none"


class SelectReply(Reply):
    """``control_select``: the number of the memory that answers (``"none"``: none does), and the few words."""

    choice: str = Field(pattern=r"^(none|[1-9][0-9]*)$")
    answer: str = Field(max_length=80)

    @property
    def number(self) -> int | None:
        """The chosen candidate, 1-based; ``None`` when the model said no memory answers."""
        return None if self.choice == NO_CHOICE else int(self.choice)


class GroundedReply(Reply):
    """``control_grounded``: the ids of the shown memories the answer uses, then the short answer."""

    used: tuple[str, ...] = Field(max_length=8)
    answer: Content


class VerdictReply(Reply):
    """``judge_m3`` and ``judge_locomo``: whether the candidate answer is right."""

    verdict: Literal["yes", "no"]

    @property
    def correct(self) -> bool:
        return self.verdict == "yes"
