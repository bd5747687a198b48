"""An ``llm`` setting read as the chat-model registry reads it, and the one "does it use a model" rule.

Memorize (which consolidation model, if any), control (which mode) and the
entry points (build a chat model or not) all decide from this, so a spec such
as ``none`` or ``""`` means "no model" everywhere; it lives under ``llm`` so
that memorize and control may both import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from m3agent.registry import parse_spec

LOCAL_BACKENDS = ("llamacpp", "openvino", "local")
"""Registry names of the backends that run a model on this machine (control answers in grounded mode)."""
NO_LLM = "none"
"""The LLM spec meaning "no model": ``--llm none`` answers in select mode by reranking alone."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """An ``llm`` spec read as the chat-model registry reads it (:func:`m3agent.registry.parse_spec`), so
    callers follow the backend that will really be built: ``backend`` is the registry name (``llamacpp``,
    ``openvino``, ``openai``, ``http``, ``scripted``; ``none`` or ``""`` for no model), ``model`` what follows it."""

    backend: str
    model: str

    @classmethod
    def parse(cls, llm_spec: str) -> ModelSpec:
        """``llm_spec`` split by :func:`~m3agent.registry.parse_spec` (never raises: unknown backends are agents)."""
        parsed = parse_spec(llm_spec)
        return cls(parsed.scheme, parsed.target)

    @property
    def uses_llm(self) -> bool:
        """False for ``""`` and ``none``: run without a chat model."""
        return self.backend not in ("", NO_LLM) or bool(self.model)

    @property
    def local(self) -> bool:
        """A model run on this machine (a packaged name or a .gguf file) by llama.cpp or OpenVINO GenAI (``local:``
        chooses between them)."""
        return self.backend in LOCAL_BACKENDS


def uses_llm(llm_spec: str | None) -> bool:
    """False for no spec, ``""`` or ``"none"``: run without a chat model."""
    return llm_spec is not None and ModelSpec.parse(llm_spec).uses_llm
