"""Importing the M3-Bench reference memory graphs: safe unpickling, layout reading, store import."""

from __future__ import annotations

import base64
import builtins
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3_graph_builder import SAMPLE_TEXTS, build_sample_graph, pickle_reference_graph, reference_module
from m3agent import tags
from m3agent.domain import EntityKind, LinkSource
from m3agent.embed.hashing import HashingEmbedder
from m3agent.errors import BenchmarkError, UnsafePickleError
from m3agent.importers.m3graph import _evenly, import_m3_graph, reference_node_of
from m3agent.importers.reference_graph import read_reference_graph
from m3agent.importers.safe_pickle import GraphSurrogate, loads_graph
from m3agent.store.protocol import MemoryStore


def _sample_bytes(**kwargs: Any) -> bytes:
    return pickle_reference_graph(lambda g: build_sample_graph(g, **kwargs))


# --- the allow-list unpickler ------------------------------------------------------------------


class _OsSystem:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.marker}",))


class _Eval:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (builtins.eval, (f"open({str(self.marker)!r}, 'w').close()",))


class _Subprocess:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (subprocess.call, (["touch", str(self.marker)],))


class _Exec:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (builtins.exec, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.parametrize("attack", [_OsSystem, _Eval, _Subprocess, _Exec])
@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_malicious_pickles_are_refused_without_running(tmp_path: Path, attack: type, protocol: int) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps(attack(marker), protocol=protocol)
    with pytest.raises(UnsafePickleError):
        loads_graph(data)
    assert not marker.exists()


def test_attack_hidden_inside_a_real_graph_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    def build(graph: Any) -> None:
        build_sample_graph(graph)
        graph.nodes[0].metadata["extra"] = _OsSystem(marker)

    data = pickle_reference_graph(build)
    with pytest.raises(UnsafePickleError, match=r"(posix|os)\.system"):
        read_reference_graph(data)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("videograph", "os"),  # a module attribute other than the graph classes
        ("videograph", "VideoGraph.__init__"),
        ("numpy", "load"),
        ("numpy.testing", "assert_equal"),
        ("builtins", "getattr"),
        ("builtins", "__import__"),
        ("collections", "namedtuple"),
        ("copyreg", "_reconstructor"),
    ],
)
def test_names_outside_the_allow_list_are_refused(module: str, name: str) -> None:
    data = b"\x80\x04" + _stack_global(module, name) + b"."
    with pytest.raises(UnsafePickleError, match="not on the allow-list"):
        loads_graph(data)


def _stack_global(module: str, name: str) -> bytes:
    def short(text: str) -> bytes:
        raw = text.encode()
        return b"\x8c" + bytes([len(raw)]) + raw

    return short(module) + short(name) + b"\x93"


def test_reference_module_is_not_needed_and_not_imported() -> None:
    data = _sample_bytes()
    assert "videograph" not in sys.modules
    graph = loads_graph(data)
    assert isinstance(graph, GraphSurrogate)
    assert "videograph" not in sys.modules


def test_garbage_is_a_clear_error_not_a_traceback() -> None:
    with pytest.raises(BenchmarkError, match="not a readable memory-graph pickle"):
        loads_graph(b"definitely not a pickle")
    with pytest.raises(BenchmarkError, match="not a VideoGraph"):
        read_reference_graph(pickle.dumps({"nodes": {}}))


# --- reading the reference layout ------------------------------------------------------------


@pytest.mark.parametrize("module_name", ["videograph", "mmagent.videograph"])
@pytest.mark.parametrize("numpy_embeddings", [False, True])
def test_reads_every_node_edge_weight_and_clip(module_name: str, numpy_embeddings: bool) -> None:
    with reference_module(module_name) as module:
        original = module.VideoGraph()
        build_sample_graph(original, numpy_embeddings=numpy_embeddings)
        data = pickle.dumps(original, protocol=4)
    graph = read_reference_graph(data)
    assert graph.problems == ()
    assert set(graph.nodes) == set(original.nodes)
    for node_id, node in original.nodes.items():
        read = graph.nodes[node_id]
        assert read.type == node.type
        assert list(read.contents) == node.metadata["contents"]
        assert read.clip == node.metadata.get("timestamp")
        assert np.allclose(np.asarray(read.embeddings, dtype=np.float64), np.asarray(node.embeddings))
    expected_edges = {(a, b): w for (a, b), w in original.edges.items() if original.nodes[a].type in ("img", "voice")}
    assert graph.edges == expected_edges
    assert list(graph.text_order) == original.text_nodes
    assert graph.clips() == sorted({c for c, _, _ in SAMPLE_TEXTS})
    assert graph.character_mappings["character_0"] == ("face_0", "voice_3")
    assert max(graph.edges.values()) == 3.0  # a reinforced semantic memory


def test_malformed_parts_are_recorded_skips() -> None:
    def build(graph: Any) -> None:
        build_sample_graph(graph)
        bad = graph.Node(99, "hologram")
        graph.nodes[99] = bad
        graph.edges[(0, 12345)] = 1.0
        graph.edges[(1, 2)] = 1.0  # face-face: no such edge in our store
        graph.nodes[5].metadata.pop("timestamp")

    graph = read_reference_graph(pickle_reference_graph(build))
    text = " | ".join(graph.problems)
    assert "node 99: unknown type 'hologram'" in text
    assert "edge (0, 12345)" in text
    assert "edge (1, 2)" in text
    assert "node 5: text node without sentence or clip timestamp" in text
    assert 5 not in graph.nodes and 99 not in graph.nodes


# --- importing into a real store --------------------------------------------------------------


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    from m3agent.store import open_store

    with open_store(str(tmp_path / "memory.db")) as opened:
        yield opened


def _write_sample(tmp_path: Path, name: str = "living_room_01", **kwargs: Any) -> tuple[Path, Any]:
    with reference_module() as module:
        original = module.VideoGraph()
        build_sample_graph(original, **kwargs)
        data = pickle.dumps(original, protocol=4)
    path = tmp_path / f"{name}.pkl"
    path.write_bytes(data)
    return path, original


def test_import_reproduces_every_node_edge_weight_and_clip(tmp_path: Path, store: MemoryStore) -> None:
    path, original = _write_sample(tmp_path)
    embedder = HashingEmbedder(256)
    report = import_m3_graph(path, store, embedder=embedder)
    assert report.video_id == "living_room_01" and report.skipped == []
    assert (report.faces, report.voices, report.clips) == (3, 2, 4)
    assert report.episodic + report.semantic == len(SAMPLE_TEXTS)
    assert store.embedding_model() == (embedder.name, embedder.dim)
    back = {(kind, ours): (kind, ref) for ref, ours in report.entity_ids.items() for kind in ("face", "voice")}
    for ref_id, node in original.nodes.items():
        if node.type in ("img", "voice"):
            _check_entity(store, report, ref_id, node)
            continue
        memory = store.get_memory(report.memory_ids[ref_id])
        assert reference_node_of(memory) == ref_id
        assert memory.kind.value == node.type
        clip = node.metadata["timestamp"]
        assert (memory.clip_index, memory.start_s, memory.end_s) == (clip, clip * 30.0, (clip + 1) * 30.0)
        assert tags.renumber(memory.text, back) == node.metadata["contents"][0]  # token-exact round trip
        linked = {a for (a, b) in original.edges if b == ref_id}
        assert set(memory.entity_ids) == {report.entity_ids[e] for e in linked}
        weights = {original.edges[(e, ref_id)] for e in linked} or {1.0}
        assert memory.weight == max(weights)
        for entity in linked:  # the edge is traversable from the entity side too
            assert memory.id in {m.id for m in store.memories_of_entities([report.entity_ids[entity]])}
    assert {c.index for c, _, _ in store.clips("living_room_01")} == {0, 1, 2, 4}
    assert sorted(m.weight for m in store.memories("living_room_01") if m.weight > 1) == [2.0, 3.0]


def _check_entity(store: MemoryStore, report: Any, ref_id: int, node: Any) -> None:
    entity = store.get_entity(report.entity_ids[ref_id])
    assert entity.kind is (EntityKind.FACE if node.type == "img" else EntityKind.VOICE)
    cap = 10 if node.type == "img" else 20
    bank = store.entity_bank(entity.id)
    expected = node.embeddings if len(node.embeddings) <= cap else [node.embeddings[i] for i in _evenly(12, cap)]
    assert len(bank) == min(cap, len(node.embeddings))
    assert np.allclose(np.stack(bank), np.asarray(expected, dtype=np.float32), atol=1e-6)
    if node.type == "img":
        crops = store.entity_crops(entity.id, limit=10)
        assert sorted(crops) == sorted(base64.b64decode(c) for c in node.metadata["contents"])


def test_import_keeps_equivalences_and_characters(tmp_path: Path, store: MemoryStore) -> None:
    path, original = _write_sample(tmp_path)
    report = import_m3_graph(path, store, embedder=HashingEmbedder(256))
    ours = report.entity_ids
    links = store.links()
    assert {(e.face_id, e.voice_id) for e in links} == {(ours[0], ours[3]), (ours[1], ours[4])}
    assert {e.source for e in links} == {LinkSource.IMPORT}
    equivalence_memories = [m for m in store.memories("living_room_01") if m.text.startswith("Equivalence:")]
    assert len(equivalence_memories) == 2  # kept as memories too, like the reference
    groups = {frozenset(c.entity_ids) for c in store.characters(video_id="living_room_01")}
    expected = {
        frozenset(ours[int(tag.split("_")[1])] for tag in members) for members in original.character_mappings.values()
    }
    assert groups == expected


def test_import_refuses_duplicates_and_replaces_on_request(tmp_path: Path, store: MemoryStore) -> None:
    path, _ = _write_sample(tmp_path)
    embedder = HashingEmbedder(256)
    first = import_m3_graph(path, store, embedder=embedder)
    with pytest.raises(BenchmarkError, match="already in the memory"):
        import_m3_graph(path, store, embedder=embedder)
    second = import_m3_graph(path, store, embedder=embedder, replace_existing=True)
    assert len(store.memories("living_room_01")) == len(SAMPLE_TEXTS)
    assert len(second.memory_ids) == len(first.memory_ids)
    other = import_m3_graph(path, store, "bedroom_02", embedder=embedder)
    assert set(other.entity_ids.values()).isdisjoint(second.entity_ids.values())  # one id space


def test_unknown_tags_cannot_alias_our_entities(tmp_path: Path, store: MemoryStore) -> None:
    def build(graph: Any) -> None:
        build_sample_graph(graph)
        graph.add_text_node("<face_99> and <voice_0> argue.", [0.0], 1, "episodic")  # 0 is a face node

    path = tmp_path / "odd.pkl"
    path.write_bytes(pickle_reference_graph(build))
    report = import_m3_graph(path, store, embedder=HashingEmbedder(256))
    assert report.unresolved_tags == 2
    odd = next(m for m in store.memories("odd") if "argue" in m.text)
    assert odd.text == "unknown face 99 and unknown voice 0 argue."
    assert tags.find_tags(odd.text) == []


def test_imported_equivalences_become_links_by_role(tmp_path: Path, store: MemoryStore) -> None:
    """A voice named first still links as the voice; a sentence naming two faces is a recorded skip."""
    with reference_module() as module:
        graph = module.VideoGraph()
        build_sample_graph(graph)
        rng = np.random.default_rng(3)
        extra = {}
        for name, sentence in (("voice_first", "Equivalence: <voice_4>, <face_2>"),
                               ("two_faces", "Equivalence: <face_1>, <face_2>")):
            extra[name] = graph.add_text_node(sentence, list(rng.standard_normal(8)), 2, "semantic")
            for entity in tags.entity_ids(sentence):
                graph.add_edge(entity, extra[name], 1.0)
        path = tmp_path / "living_room_01.pkl"
        path.write_bytes(pickle.dumps(graph, protocol=4))
    report = import_m3_graph(path, store, embedder=HashingEmbedder(256))
    ours = report.entity_ids
    by_pair = {(e.face_id, e.voice_id): e for e in store.links()}
    assert set(by_pair) == {(ours[0], ours[3]), (ours[1], ours[4]), (ours[2], ours[4])}
    added = by_pair[(ours[2], ours[4])]
    assert (added.source, added.evidence) == (LinkSource.IMPORT, f"m3-bench-graph node {extra['voice_first']}")
    assert report.skipped == [f"node {extra['two_faces']}: equivalence naming no face and voice to link"]
