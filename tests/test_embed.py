"""The packaged MiniLM embedder gives real semantic vectors; the hashing one is lexical; mpnet, when assembled,
is a registered backend that a store recorded with it finds again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from m3agent.embed import create_embedder, spec_for_model
from m3agent.errors import ModelError


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


def _mpnet_folder() -> Path:
    """The assembled all-mpnet-base-v2 (it is not part of the set-up: a skip, also under CI)."""
    from m3agent.embed import mpnet

    folder = mpnet.default_dir()
    try:
        mpnet.model_files(folder)
    except ModelError as exc:
        pytest.skip(f"{exc.message}; {exc.hint}")
    return folder


def test_mpnet_semantic_similarity_batches_and_store_mapping() -> None:
    _mpnet_folder()
    embedder = create_embedder("mpnet")
    texts = ["man talks about his dog in the kitchen", "someone describes their pet at home",
             "the stock market fell sharply today", "", "a much longer sentence " * 20]  # fmt: skip
    vectors = embedder.embed(texts)
    assert vectors.shape == (5, 768) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert float(vectors[0] @ vectors[1]) > 0.4 > float(vectors[0] @ vectors[2]) + 0.2
    alone = embedder.embed(texts[4:5])[0]  # batched with shorter texts (padded) or alone: the same vector
    assert float(vectors[4] @ alone) > 0.9999
    assert embedder.name == "all-mpnet-base-v2" and spec_for_model(embedder.name) == "mpnet"


def test_mpnet_without_the_model_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as caught:
        create_embedder(f"mpnet:{tmp_path}")
    assert "not assembled" in caught.value.message and "m3agent.embed.mpnet" in caught.value.hint


def test_a_prewarmed_embedder_is_the_one_built_later() -> None:
    """`m3agent ask` starts loading the embedder in a thread while it opens the memory: the embedder built after
    shares that load (one ONNX session), and its vectors are the usual ones."""
    import threading

    from m3agent.embed import minilm, prewarm

    minilm._load_once.cache_clear()
    prewarm("minilm")
    prewarm("hash")  # not a packaged model: nothing started
    loaders = [t for t in threading.enumerate() if t.name == "embedder-prewarm"]
    built = create_embedder("minilm")
    for loader in loaders:
        loader.join(timeout=60)
    assert built._session is create_embedder("minilm")._session
    assert minilm._load_once.cache_info().misses == 1, "one load, shared by the thread and the builder"
    vector = built.embed(["a cat sat on the mat"])[0]
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
