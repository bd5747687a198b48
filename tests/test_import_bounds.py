"""``import-m3`` does bounded work on hostile pickles: no crash, no stall, no unbounded memory, nothing written.

The hostile pickles are built here, opcode by opcode where Python's pickler
cannot write them (a tuple nested a million deep). Cases that crash, spin or
exhaust memory without the bounds run through the real ``m3agent`` binary in a
subprocess with an address-space limit and a timeout, and must end with a
clear message, exit 1 and no memory file. The rest run in process.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3_graph_builder import build_sample_graph, jpeg_base64, pickle_reference_graph, unit
from m3agent.embed.hashing import HashingEmbedder
from m3agent.errors import BenchmarkError, UnsafePickleError
from m3agent.importers.limits import MAX_PROBLEM_CHARS, MAX_PROBLEMS, Deadline, GraphLimits
from m3agent.importers.m3graph import import_m3_graph
from m3agent.importers.reference_graph import read_reference_graph
from m3agent.settings import ImportSettings
from m3agent.store import open_store
from test_cli import BIN

P = 2**61 - 1  # ints that differ by a multiple of this share a hash


def graph_with(key_ops: bytes, value_ops: bytes = b"N") -> bytes:
    """A ``videograph.VideoGraph`` whose state is ``{"nodes": {KEY: VALUE}}``, KEY and VALUE given as opcodes."""
    return (b"\x80\x04\x8c\nvideograph\x8c\nVideoGraph\x93)\x81}\x8c\x05nodes}" + key_ops + value_ops
            + b"ss" + b"b.")


def get(index: int) -> bytes:
    return b"j" + index.to_bytes(4, "little")  # LONG_BINGET


DEEP_TUPLE = b")" + b"\x85" * 1_000_000  # ((((),),),) a million deep: hashing it overflows the C stack
DOUBLING_TUPLE = b")" + b"".join(b"\x94" + get(i) + b"\x86" for i in range(40))  # t = (t, t), 40 times
NESTED_FROZENSET = b"(\x91" + b"".join(b"\x940(" + get(i) + get(i) + b"\x85\x91" for i in range(40))  # f={f,(f,)}


class _Alloc:
    """Pickles as a call of ``numpy.ndarray(shape, dtype)``: a tiny file that allocates ``shape`` on load."""

    def __init__(self, shape: tuple[int, ...], dtype: str = "f4") -> None:
        self.shape, self.dtype = shape, dtype

    def __reduce__(self) -> Any:
        return (np.ndarray, (self.shape, self.dtype))


def face_graph(embeddings: list[Any]) -> bytes:
    def build(graph: Any) -> None:
        face = graph.add_img_node(embeddings, [jpeg_base64(1)])
        text = graph.add_text_node(f"<face_{face}> waves.", [0.0], 0, "episodic")
        graph.add_edge(face, text, 1.0)

    return pickle_reference_graph(build)


def import_cli(tmp_path: Path, data: bytes) -> subprocess.CompletedProcess[str]:
    """``m3agent import-m3`` on ``data`` in a subprocess limited to 4 GiB of address space and 120 s."""
    graph = tmp_path / "hostile.pkl"
    graph.write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")} | {"M3AGENT_EMBEDDER": "hash:64"}

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    try:
        return subprocess.run([str(BIN), "import-m3", str(graph), "--memory", str(tmp_path / "m.db")],
                              capture_output=True, text=True, timeout=120, env=env, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("import-m3 was still running after 120 s")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (graph_with(DEEP_TUPLE), "nested more than 64 deep"),
        (graph_with(DOUBLING_TUPLE), "has more than 64 parts"),
        (graph_with(NESTED_FROZENSET), "a dict key or set member is a frozenset"),
        (graph_with(b"K\x01", b"}r\xf0\xff\xff\xff"), "memo entry 4,294,967,280"),
        (face_graph([_Alloc((60_000_000,))]), "numpy array of 240,000,000 bytes"),
        (face_graph([_Alloc((500_000_000,))]), "numpy array of 2,000,000,000 bytes"),
    ],
    ids=["deep-tuple-key", "doubling-tuple-key", "nested-frozenset-key", "huge-memo-index", "240MB-array",
         "2GB-array"],
)
def test_hostile_pickles_are_refused_clearly_and_write_nothing(tmp_path: Path, data: bytes, message: str) -> None:
    started = time.monotonic()
    out = import_cli(tmp_path, data)
    assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
    assert message in out.stderr and "what to do:" in out.stderr
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "m.db").exists()  # refused before the memory was opened: not even an empty file
    assert time.monotonic() - started < 30


def test_hash_flooding_keys_are_refused_quickly() -> None:
    keys = b"".join(b"\x8a\x0a" + (k * P).to_bytes(10, "little", signed=True) + b"N" for k in range(1, 20_001))
    data = graph_with(b"", b"").replace(b"}ss", b"}(" + keys + b"us")  # nodes = {P: None, 2P: None, ...}
    started = time.monotonic()
    with pytest.raises(UnsafePickleError, match="share one hash"):
        read_reference_graph(data)
    assert time.monotonic() - started < 2.0


def small_limits(**changes: Any) -> GraphLimits:
    return GraphLimits.from_settings(ImportSettings(**changes))


def test_container_size_depth_and_memory_limits_come_from_settings() -> None:
    def build(graph: Any) -> None:
        build_sample_graph(graph)
        graph.nodes[0].metadata["contents"] = [jpeg_base64(1)] * 5000

    data = pickle_reference_graph(build)
    assert read_reference_graph(data).nodes[0].contents  # within the default limits
    with pytest.raises(UnsafePickleError, match="holds more than 1,000 items") as info:
        read_reference_graph(data, small_limits(max_items=1000))
    assert "importer.max_items" in info.value.hint
    with pytest.raises(UnsafePickleError, match="nested more than 8 deep"):
        read_reference_graph(graph_with(b")" + b"\x85" * 9), small_limits(max_depth=8))
    with pytest.raises(UnsafePickleError, match="more than 1 MiB of memory") as info:
        read_reference_graph(data, small_limits(max_memory_mb=1))
    assert "importer.max_memory_mb" in info.value.hint


def test_file_size_and_time_limits(tmp_path: Path) -> None:
    path = tmp_path / "g.pkl"
    path.write_bytes(pickle_reference_graph(build_sample_graph))
    with pytest.raises(UnsafePickleError, match="over the limit of 0 MiB"):
        read_reference_graph(path, small_limits(max_file_mb=0.0001))
    with pytest.raises(BenchmarkError, match="ran longer than its limit of 5 s"):
        read_reference_graph(path, deadline=Deadline(time.monotonic() - 1, 5.0))


class _SlowEmbedder(HashingEmbedder):
    def embed(self, texts: list[str]) -> Any:
        time.sleep(0.4)
        return super().embed(texts)


def test_an_import_past_its_deadline_keeps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "g.pkl"
    path.write_bytes(pickle_reference_graph(build_sample_graph))
    with open_store(str(tmp_path / "m.db")) as store:
        with pytest.raises(BenchmarkError, match=r"ran longer than its limit of 0.6 s \(importing clip"):
            import_m3_graph(path, store, embedder=_SlowEmbedder(64), deadline=Deadline(time.monotonic() + 0.6, 0.6))
        assert store.videos() == [] and store.entities() == []


def test_embeddings_must_have_the_graph_dimensions(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    data = face_graph([[0.5] * 1000, np.ones(7, np.float32), np.asarray(unit(rng, 512), np.float32),
                       _Alloc((2, 512)), [float("nan")] * 512, "text", [True] * 512])
    graph = read_reference_graph(data)
    assert len(graph.nodes[0].embeddings) == 1
    problems = " | ".join(graph.problems)
    assert "embedding 0 has 1000 values, expected 512" in problems
    assert "embedding 1 has shape (7,)" in problems and "embedding 3 has shape (2, 512)" in problems
    assert "embedding 4 holds values that are not finite" in problems and "embedding 5 is a str" in problems
    assert "embedding 6 holds values that are not finite numbers" in problems
    path = tmp_path / "g.pkl"
    path.write_bytes(data)
    with open_store(str(tmp_path / "m.db")) as store:
        report = import_m3_graph(path, store, embedder=HashingEmbedder(64))
        bank = store.entity_bank(report.entity_ids[0])
    assert [v.shape for v in bank] == [(512,)]


def test_problem_messages_are_short_and_their_number_is_capped() -> None:
    def build(graph: Any) -> None:
        build_sample_graph(graph)
        for i in range(1000, 1000 + MAX_PROBLEMS + 50):
            node = graph.Node(i, ["x" * 10_000] * 100)  # a type that is a big list: quoted in a few characters
            graph.nodes[i] = node

    graph = read_reference_graph(pickle_reference_graph(build))
    assert len(graph.problems) == MAX_PROBLEMS + 1
    assert all(len(p) <= MAX_PROBLEM_CHARS for p in graph.problems)
    assert graph.problems[-1] == "… and 50 more problems not listed"


def test_absurd_clip_timestamps_are_skipped_not_crashing() -> None:
    def build(graph: Any) -> None:
        build_sample_graph(graph)
        graph.add_text_node("huge", [0.0], 10**400, "episodic")
        graph.add_text_node("digit", [0.0], "²", "episodic")
        graph.add_text_node("negative", [0.0], -1, "episodic")

    graph = read_reference_graph(pickle_reference_graph(build))
    assert sum("text node without sentence or clip timestamp" in p for p in graph.problems) == 3


def test_the_sample_graph_still_imports_under_the_bounds(tmp_path: Path) -> None:
    for protocol in (4, 5):
        def build(graph: Any) -> None:
            build_sample_graph(graph, numpy_embeddings=True)

        data = pickle_reference_graph(build, protocol=protocol)
        graph = read_reference_graph(data)
        assert graph.problems == () and len(graph.entities()) == 5


def test_huge_numbers_in_weights_and_vectors_are_skips_not_crashes() -> None:
    def build(graph: Any) -> None:
        build_sample_graph(graph)
        face = graph.add_img_node([[10**400] + [0.0] * 511], [jpeg_base64(2)])
        text = graph.add_text_node(f"<face_{face}> nods.", [0.0], 1, "episodic")
        graph.add_edge(face, text, 10**400)

    graph = read_reference_graph(pickle_reference_graph(build))
    problems = " | ".join(graph.problems)
    assert "embedding 0 holds values that are not finite numbers" in problems
    assert "not an entity-text edge with a finite weight" in problems


@pytest.mark.timeout(120)
def test_a_character_named_many_times_is_resolved_once(tmp_path: Path) -> None:
    def build(graph: Any) -> None:
        face = graph.add_img_node([unit(np.random.default_rng(1), 512)], [jpeg_base64(1)])
        for i in range(200):
            graph.add_text_node(" ".join(["<character_0>"] * 50), [0.0], i // 20, "episodic")
        graph.character_mappings = {"character_0": ["nobody"] * 200_000 + [f"face_{face}"]}

    path = tmp_path / "g.pkl"
    path.write_bytes(pickle_reference_graph(build))
    started = time.monotonic()
    with open_store(str(tmp_path / "m.db")) as store:
        report = import_m3_graph(path, store, embedder=HashingEmbedder(64))
        memory = store.get_memory(next(iter(report.memory_ids.values())))
    assert time.monotonic() - started < 30
    assert memory.text.count(f"<face_{report.entity_ids[0]}>") == 50
