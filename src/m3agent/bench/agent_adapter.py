"""Benchmarks answer with the same control agent as ``m3agent ask``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from m3agent.bench.m3.data import Answerer, M3Question
    from m3agent.control.steps import Answer
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore


def chat_spec(settings: Settings) -> str | None:
    """The LLM spec that picks the agent mode when a benchmark hands the agent a chat model.

    A benchmark always passes a model; when the settings name none, or only the
    default one (not chosen for this run), that model came from elsewhere (a test,
    a caller), so the mode follows the model: agent. Set ``llm`` explicitly (or
    ``--mode``) to benchmark another mode.
    """
    from m3agent.settings import Settings

    default = Settings.model_fields["llm"].default
    return None if (settings.llm or "none") in ("none", default) else settings.llm


def control_answerer(settings: Settings, llm: ChatModel, embedder: Embedder | None = None) -> Answerer:
    """An answerer running the control agent on the question's video, truncated at ``before_clip``."""
    from m3agent.control import AgentConfig, ask
    from m3agent.embed import create_embedder

    text_embedder = embedder or create_embedder(settings.embedder)
    config = AgentConfig.from_settings(settings.control, chat_spec(settings))

    def answer(store: MemoryStore, question: M3Question) -> Answer:
        check_embedder(store, text_embedder)
        return ask(
            store,
            text_embedder,
            llm,
            question.question,
            video_id=question.video_id,
            before_clip=question.before_clip,
            config=config,
        )

    return answer


def check_embedder(store: MemoryStore, embedder: Embedder) -> None:
    """Refuse to search a memory embedded by another model (the vectors would not be comparable)."""
    from m3agent.errors import BenchmarkError

    recorded = store.embedding_model()
    if recorded is not None and recorded != (embedder.name, embedder.dim):
        raise BenchmarkError(
            f"the memory {store.url} was embedded with {recorded[0]} ({recorded[1]}-d), not {embedder.name}",
            hint=f"run with --embedder matching {recorded[0]}, or re-embed the memory",
        )
