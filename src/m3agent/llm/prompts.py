"""Prompts as data: ``prompts/<name>.txt`` (named sections) + ``prompts/<name>.json`` reply schemas.

Every prompt of the package (memorize, control, judges, the runtime check) is
loaded here, under ``llm`` so that memorize and control both may import it.
A template file is split into sections by lines ``[name]``; fields are
``$name`` (``string.Template``), so JSON examples need no escaping; a field
left unfilled is an error, never a literal ``$name`` in the prompt. Typed
replies: :mod:`m3agent.llm.replies` (the base) and :mod:`m3agent.control.replies`.
"""

from __future__ import annotations

import functools
import json
import re
import string
from dataclasses import dataclass
from importlib import resources
from typing import Any

from m3agent.errors import ModelError, PromptError

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
