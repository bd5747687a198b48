"""Text embedders behind one protocol, chosen by name or URL."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from m3agent.registry import Registry, parse_spec

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed dimension.

    ``name`` identifies the model (recorded in the store with ``dim``) so a
    change of model is detected and triggers re-embedding.
    """

    name: str
    dim: int

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Return an array of shape ``(len(texts), dim)``, rows of unit length."""
        ...


EMBEDDERS: Registry[Embedder] = Registry("text embedder")
EMBEDDERS.register("minilm", "m3agent.embed.minilm:create", "all-MiniLM-L6-v2 int8 ONNX, 384-d (default)")
EMBEDDERS.register("mpnet", "m3agent.embed.mpnet:create", "all-mpnet-base-v2 on torch, 768-d (stronger, ~5x slower)")
EMBEDDERS.register("hash", "m3agent.embed.hashing:create", "feature-hashing bag of words, no model (fast tests)")
EMBEDDERS.register("openai", "m3agent.embed.remote:create", "OpenAI-compatible /embeddings over http")
EMBEDDERS.register("http", "m3agent.embed.remote:create", "OpenAI-compatible /embeddings over http")
EMBEDDERS.register("https", "m3agent.embed.remote:create", "OpenAI-compatible /embeddings over https")


def create_embedder(spec: str, **kwargs: object) -> Embedder:
    return EMBEDDERS.create(spec, **kwargs)


def prewarm(spec: str) -> threading.Thread | None:
    """Start loading the packaged embedder ``spec`` names (``minilm``) in a thread of its own, so that a short-lived
    process (``m3agent ask``) overlaps its 0.2 s load with its imports and the opening of the memory; the embedder
    built later takes the loaded model. Any other spec is left alone (None); an error is left to that later build.
    The caller joins the thread before it exits: a process ending while the thread is inside ONNX Runtime's
    native code aborts."""
    if spec != "minilm":
        return None

    def load() -> None:
        from m3agent.embed import minilm

        with contextlib.suppress(Exception):  # reported when the embedder is built for use
            minilm.create(parse_spec(spec))

    thread = threading.Thread(target=load, name="embedder-prewarm", daemon=True)
    thread.start()
    return thread


def spec_for_model(name: str) -> str | None:
    """The embedder spec that produces vectors recorded under model ``name`` (local models only)."""
    from m3agent.embed import minilm, mpnet

    if name == minilm.MODEL_NAME:
        return "minilm"
    if name == mpnet.MODEL_NAME:
        return "mpnet"
    if name.startswith("hash-"):
        return f"hash:{name.removeprefix('hash-')}"
    return None


def embedder_for_store(recorded: tuple[str, int] | None, spec: str, **kwargs: object) -> Embedder:
    """An embedder whose vectors are comparable with those already in a store.

    A store remembers the model that embedded its memories; queries must use
    the same one. A local model is rebuilt from its recorded name; for a
    remote model the configured ``spec`` must produce the same name.
    """
    from m3agent.errors import ConfigError

    if recorded is None:
        return create_embedder(spec, **kwargs)
    name, dim = recorded
    local = spec_for_model(name)
    embedder = create_embedder(local or spec, **kwargs)
    if local is None and embedder.name != name:
        raise ConfigError(
            f"this memory was embedded with {name!r} ({dim}-d) but the configured embedder is {embedder.name!r}",
            hint="use the same --embedder / M3AGENT_EMBEDDER as when the memory was written",
        )
    return embedder
