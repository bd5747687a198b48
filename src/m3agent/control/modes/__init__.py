"""The control modes and the one rule that picks the default from the configured LLM.

- ``agent``: the model plans searches over several rounds and writes the answer.
  It needs a model that can reason (an ``openai://`` endpoint serving a real LLM).
- ``baseline``: one retrieval with the question, one answer call.
- ``grounded``: one retrieval; the model writes a short answer and names the
  shown memories it used, under a grammar (:mod:`m3agent.control.modes.grounded`).
  Made for the packaged Qwen2.5 models.
- ``select``: one retrieval; the model only *picks* the retrieved memory that
  answers, under a grammar that allows nothing else; without a model (or when
  it fails) a reranker picks. Made for small local models, which cannot plan
  searches or write answers (the packaged SmolLM2-135M echoes the question).

The spec itself is read by :mod:`m3agent.llm.spec` (shared with memorize).
"""

from __future__ import annotations

from typing import Final

from m3agent.domain import CONTROL_MODE_SETTINGS, CONTROL_MODES, ControlMode
from m3agent.errors import ConfigError
from m3agent.llm.spec import ModelSpec

Mode = ControlMode
"""The mode type, owned by :mod:`m3agent.domain` (settings, CLI and Answer share it)."""
MODES = CONTROL_MODES
MODE_CHOICES = CONTROL_MODE_SETTINGS
"""What settings and ``--mode`` accept: ``auto`` and every mode."""
AUTO: Final = "auto"


SELECT_ONLY_MODELS = ("smollm2",)
"""Local models too weak to write answers (SmolLM2-135M echoes the question): they only select.
``llamacpp:`` with no model name loads SmolLM2 as well."""


def _select_only(spec: ModelSpec) -> bool:
    """A local model too weak to write answers (:data:`SELECT_ONLY_MODELS`, or none named: SmolLM2)."""
    return spec.local and spec.model.lower() in ("", *SELECT_ONLY_MODELS)


def default_mode(llm_spec: str | None) -> Mode:
    """``select`` for no model or SmolLM2, ``grounded`` for another local llama.cpp model,
    ``agent`` for anything else (an endpoint).

    ``None`` means the model is not known here (a caller that did not say):
    the general ``agent`` mode, as before select existed.
    """
    if llm_spec is None:
        return "agent"
    spec = ModelSpec.parse(llm_spec)
    if not spec.uses_llm or _select_only(spec):
        return "select"
    return "grounded" if spec.local else "agent"


def resolve_mode(requested: str | None, llm_spec: str | None = None) -> Mode:
    """``requested`` checked, with ``auto``/``None`` replaced by :func:`default_mode`."""
    if requested is None or requested == AUTO:
        return default_mode(llm_spec)
    for mode in MODES:
        if requested == mode:
            return mode
    raise ConfigError(f"unknown control mode {requested!r}", hint=f"use one of: {', '.join(MODE_CHOICES)}")
