"""Builds pickles in the layout of the reference ``VideoGraph`` (reference doc §4) for tests.

The reference classes are re-created in a throw-away module registered as
``videograph`` (or ``mmagent.videograph``) only while pickling, so the
pickles name the same classes as the graphs released with M3-Bench, and the
module is gone again when the importer unpickles them.
"""

from __future__ import annotations

import base64
import pickle
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

_REFERENCE_SOURCE = """
class VideoGraph:
    def __init__(self, max_img_embeddings=10, max_audio_embeddings=20):
        self.nodes = {}
        self.edges = {}
        self.text_nodes = []
        self.text_nodes_by_clip = {}
        self.event_sequence_by_clip = {}
        self.max_img_embeddings = max_img_embeddings
        self.max_audio_embeddings = max_audio_embeddings
        self.img_matching_threshold = 0.3
        self.audio_matching_threshold = 0.6
        self.next_node_id = 0

    class Node:
        def __init__(self, node_id, node_type):
            self.id = node_id
            self.type = node_type
            self.embeddings = []
            self.metadata = {}

    def _new(self, node_type):
        node = self.Node(self.next_node_id, node_type)
        self.nodes[node.id] = node
        self.next_node_id += 1
        return node

    def add_img_node(self, embeddings, contents):
        node = self._new("img")
        node.embeddings.extend(embeddings[: self.max_img_embeddings])
        node.metadata["contents"] = contents
        return node.id

    def add_voice_node(self, embeddings, contents):
        node = self._new("voice")
        node.embeddings.extend(embeddings[: self.max_audio_embeddings])
        node.metadata["contents"] = contents
        return node.id

    def add_text_node(self, sentence, embedding, clip_id, text_type):
        node = self._new(text_type)
        node.embeddings = [embedding]
        node.metadata["contents"] = [sentence]
        node.metadata["timestamp"] = clip_id
        self.text_nodes.append(node.id)
        self.text_nodes_by_clip.setdefault(clip_id, []).append(node.id)
        if text_type == "episodic":
            self.event_sequence_by_clip.setdefault(clip_id, []).append(node.id)
        return node.id

    def add_edge(self, a, b, weight=1.0):
        self.edges[(a, b)] = weight
        self.edges[(b, a)] = weight

    def reinforce_node(self, node_id, delta=1.0):
        for a, b in list(self.edges):
            if a == node_id or b == node_id:
                self.edges[(a, b)] += delta
"""


@contextmanager
def reference_module(name: str = "videograph") -> Iterator[types.ModuleType]:
    """Register a module ``name`` holding the reference classes; removed again on exit."""
    module = types.ModuleType(name)
    exec(compile(_REFERENCE_SOURCE, f"<{name}>", "exec"), module.__dict__)
    module.VideoGraph.__module__ = name
    module.VideoGraph.Node.__module__ = name
    parts = name.split(".")
    names = [".".join(parts[: i + 1]) for i in range(len(parts))]
    previous = {n: sys.modules.get(n) for n in names}
    for parent in names[:-1]:
        sys.modules[parent] = types.ModuleType(parent)
    sys.modules[name] = module
    try:
        yield module
    finally:
        for n, old in previous.items():
            if old is None:
                del sys.modules[n]
            else:
                sys.modules[n] = old


def pickle_reference_graph(build: Callable[[Any], None], module_name: str = "videograph", protocol: int = 4) -> bytes:
    """Build a reference ``VideoGraph`` with ``build(graph)`` and pickle it."""
    with reference_module(module_name) as module:
        graph = module.VideoGraph()
        build(graph)
        return pickle.dumps(graph, protocol=protocol)


def unit(rng: np.random.Generator, dim: int) -> list[float]:
    vector = rng.normal(size=dim)
    return [float(x) for x in vector / np.linalg.norm(vector)]


def jpeg_base64(seed: int, side: int = 24) -> str:
    import cv2

    image = np.random.default_rng(seed).integers(0, 255, size=(side, side + 8, 3), dtype=np.uint8)
    ok, buffer = cv2.imencode(".jpg", image)
    assert ok
    return base64.b64encode(buffer.tobytes()).decode()


# Sentences of the sample graph: (clip, kind, text with reference tags as {name}).
SAMPLE_TEXTS = [
    (0, "episodic", "{f0} walks into the kitchen holding a red mug."),
    (0, "episodic", "{v0} says: 'Good morning, the coffee is ready.'"),
    (0, "semantic", "Equivalence: {f0}, {v0}"),
    (0, "semantic", "{f0} likes coffee in the morning."),
    (1, "episodic", "{f1} sits at the table next to {f0}."),
    (1, "episodic", "{v1} asks {f0} about the weekend plans."),
    (1, "semantic", "Equivalence: {f1}, {v1}"),
    (2, "episodic", "{f2} waves from the doorway."),
    (2, "semantic", "{f1} and {f0} are close friends."),
    (2, "episodic", "The kettle on the stove starts whistling."),
    (4, "semantic", "{f0}'s name is Lily."),
    (4, "episodic", "{f0} hands {f2} a plate of toast."),
]


def build_sample_graph(graph: Any, seed: int = 7, numpy_embeddings: bool = False) -> None:
    """A small but complete graph: 3 faces with crops, 2 voices, 4 clips, equivalences, reinforced edges."""
    rng = np.random.default_rng(seed)

    def vec(dim: int) -> Any:
        values = unit(rng, dim)
        return np.asarray(values, dtype=np.float32) if numpy_embeddings else values

    tags: dict[str, str] = {}
    for i in range(3):
        n_emb = 12 if i == 0 else 3  # more than the cap of 10 for the first face
        node = graph.add_img_node([vec(512) for _ in range(n_emb)], [jpeg_base64(10 * i + k) for k in range(2)])
        tags[f"f{i}"] = f"<face_{node}>"
    for i in range(2):
        node = graph.add_voice_node([vec(192) for _ in range(4)], [f"asr line {i}-{k}" for k in range(3)])
        tags[f"v{i}"] = f"<voice_{node}>"
    ids = {tag: int(tag.strip("<>").split("_")[1]) for tag in tags.values()}
    for clip, kind, template in SAMPLE_TEXTS:
        sentence = template.format(**tags)
        text_id = graph.add_text_node(sentence, vec(3072), clip, kind)
        for tag, entity in ids.items():
            if tag in sentence:
                graph.add_edge(entity, text_id, 1.0)
    reinforced = graph.text_nodes[3]  # "likes coffee" confirmed twice more
    graph.reinforce_node(reinforced)
    graph.reinforce_node(reinforced)
    graph.reinforce_node(graph.text_nodes[8])
    graph.character_mappings = {
        "character_0": [tags["f0"].strip("<>"), tags["v0"].strip("<>")],
        "character_1": [tags["f1"].strip("<>"), tags["v1"].strip("<>")],
        "character_2": [tags["f2"].strip("<>")],
    }
