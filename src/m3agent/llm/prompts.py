"""Prompts as data: ``prompts/<name>.txt`` (named sections) + ``prompts/<name>.json`` reply schemas.

Every prompt of the package (memorize, control, judges, the runtime check) is
loaded here, under ``llm`` so that memorize and control both may import it.
A template file is split into sections by lines ``[name]``; fields are
``$name`` (``string.Template``), so JSON examples need no escaping; a field
left unfilled is an error, never a literal ``$name`` in the prompt.

Typed replies: :class:`Reply` here is their base, read by attribute; the models themselves live beside their
callers (:mod:`m3agent.control.replies`, :mod:`m3agent.memorize.consolidation.exchange`). Each mirrors its
prompt's reply schema (``prompts/<name>.json``, which backends turn into a grammar or structured output; tests keep
the two in step). The backend has already checked the JSON against that schema; :meth:`Reply.read` turns it into a
frozen value and is where a reply that is absent or does not fit becomes a
:class:`~m3agent.errors.MalformedReplyError`.
"""

from __future__ import annotations

import functools
import json
import re
import string
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from m3agent.errors import MalformedReplyError, ModelError, PromptError

if TYPE_CHECKING:
    from m3agent.llm import ChatReply

_SECTION_RE = re.compile(r"^\[([a-z_]+)\]\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class PromptSet:
    """The sections of one template file and its reply schema."""

    name: str
    sections: dict[str, str]
    schema: dict[str, Any]

    def render(self, section: str, **fields: object) -> str:
        """Section ``section`` with its ``$fields`` filled.

        Every field the section names must be given and nothing else: a template
        and its caller that disagree raise :class:`PromptError` instead of sending
        the model a literal ``$field``.
        """
        template = string.Template(self._text(section))
        needed = set(template.get_identifiers())
        missing, unused = sorted(needed - fields.keys()), sorted(fields.keys() - needed)
        if missing or unused or not template.is_valid():
            raise PromptError(f"prompt {self.name!r} [{section}]: {_mismatch(missing, unused)}")
        return template.substitute({k: str(v) for k, v in fields.items()}).strip()

    def _text(self, section: str) -> str:
        if section not in self.sections:
            raise PromptError(f"prompt {self.name!r} has no [{section}] section")
        return self.sections[section]


def _mismatch(missing: list[str], unused: list[str]) -> str:
    parts = [f"missing field(s) {', '.join(missing)}"] if missing else []
    parts += [f"field(s) the section does not use: {', '.join(unused)}"] if unused else []
    return "; ".join(parts) or "a '$' that starts no field (write '$$' for a dollar sign)"


@functools.cache
def load_prompt_set(name: str) -> PromptSet:
    """Read ``prompts/<name>.txt`` and ``prompts/<name>.json`` from the installed package."""
    folder = resources.files("m3agent") / "prompts"
    try:
        text = (folder / f"{name}.txt").read_text(encoding="utf-8")
        schema = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"prompt {name!r} is missing or broken: {exc}", hint="reinstall m3agent") from exc
    return PromptSet(name, _sections(text), schema)


def _sections(text: str) -> dict[str, str]:
    parts = _SECTION_RE.split(text)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


# typed replies -------------------------------------------------------------------------------------------------

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
