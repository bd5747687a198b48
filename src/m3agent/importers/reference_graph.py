"""A plain, validated view of a reference ``VideoGraph`` read from its pickle.

Layout of the reference object (reference doc §4): ``nodes`` maps an int id
to a node with ``id``, ``type`` (img | voice | episodic | semantic),
``embeddings`` (list of vectors) and ``metadata`` (``contents`` list, and for
text nodes ``timestamp`` = clip id); ``edges`` maps ``(id1, id2)`` to a float
weight, stored in both directions; ``text_nodes`` lists text ids in insertion
order; ``character_mappings`` (``character_k`` -> ``["face_i", "voice_j"]``)
exists after a refresh. Bad nodes or edges are skipped and recorded in
:attr:`ReferenceGraph.problems`, never silently dropped; values from the file
are quoted in a few characters (:func:`~.limits.shown`) and only the first
skips are listed. Entity embeddings must have the graph's dimensions
(``face_dim``/``voice_dim``: one vector of that size, or an ``(n, dim)``
array); text embeddings are kept as read (the importer re-embeds texts).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m3agent.errors import BenchmarkError
from m3agent.importers.limits import MAX_INDEX, Deadline, GraphLimits, Problems, shown
from m3agent.importers.safe_pickle import GraphSurrogate, NodeSurrogate, load_graph_file, loads_graph

ENTITY_TYPES = {"img": "face", "voice": "voice"}
TEXT_TYPES = ("episodic", "semantic")


@dataclass(frozen=True, slots=True, eq=False)
class ReferenceNode:
    """One node; ``clip`` is set for text nodes only."""

    id: int
    type: str
    embeddings: tuple[Any, ...]
    contents: tuple[Any, ...]
    clip: int | None = None

    @property
    def is_entity(self) -> bool:
        """Whether the node is a face (``img``) or voice node, i.e. becomes an entity rather than a memory."""
        return self.type in ENTITY_TYPES

    @property
    def tag_kind(self) -> str:
        """``face`` or ``voice`` for entity nodes (the kind used in ``<kind_id>`` tags)."""
        return ENTITY_TYPES[self.type]

    @property
    def text(self) -> str:
        """The node's first content as text (a text node's memory); empty when it has none."""
        return str(self.contents[0]) if self.contents else ""

    @property
    def is_equivalence(self) -> bool:
        """Whether the node is a semantic "Equivalence: ..." statement (a face-voice link, not a memory)."""
        return self.type == "semantic" and self.text.lower().startswith("equivalence")


@dataclass(frozen=True, slots=True, eq=False)
class ReferenceGraph:
    """Nodes, undirected entity-text edges ``(entity id, text id) -> weight``, text order."""

    nodes: dict[int, ReferenceNode]
    edges: dict[tuple[int, int], float]
    text_order: tuple[int, ...]
    character_mappings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def entities(self) -> list[ReferenceNode]:
        """Face and voice nodes by id, so entities are created in a stable order."""
        return [n for _, n in sorted(self.nodes.items()) if n.is_entity]

    def texts(self) -> list[ReferenceNode]:
        """Text nodes in the reference's insertion order."""
        return [self.nodes[i] for i in self.text_order]

    def clips(self) -> list[int]:
        """The clip indices the text nodes name, ascending, without repeats."""
        return sorted({n.clip for n in self.texts() if n.clip is not None})

    def entities_of(self, text_id: int) -> dict[int, float]:
        """Entity ids linked to a text node, with the edge weights."""
        return {e: w for (e, t), w in self.edges.items() if t == text_id}


def read_reference_graph(
    source: Path | str | bytes, limits: GraphLimits | None = None, deadline: Deadline | None = None
) -> ReferenceGraph:
    """Safely load a graph pickle (a path or the raw bytes) within ``limits`` and validate its layout."""
    bounds = limits or GraphLimits.from_settings()
    deadline = deadline or bounds.deadline()
    raw = loads_graph(source, bounds, deadline) if isinstance(source, bytes) else \
        load_graph_file(source, bounds, deadline)
    if not isinstance(raw, GraphSurrogate):
        raise BenchmarkError(
            f"the pickle holds a {type(raw).__name__}, not a VideoGraph",
            hint="pass one of the memory-graph .pkl files released with M3-Bench",
        )
    state = getattr(raw, "state", {})
    problems = Problems()
    nodes = _read_nodes(state.get("nodes"), _Reading(bounds, problems))
    deadline.check("reading the graph's nodes")
    edges = _read_edges(state.get("edges"), nodes, problems)
    order = _text_order(state.get("text_nodes"), nodes, problems)
    mappings = _read_mappings(state.get("character_mappings"), problems)
    return ReferenceGraph(nodes, edges, order, mappings, problems.final())


@dataclass(frozen=True, slots=True)
class _Reading:
    limits: GraphLimits
    problems: Problems


def _read_nodes(raw_nodes: Any, reading: _Reading) -> dict[int, ReferenceNode]:
    if not isinstance(raw_nodes, dict):
        raise BenchmarkError("the graph has no 'nodes' dict", hint="the file is not a reference VideoGraph")
    nodes: dict[int, ReferenceNode] = {}
    for key, raw in raw_nodes.items():
        node = _read_node(key, raw, reading)
        if node is not None:
            nodes[node.id] = node
    return nodes


def _read_node(key: Any, raw: Any, reading: _Reading) -> ReferenceNode | None:
    problems = reading.problems
    if not isinstance(raw, NodeSurrogate) or not _is_index(key):
        problems.append(f"node {shown(key)}: not a VideoGraph node, skipped")
        return None
    state = getattr(raw, "state", {})
    node_type = state.get("type")
    raw_metadata = state.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    contents = metadata.get("contents", [])
    if node_type not in (*ENTITY_TYPES, *TEXT_TYPES):
        problems.append(f"node {key}: unknown type {shown(node_type)}, skipped")
        return None
    raw_embeddings = state.get("embeddings", [])
    embeddings = _entity_vectors(key, node_type, raw_embeddings, reading) if node_type in ENTITY_TYPES \
        else _vectors(raw_embeddings)
    if not isinstance(contents, list | tuple) or embeddings is None:
        problems.append(f"node {key}: malformed contents or embeddings, skipped")
        return None
    clip = None
    if node_type in TEXT_TYPES:
        clip = _clip_of(metadata.get("timestamp"))
        if clip is None or not contents or not isinstance(contents[0], str):
            problems.append(f"node {key}: text node without sentence or clip timestamp, skipped")
            return None
        if len(contents[0]) > reading.limits.max_text_chars:
            problems.append(f"node {key}: a sentence of {len(contents[0]):,} characters (over "
                            f"{reading.limits.max_text_chars:,}), skipped")
            return None
    return ReferenceNode(int(key), str(node_type), tuple(embeddings), tuple(contents), clip)


def _entity_vectors(key: Any, node_type: str, value: Any, reading: _Reading) -> tuple[Any, ...] | None:
    """The node's embeddings that have the graph's size for its kind; the others are recorded skips.

    ``None`` when ``embeddings`` is neither a list of vectors nor an array.
    """
    dim = reading.limits.face_dim if node_type == "img" else reading.limits.voice_dim
    raw = _vectors(value)
    if raw is None:
        return None
    kept = []
    for position, vector in enumerate(raw):
        problem = _vector_problem(vector, dim)
        if problem:
            reading.problems.append(f"entity node {key}: embedding {position} {problem}; skipped")
        else:
            kept.append(vector)
    return tuple(kept)


def _vector_problem(vector: Any, dim: int) -> str | None:
    """Why ``vector`` is not ``dim`` finite numbers (a list or a 1-D numeric array), or ``None``."""
    shape = getattr(vector, "shape", None)
    if shape is not None:
        kind = getattr(getattr(vector, "dtype", None), "kind", "")
        if shape != (dim,) or kind not in ("i", "u", "f"):
            return f"has shape {shown(shape, 40)} of kind {kind or '?'}, expected ({dim},) numbers"
        return None
    if not isinstance(vector, list | tuple):
        return f"is a {type(vector).__name__}, not a vector"
    if len(vector) != dim:
        return f"has {len(vector)} values, expected {dim}"
    if not all(_finite(x) for x in vector):
        return "holds values that are not finite numbers"
    return None


def _finite(value: Any) -> bool:
    """A real number (not a bool) that is finite as a float; huge ints are not."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _vectors(value: Any) -> tuple[Any, ...] | None:
    """A node's embeddings as a tuple of vectors: a list of vectors, or a numpy array (1-D: one vector)."""
    if isinstance(value, list | tuple):
        return tuple(value)
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and len(shape) in (1, 2):
        return (value,) if len(shape) == 1 else tuple(value)
    return None


def _clip_of(value: Any) -> int | None:
    if _is_index(value):
        return int(value)
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= MAX_INDEX:
        return int(text)
    return None


def _is_index(value: Any) -> bool:
    """An integer usable as a node id or clip index: 0 to :data:`MAX_INDEX`."""
    return _is_int(value) and 0 <= int(value) <= MAX_INDEX


def _is_int(value: Any) -> bool:
    """Python or numpy integers, not bools."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _read_edges(raw_edges: Any, nodes: dict[int, ReferenceNode], problems: list[str]) -> dict[tuple[int, int], float]:
    """Fold the two directions into ``(entity, text) -> weight``; other edges are recorded skips."""
    if raw_edges is None:
        return {}
    if not isinstance(raw_edges, dict):
        raise BenchmarkError("the graph's 'edges' is not a dict", hint="the file is not a reference VideoGraph")
    edges: dict[tuple[int, int], float] = {}
    for key, weight in raw_edges.items():
        pair = _entity_text_pair(key, nodes)
        if pair is None or not _finite(weight) or not 0 <= float(weight) < 1e9:
            problems.append(f"edge {shown(key)}: not an entity-text edge with a finite weight, skipped")
            continue
        if pair in edges and edges[pair] != float(weight):
            problems.append(f"edge {pair}: the two directions disagree ({edges[pair]} vs {weight}); kept max")
            weight = max(edges[pair], float(weight))
        edges[pair] = float(weight)
    return edges


def _entity_text_pair(key: Any, nodes: dict[int, ReferenceNode]) -> tuple[int, int] | None:
    if not (isinstance(key, tuple) and len(key) == 2 and all(_is_index(k) for k in key)):
        return None
    a, b = (nodes.get(int(k)) for k in key)
    if a is None or b is None or a.is_entity == b.is_entity:
        return None
    return (a.id, b.id) if a.is_entity else (b.id, a.id)


def _text_order(raw_order: Any, nodes: dict[int, ReferenceNode], problems: list[str]) -> tuple[int, ...]:
    """``text_nodes`` order, completed by id order for text nodes it misses."""
    texts = {i for i, n in nodes.items() if not n.is_entity}
    listed: list[int] = []
    if isinstance(raw_order, list | tuple):
        listed = [int(i) for i in raw_order if _is_index(i) and int(i) in texts]
    seen = dict.fromkeys(listed)
    missing = sorted(texts - set(seen))
    if raw_order is not None and missing:
        problems.append(f"{len(missing)} text nodes missing from text_nodes; ordered by id")
    return (*seen, *missing)


def _read_mappings(raw: Any, problems: list[str]) -> dict[str, tuple[str, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) and _str_list(v) for k, v in raw.items()):
        problems.append("character_mappings malformed, ignored")
        return {}
    return {k: tuple(v) for k, v in raw.items()}


def _str_list(value: Iterable[Any]) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
