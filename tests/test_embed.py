"""The packaged MiniLM embedder gives real semantic vectors; the hashing one is lexical."""

from __future__ import annotations

import numpy as np

from m3agent.embed import create_embedder


def test_minilm_semantic_similarity() -> None:
    embedder = create_embedder("minilm")
    vectors = embedder.embed([
        "man talks about his dog in the kitchen",
        "someone describes their pet at home",
        "the stock market fell sharply today",
    ])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert float(vectors[0] @ vectors[1]) > 0.35 > float(vectors[0] @ vectors[2]) + 0.2
    assert embedder.name == "all-MiniLM-L6-v2-int8" and embedder.dim == 384


def test_minilm_batches_and_empty_inputs() -> None:
    embedder = create_embedder("minilm")
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(70)]
    batched = embedder.embed(texts)
    single = embedder.embed(texts[40:41])
    assert batched.shape == (70, 384)
    assert float(batched[40] @ single[0]) > 0.999
    assert embedder.embed([]).shape == (0, 384)
    assert np.isfinite(embedder.embed(["", "   "])).all()


def test_hash_embedder_is_lexical_and_deterministic() -> None:
    embedder = create_embedder("hash:128")
    a, b, c = embedder.embed(["the red car is fast", "a fast red car", "budget meeting tomorrow"])
    assert embedder.dim == 128
    assert float(a @ b) > 0.4 > float(a @ c) + 0.3
    assert np.array_equal(embedder.embed(["the red car is fast"])[0], a)
