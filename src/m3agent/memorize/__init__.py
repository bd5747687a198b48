"""Memory writers (clip -> memories) and the graph write rules that store them.

A writer implements :class:`MemoryWriter` (one method, ``write``) and is chosen
from :data:`WRITERS` by the ``writer`` setting:

- ``perception``: deterministic memories from faces, voices and transcripts (no LLM);
- ``mllm``: a multimodal model behind any OpenAI-compatible endpoint (``writer_llm``);
- ``local``: the perception memories plus short topic summaries by a local LLM
  (``llamacpp:smollm2`` unless ``writer_llm`` names another).

Per clip the pipeline builds a :class:`ClipInput` (:func:`clip_input`), calls
``writer.write`` and hands the :class:`WriterOutput` to
:func:`m3agent.memorize.rules.apply_write_rules`, all inside the clip's store
transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from m3agent.memorize.inputs import ClipInput, WriterOutput, clip_input
from m3agent.registry import Registry

if TYPE_CHECKING:
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings

__all__ = ["WRITERS", "ClipInput", "MemoryWriter", "WriterOutput", "clip_input", "create_writer"]


@runtime_checkable
class MemoryWriter(Protocol):
    """Turns one clip into memories. Raises an :class:`m3agent.errors.M3AgentError` when it
    cannot (the pipeline then records the clip as failed and retries it on the next run)."""

    def write(self, clip_input: ClipInput) -> WriterOutput: ...


WRITERS: Registry[MemoryWriter] = Registry("memory writer")
WRITERS.register("perception", "m3agent.memorize.writers.perception:create", "faces, voices, transcripts; no LLM")
WRITERS.register("mllm", "m3agent.memorize.writers.mllm:create", "multimodal LLM over an OpenAI-compatible endpoint")
WRITERS.register("local", "m3agent.memorize.writers.local:create", "perception + topic summaries by a local LLM")


def create_writer(settings: Settings, spec: str | None = None, *, chat: ChatModel | None = None,
                  **kwargs: Any) -> MemoryWriter:
    """The writer named by ``spec`` (default ``settings.writer``).

    ``spec`` may carry the endpoint: ``mllm:openai://host/v1?model=M``;
    otherwise ``settings.writer_llm`` is used. ``chat`` overrides both.
    """
    return WRITERS.create(spec or settings.writer, settings=settings, chat=chat, **kwargs)
