"""The base of typed prompt replies, read by attribute; the models themselves live beside their callers.

Each reply model mirrors its prompt's reply schema (``prompts/<name>.json``,
which backends turn into a grammar or structured output; tests keep the two
in step). The backend has already checked the JSON against that schema;
:meth:`Reply.read` turns it into a frozen value and is where a reply that is
absent or does not fit becomes a :class:`~m3agent.errors.MalformedReplyError`.
It lives under ``llm`` so that memorize (:mod:`m3agent.memorize.consolidation.exchange`)
and control (:mod:`m3agent.control.replies`) share it without importing each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Self

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
