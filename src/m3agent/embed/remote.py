"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint.

Spec: ``openai://host:port/v1?model=NAME`` (http) or ``https://host/v1?model=NAME``.
The dimension is detected from the first reply, never assumed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, EndpointError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.registry import BackendSpec


class RemoteEmbedder:
    """Calls ``POST {base_url}/embeddings`` in batches; vectors are L2-normalised."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"remote:{model}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
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

        url = f"{self.base_url}/embeddings"
        try:
            reply = httpx.post(
                url, json={"model": self.model, "input": batch}, headers=self._headers, timeout=self._timeout
            )
            reply.raise_for_status()
            data = reply.json()["data"]
        except httpx.HTTPError as exc:
            raise EndpointError(f"embedding request to {url} failed: {exc}") from None
        except (KeyError, ValueError) as exc:
            raise EndpointError(f"embedding endpoint {url} sent an unexpected reply: {exc}") from None
        return [item["embedding"] for item in sorted(data, key=lambda d: d["index"])]


def create(spec: BackendSpec, *, api_key: str | None = None, timeout_s: float = 60.0, **_: Any) -> RemoteEmbedder:
    model = spec.params.get("model")
    if not model:
        raise ConfigError(f"embedder {spec.raw!r} names no model", hint="add ?model=NAME to the URL")
    scheme = "https" if spec.scheme == "https" else "http"
    return RemoteEmbedder(f"{scheme}://{spec.target}", model, api_key=api_key, timeout_s=timeout_s)
