"""The knobs of one run: a resolved, frozen copy of :class:`~m3agent.settings.ControlSettings`.

The settings own every default and every bound; this type has neither of
its own, so a library caller and the CLI cannot drift apart. It differs from
the settings in two ways only: the mode is concrete (``auto`` resolved against
the LLM spec) and it is frozen for the run. Overrides are validated by the
settings' own rules (``rounds=0`` is a :class:`~m3agent.errors.ConfigError`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from m3agent.control.modes import AUTO, Mode, resolve_mode
from m3agent.errors import ConfigError
from m3agent.settings import ControlSettings


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """One field per :class:`ControlSettings` field, same name and meaning (see its descriptions)."""

    mode: Mode
    rounds: int
    search_k: int
    clip_k: int
    seed_search: bool
    select_k: int
    select_span: bool
    max_context_tokens: int
    max_tokens: int
    temperature: float
    evidence_limit: int
    min_similarity: float
    graph: bool

    @classmethod
    def from_settings(
        cls, control: ControlSettings | None = None, llm_spec: str | None = None, **overrides: Any
    ) -> AgentConfig:
        """``control`` (default: the settings' defaults) with ``overrides`` (``None`` values ignored).

        The mode (override, else ``control.mode``) ``auto`` follows ``llm_spec``: select for a
        local llama.cpp model or ``none``, agent otherwise (:func:`.modes.default_mode`).
        """
        checked = _validated(control or ControlSettings(), overrides)
        return cls(mode=resolve_mode(checked.mode, llm_spec), **checked.model_dump(exclude={"mode"}))

    def replace(self, **overrides: Any) -> AgentConfig:
        """This config with ``overrides`` validated; a ``mode`` of ``None`` or ``auto`` keeps the mode."""
        if overrides.get("mode") == AUTO:
            overrides["mode"] = None
        return AgentConfig.from_settings(ControlSettings.model_validate(asdict(self)), None, **overrides)


def _validated(control: ControlSettings, overrides: dict[str, Any]) -> ControlSettings:
    update = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(update) - set(ControlSettings.model_fields))
    if unknown:
        raise ConfigError(f"unknown control setting(s): {', '.join(unknown)}",
                          hint=f"use: {', '.join(ControlSettings.model_fields)}")  # fmt: skip
    if not update:
        return control
    try:
        return ControlSettings.model_validate({**control.model_dump(), **update})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid control settings: {problems}") from None
