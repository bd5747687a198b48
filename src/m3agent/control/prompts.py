"""Control prompts as data: ``prompts/control_*.txt`` (named sections) + ``.json`` reply schemas.

A template file is split into sections by lines ``[name]``; fields are
``$name`` (``string.Template``), so JSON examples need no escaping.
"""

from __future__ import annotations

import functools
import json
import re
import string
from dataclasses import dataclass
from importlib import resources
from typing import Any

from m3agent.errors import ModelError

_SECTION_RE = re.compile(r"^\[([a-z_]+)\]\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class PromptSet:
    """The sections of one template file and its reply schema."""

    name: str
    sections: dict[str, str]
    schema: dict[str, Any]

    def render(self, section: str, **fields: object) -> str:
        """Section ``section`` with ``$fields`` filled (unknown ``$names`` are left as written)."""
        if section not in self.sections:
            raise ModelError(f"prompt {self.name!r} has no [{section}] section", hint="reinstall m3agent")
        values = {k: str(v) for k, v in fields.items()}
        return string.Template(self.sections[section]).safe_substitute(values).strip()


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
