"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint.

Spec: ``openai://host:port/v1?model=NAME`` (http) or ``https://host/v1?model=NAME``.
The dimension is detected from the first reply, never assumed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, EndpointError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.registry import BackendSpec

DEFAULT_MAX_REPLY_BYTES = 16 * 2**20  # settings.max_reply_mb


class RemoteEmbedder:
    """Calls ``POST {base_url}/embeddings`` in batches; vectors are L2-normalised.

    Each request ends within ``timeout_s`` and reads at most ``max_reply_bytes``; a reply
    that is not an embeddings envelope of one finite vector per text, all of one size,
    is an :class:`~m3agent.errors.EndpointError`.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"remote:{model}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
        self._max_bytes = max_reply_bytes
        self.dim = 0

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = [row for i in range(0, len(texts), 64) for row in self._request(texts[i : i + 64])]
        matrix = np.asarray(rows, dtype=np.float32)
        self.dim = matrix.shape[1]
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = matrix / np.maximum(norms, 1e-12)
        return unit

    def _request(self, batch: list[str]) -> list[list[float]]:
        import httpx

        from m3agent.llm.bounded_http import BoundedClient

        url = f"{self.base_url}/embeddings"
        client = BoundedClient(timeout_s=self._timeout, max_bytes=self._max_bytes, headers=self._headers)
        try:
            reply = client.request("POST", url, {"model": self.model, "input": batch})
        except httpx.TimeoutException:
            raise EndpointError(f"embedding request to {url} did not complete within {self._timeout:g} s",
                                hint="raise request_timeout_s or check the server") from None
        except httpx.HTTPError as exc:
            raise EndpointError(f"embedding request to {url} failed: {exc}") from None
        finally:
            client.close()
        if reply.status_code >= 400:
            raise EndpointError(f"embedding endpoint {url} answered HTTP {reply.status_code}: {reply.text[:200]!r}")
        try:
            data = reply.json()
        except (ValueError, RecursionError):
            raise EndpointError(f"embedding endpoint {url} returned non-JSON: {reply.text[:200]!r}",
                                hint=_ENVELOPE_HINT) from None
        return _vectors(data, len(batch), url)


_ENVELOPE_HINT = "the URL must be the root of an OpenAI-compatible API serving /embeddings (usually ending in /v1)"


def _vectors(data: Any, count: int, url: str) -> list[list[float]]:
    """``data[*].embedding`` in ``index`` order, checked: one finite vector per text, all of one size."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count or not all(isinstance(i, dict) for i in items):
        raise _malformed(url, f"'data' is not a list of {count} objects")
    indexes = [item.get("index", position) for position, item in enumerate(items)]
    if sorted(i for i in indexes if isinstance(i, int) and not isinstance(i, bool)) != list(range(count)):
        raise _malformed(url, f"the 'index' fields are not 0..{count - 1}")
    rows = [items[indexes.index(i)].get("embedding") for i in range(count)]
    sizes = {len(row) if isinstance(row, list) else -1 for row in rows}
    if len(sizes) != 1 or min(sizes) < 1:
        raise _malformed(url, "the embeddings are not lists of numbers of one size")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for row in rows
               for x in row):
        raise _malformed(url, "an embedding holds a value that is not a finite number")
    return rows


def _malformed(url: str, problem: str) -> EndpointError:
    return EndpointError(f"embedding endpoint {url} sent an unexpected reply: {problem}", hint=_ENVELOPE_HINT)


def create(spec: BackendSpec, *, api_key: str | None = None, timeout_s: float = 60.0,
           max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, **_: Any) -> RemoteEmbedder:
    model = spec.params.get("model")
    if not model:
        raise ConfigError(f"embedder {spec.raw!r} names no model", hint="add ?model=NAME to the URL")
    scheme = "https" if spec.scheme == "https" else "http"
    return RemoteEmbedder(f"{scheme}://{spec.target}", model, api_key=api_key, timeout_s=timeout_s,
                          max_reply_bytes=max_reply_bytes)
