"""Backends are chosen by URL or short name; unknown names fail with the list of known ones."""

from __future__ import annotations

import pytest

from m3agent.embed import EMBEDDERS, create_embedder
from m3agent.errors import UnknownBackendError
from m3agent.registry import parse_spec


@pytest.mark.parametrize(
    ("spec", "scheme", "target", "params"),
    [
        ("sqlite:///tmp/mem.db", "sqlite", "/tmp/mem.db", {}),
        ("postgresql://u:p@localhost:5432/m3", "postgresql", "u:p@localhost:5432/m3", {}),
        ("openai://localhost:8000/v1?model=qwen3", "openai", "localhost:8000/v1", {"model": "qwen3"}),
        ("llamacpp:smollm2", "llamacpp", "smollm2", {}),
        ("hash:64", "hash", "64", {}),
        ("minilm", "minilm", "", {}),
    ],
)
def test_parse_spec(spec: str, scheme: str, target: str, params: dict[str, str]) -> None:
    parsed = parse_spec(spec)
    assert (parsed.scheme, parsed.target, parsed.params) == (scheme, target, params)


def test_unknown_backend_lists_known_ones() -> None:
    with pytest.raises(UnknownBackendError) as info:
        create_embedder("word2vec")
    assert "minilm" in info.value.hint and "hash" in info.value.hint


def test_registry_names() -> None:
    assert {"minilm", "hash", "openai"} <= set(EMBEDDERS.names())
