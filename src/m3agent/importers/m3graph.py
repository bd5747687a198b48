"""Import a reference M3-Bench memory graph into a memory store.

Mapping (reference doc §4):

- ``img``/``voice`` nodes -> face/voice entities, created in the clip of
  their first memory. Their embedding banks are kept (capped to the
  reference caps, 10 and 20, by evenly spaced picks: deterministic);
  base64 JPEG crops of faces become face observations (at most
  :data:`MAX_CROPS`). Voice contents are ASR lines without timing, so they
  are counted, not stored.
- ``episodic``/``semantic`` nodes -> memories of clip ``timestamp``,
  spanning ``clip*30 .. (clip+1)*30`` s, linked to their entities; the
  weight of the reference edges (all edges of a node share it; reinforcing
  adds 1 to each) becomes the memory weight.
- ``Equivalence:`` sentences -> face-voice links (source ``import``) between
  every face and every voice they name, and they stay memories too, as in
  the reference; a sentence naming no face-voice pair is a recorded skip.
- Tags are renumbered into this store's entity ids with
  :func:`m3agent.tags.renumber`; a tag naming no entity of the graph is
  written as plain words so it cannot alias one of ours.
- Texts are re-embedded with our embedder (the reference vectors are
  3072-d OpenAI embeddings, a different space); provenance records the
  reference node id.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.domain import (
    BBox,
    Clip,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    Memory,
    MemoryKind,
    Video,
)
from m3agent.errors import BenchmarkError
from m3agent.importers.limits import Deadline, GraphLimits, Problems
from m3agent.importers.reference_graph import ReferenceGraph, ReferenceNode, read_reference_graph

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.store.protocol import ClipWriter, MemoryStore

CLIP_SECONDS = 30.0
BANK_CAPS = {"face": 10, "voice": 20}
MAX_CROPS = 10
PROVENANCE_PREFIX = "m3-bench-graph node "


@dataclass
class ImportReport:
    """What an import wrote, the id mappings, and every recorded skip."""

    video_id: str
    source: str
    embedder: str
    clips: int = 0
    faces: int = 0
    voices: int = 0
    episodic: int = 0
    semantic: int = 0
    edges: int = 0
    equivalences: int = 0
    crops: int = 0
    voice_transcripts_not_stored: int = 0
    unresolved_tags: int = 0
    entity_ids: dict[int, int] = field(default_factory=dict)
    memory_ids: dict[int, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values: entity ids keyed by string, memory ids only counted (there can be
        thousands)."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("entity_ids", "memory_ids")}
        out["entity_ids"] = {str(k): v for k, v in self.entity_ids.items()}
        out["memory_count"] = len(self.memory_ids)
        return out


def import_m3_graph(
    pkl_path: Path | str,
    store: MemoryStore,
    video_id: str | None = None,
    *,
    embedder: Embedder | None = None,
    replace_existing: bool = False,
    clip_seconds: float = CLIP_SECONDS,
    limits: GraphLimits | None = None,
    graph: ReferenceGraph | None = None,
    deadline: Deadline | None = None,
) -> ImportReport:
    """Import the graph at ``pkl_path`` as video ``video_id`` (default: the file stem).

    The pickle is read with the allow-list unpickler (never executed) within
    ``limits`` (default: the settings' defaults), unless ``graph`` was read
    already. A file over a limit is refused before the store is touched; an
    import that fails later (e.g. past ``deadline``) removes what it wrote.
    An existing video of that id is an error unless ``replace_existing``.
    """
    from m3agent.embed import create_embedder

    started = time.perf_counter()
    bounds = limits or GraphLimits.from_settings()
    deadline = deadline or bounds.deadline()
    graph = graph or read_reference_graph(pkl_path, bounds, deadline)
    vid = video_id or Path(pkl_path).stem
    embedder = embedder or create_embedder("minilm")
    report = ImportReport(vid, str(pkl_path), embedder.name, skipped=Problems(graph.problems))
    _prepare(store, embedder, vid, replace_existing)
    try:
        _GraphImport(graph, store, embedder, report, clip_seconds, deadline).run(str(pkl_path))
    except BaseException:
        _discard(store, vid)
        raise
    report.skipped = list(report.skipped.final()) if isinstance(report.skipped, Problems) else report.skipped
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _discard(store: MemoryStore, video_id: str) -> None:
    """Remove what a failed import wrote (its clips commit one by one); the original error is what matters."""
    import contextlib

    with contextlib.suppress(Exception):
        if any(v.video_id == video_id for v in store.videos()):
            store.delete_video(video_id)


def _prepare(store: MemoryStore, embedder: Embedder, video_id: str, replace_existing: bool) -> None:
    if any(v.video_id == video_id for v in store.videos()):
        if not replace_existing:
            raise BenchmarkError(
                f"video {video_id!r} is already in the memory {store.url}",
                hint="pass another --video-id, or --replace to import it again",
            )
        store.delete_video(video_id)
    store.set_embedding_model(embedder.name, embedder.dim)


class _GraphImport:
    """One import run: clip by clip, entities before the memories that name them."""

    def __init__(
        self,
        graph: ReferenceGraph,
        store: MemoryStore,
        embedder: Embedder,
        report: ImportReport,
        clip_seconds: float,
        deadline: Deadline,
    ) -> None:
        self.graph = graph
        self.deadline = deadline
        self.store = store
        self.embedder = embedder
        self.report = report
        self.clip_seconds = clip_seconds
        self.valid_tags = {(n.tag_kind, n.id): n for n in graph.entities()}
        self.links: dict[int, dict[int, float]] = {}
        for (entity, text), weight in graph.edges.items():
            self.links.setdefault(text, {})[entity] = weight
        self.members: dict[int, tuple[str, int] | None] = {}
        self.first_clip = self._first_clips()

    def run(self, source: str) -> None:
        clips = sorted({*self.graph.clips(), *self.first_clip.values()}) or [0]
        self.store.add_video(
            Video(
                self.report.video_id,
                source=source,
                duration_s=(clips[-1] + 1) * self.clip_seconds,
                title=f"M3-Bench memory graph {Path(source).name}",
                metadata=self._video_metadata(),
            )
        )
        texts_by_clip: dict[int, list[ReferenceNode]] = {}
        for node in self.graph.texts():
            texts_by_clip.setdefault(node.clip or 0, []).append(node)
        for index in clips:
            self.deadline.check(f"importing clip {index}")
            self._clip(index, texts_by_clip.get(index, []))
        self.report.clips = len(clips)

    def _video_metadata(self) -> dict[str, Any]:
        mappings = {k: list(v) for k, v in self.graph.character_mappings.items()}
        return {
            "imported_from": "m3-bench reference VideoGraph",
            "reference_nodes": len(self.graph.nodes),
            "reference_character_mappings": mappings,
        }

    def _first_clips(self) -> dict[int, int]:
        """Clip of each entity's first memory (linked or naming it); entities without any: first clip."""
        first: dict[int, int] = {}
        for node in self.graph.texts():
            linked = set(self.links.get(node.id, {})) | set(self._named(node.text))
            for entity in linked:
                first[entity] = min(first.get(entity, node.clip or 0), node.clip or 0)
        start = min(first.values(), default=min(self.graph.clips(), default=0))
        return {n.id: first.get(n.id, start) for n in self.graph.entities()}

    def _named(self, text: str) -> list[int]:
        """Reference ids of the graph's entities that ``text`` names, in order (characters resolved)."""
        keys = [self._member(t) if t.kind == "character" else (t.kind, t.id) for t in tags.find_tags(text)]
        return [key[1] for key in keys if key in self.valid_tags]

    def _clip(self, index: int, nodes: list[ReferenceNode]) -> None:
        clip = Clip(self.report.video_id, index, index * self.clip_seconds, (index + 1) * self.clip_seconds)
        with self.store.clip(clip) as writer:
            for entity in self.graph.entities():
                if self.first_clip[entity.id] == index:
                    self._entity(writer, clip, entity)
            texts = [self._renumbered(n.text) for n in nodes]
            vectors: Any = self.embedder.embed(texts) if texts else []
            for node, text, vector in zip(nodes, texts, vectors, strict=True):
                self._memory(writer, clip, node, text, vector)

    # entities ---------------------------------------------------------------
    def _entity(self, writer: ClipWriter, clip: Clip, node: ReferenceNode) -> None:
        kind = EntityKind.FACE if node.tag_kind == "face" else EntityKind.VOICE
        bank = _bank(node, BANK_CAPS[node.tag_kind], self.report.skipped)
        entity = writer.add_entity(kind, bank)
        self.report.entity_ids[node.id] = entity.id
        if kind is EntityKind.FACE:
            self.report.faces += 1
            self.report.crops += self._crops(writer, clip, node, entity.id)
        else:
            self.report.voices += 1
            self.report.voice_transcripts_not_stored += len(node.contents)

    def _crops(self, writer: ClipWriter, clip: Clip, node: ReferenceNode, entity_id: int) -> int:
        stored = 0
        for position, content in enumerate(node.contents):
            if stored >= MAX_CROPS:
                break
            jpeg = _jpeg(content)
            if jpeg is None:
                self.report.skipped.append(f"face node {node.id}: content {position} is not a base64 JPEG")
                continue
            width, height = jpeg_size(jpeg) or (0, 0)
            face = FaceObservation(
                clip_index=clip.index,
                time_s=clip.start_s,
                bbox=BBox(0, 0, width, height),
                det_score=1.0,
                crop_jpeg=jpeg,
                entity_id=entity_id,
            )
            writer.add_face(face)
            stored += 1
        return stored

    # memories ---------------------------------------------------------------
    def _renumbered(self, text: str) -> str:
        """Map reference tags to our entity ids (every entity a memory names exists by its clip).

        ``<character_k>`` becomes the tag of the character's first member when
        the graph has mappings; tags naming nothing become plain words.
        """

        def swap(tag: tags.Tag) -> tags.Token | None:
            key = self._member(tag) if tag.kind == "character" else (tag.kind, tag.id)
            if key in self.valid_tags:
                return tags.Tag(tags.TagKind(key[0]), self.report.entity_ids[key[1]])
            self.report.unresolved_tags += 1
            return f"unknown {tag.kind} {tag.id}"

        return tags.rewrite(text, swap)

    def _member(self, tag: tags.Tag) -> tuple[str, int] | None:
        """The first member of a character, looked up once per character (texts may name one many times)."""
        if tag.id not in self.members:
            members = self.graph.character_mappings.get(tag.bare, ())
            found = next((t for m in members for t in tags.find_tags(m)), None)
            self.members[tag.id] = (found.kind, found.id) if found else None
        return self.members[tag.id]

    def _memory(self, writer: ClipWriter, clip: Clip, node: ReferenceNode, text: str, vector: Any) -> None:
        linked = self.links.get(node.id, {})
        weights = set(linked.values())
        if len(weights) > 1:
            shown = sorted(weights)[:6]
            self.report.skipped.append(f"node {node.id}: unequal edge weights {shown}; kept the max")
        ours = tuple(self.report.entity_ids[e] for e in _in_text_order(linked, self._named(node.text)))
        memory = Memory(
            kind=MemoryKind(node.type),
            text=text,
            video_id=clip.video_id,
            clip_index=clip.index,
            start_s=clip.start_s,
            end_s=clip.end_s,
            entity_ids=ours,
            weight=max(weights, default=1.0),
            provenance=f"{PROVENANCE_PREFIX}{node.id}",
            embedding=vector,
        )
        self.report.memory_ids[node.id] = writer.add_memory(memory)
        self.report.edges += len(ours)
        if node.type == "episodic":
            self.report.episodic += 1
        else:
            self.report.semantic += 1
        if node.is_equivalence:
            self._equivalences(writer, node)

    def _equivalences(self, writer: ClipWriter, node: ReferenceNode) -> None:
        named = list(dict.fromkeys(self._named(node.text)))
        kind_of = {n.id: n.tag_kind for n in self.graph.entities()}
        faces = [e for e in named if kind_of[e] == "face"]
        voices = [e for e in named if kind_of[e] == "voice"]
        if not faces or not voices:
            self.report.skipped.append(f"node {node.id}: equivalence naming no face and voice to link")
            return
        ours = self.report.entity_ids
        for face in faces:
            for voice in voices:
                writer.set_link(FaceVoiceLink(ours[face], ours[voice], 1.0, LinkSource.IMPORT,
                                              f"{PROVENANCE_PREFIX}{node.id}"))
                self.report.equivalences += 1


def _in_text_order(entities: Iterable[int], named: list[int]) -> list[int]:
    """``entities`` in the order the text names them, then the unnamed ones by id."""
    position: dict[int, int] = {}
    for index, entity in enumerate(named):
        position.setdefault(entity, index)
    return sorted(entities, key=lambda e: (position.get(e, len(named)), e))


def reference_node_of(memory: Memory) -> int | None:
    """The reference node id an imported memory came from."""
    if not memory.provenance.startswith(PROVENANCE_PREFIX):
        return None
    tail = memory.provenance[len(PROVENANCE_PREFIX) :]
    return int(tail) if tail.isdigit() else None


def _bank(node: ReferenceNode, cap: int, skipped: list[str]) -> list[Any]:
    """Up to ``cap`` float32 vectors picked evenly over the node's embeddings (deterministic)."""
    import numpy as np

    vectors: list[Any] = []
    for position, raw in enumerate(node.embeddings):
        vector = np.asarray(raw, dtype=np.float32).reshape(-1)
        if vector.size == 0 or not np.all(np.isfinite(vector)):
            skipped.append(f"entity node {node.id}: embedding {position} is empty or not finite")
            continue
        vectors.append(vector)
    dims = {v.size for v in vectors}
    if len(dims) > 1:
        common = max(dims, key=lambda d: sum(v.size == d for v in vectors))
        skipped.append(f"entity node {node.id}: embeddings of mixed sizes {sorted(dims)}; kept size {common}")
        vectors = [v for v in vectors if v.size == common]
    return [vectors[i] for i in _evenly(len(vectors), cap)]


def _evenly(n: int, cap: int) -> list[int]:
    if n <= cap:
        return list(range(n))
    return sorted({round(i * (n - 1) / (cap - 1)) for i in range(cap)}) if cap > 1 else [0]


def _jpeg(content: Any) -> bytes | None:
    if not isinstance(content, str | bytes):
        return None
    try:
        data = base64.b64decode(content, validate=False)
    except (binascii.Error, ValueError):
        return None
    return data if data[:3] == b"\xff\xd8\xff" else None


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from a JPEG's start-of-frame marker, without decoding the image."""
    pos = 2
    while pos + 9 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[pos + 5 : pos + 7], "big")
            width = int.from_bytes(data[pos + 7 : pos + 9], "big")
            return width, height
        pos += 2 + length
    return None
