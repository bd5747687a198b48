"""The text embedder of a memory: recorded once, checked on every write, changed only by re-embedding.

A store records the model name and dimension of its memory vectors. Writing
with another embedder would mix incomparable vectors, so it is refused with
a :class:`~m3agent.errors.ConfigError` that says how to re-embed;
:func:`reembed` replaces every vector and the recorded model in one
transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from m3agent.errors import ConfigError, IntegrityError

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.store.protocol import MemoryStore


def _mismatch(recorded: tuple[str, int], embedder: Embedder) -> ConfigError:
    name, dim = recorded
    return ConfigError(
        f"this memory is embedded with {name!r} ({dim}-d) but the configured embedder is "
        f"{embedder.name!r} ({embedder.dim}-d)",
        hint=f"re-embed it once with the new embedder (m3agent.memorize.embedding.reembed; CLI: m3agent reembed), "
             f"or keep the old one (--embedder / M3AGENT_EMBEDDER matching {name!r})",
    )


def ensure_embedding_model(store: MemoryStore, embedder: Embedder) -> None:
    """Record ``embedder`` in a store without memories; refuse one whose memories use another model.

    Call before opening the first clip transaction of an ingest.
    """
    recorded = store.embedding_model()
    if recorded == (embedder.name, embedder.dim):
        return
    try:
        store.set_embedding_model(embedder.name, embedder.dim)
    except IntegrityError:
        assert recorded is not None
        raise _mismatch(recorded, embedder) from None


def check_embedding_model(store: MemoryStore, embedder: Embedder) -> None:
    """Refuse to write vectors of ``embedder`` into a store recorded with another (or no) model."""
    recorded = store.embedding_model()
    if recorded is None:
        raise ConfigError("the memory has no embedding model recorded",
                          hint="call ensure_embedding_model(store, embedder) before writing clips")
    if recorded != (embedder.name, embedder.dim):
        raise _mismatch(recorded, embedder)


def reembed(store: MemoryStore, embedder: Embedder, *, batch: int = 256,
            progress: Callable[[int, int], None] | None = None) -> int:
    """Re-embed every memory with ``embedder`` and record it as the store's model (all or nothing).

    Returns the number of memories re-embedded; ``progress(done, total)`` follows the batches.
    """
    return store.reembed_memories(embedder.name, embedder.dim, embedder.embed, batch=batch, progress=progress)
