"""The graph write rules: how one clip's writer output enters the store.

Called by the pipeline once per clip, inside the clip's transaction, after
identity resolution. In order:

1. The store's embedding model must be the configured embedder's
   (:class:`~m3agent.errors.ConfigError` otherwise: re-embed first).
2. Face-voice equivalences a model stated are recorded when the clip does
   not contradict them (:mod:`.links`), so this clip's facts are already
   compared person by person.
3. Every memory is embedded (one batch).
4. Episodic memories are always inserted.
5. Each semantic fact is compared with ALL semantic facts of its people in
   this video up to this clip (the entities of their characters, through the
   store's adjacency), never with later clips:

   - the same fact (same canonical text, the same attribute value, or cosine
     >= ``merge_similarity`` with a fact about the same set of people)
     reinforces the closest existing one (weight +1, last confirmed clip =
     this clip) instead of being inserted; a fact this clip already wrote or
     confirmed is not counted twice;
   - a fact it contradicts (:mod:`.facts`: another value of a single-valued
     attribute, or the negated statement) loses ``contradiction_penalty`` of
     its weight (not below ``min_weight``); both stay, each with its clips;
   - otherwise the fact is inserted.

   Facts naming nobody are compared with the video's facts naming nobody.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.domain import Memory, MemoryKind, SearchFilter
from m3agent.memorize.consolidation.relations import Relation, canonical, relation
from m3agent.memorize.embedding import check_embedding_model
from m3agent.memorize.links import record_equivalences

if TYPE_CHECKING:
    from m3agent.domain import ClipMedia, ClipSenses
    from m3agent.embed import Embedder
    from m3agent.identity.resolver import ResolvedClip
    from m3agent.memorize import MemoryWriter
    from m3agent.memorize.inputs import ClipInput, WriterOutput
    from m3agent.settings import Settings
    from m3agent.store.protocol import ClipWriter, MemoryStore


@dataclass(frozen=True, slots=True)
class WriteRules:
    merge_similarity: float = 0.9
    contradiction_penalty: float = 0.5
    min_weight: float = 0.1

    @classmethod
    def from_settings(cls, settings: Settings) -> WriteRules:
        memorize = settings.memorize
        return cls(merge_similarity=memorize.merge_similarity, contradiction_penalty=memorize.contradiction_penalty)


@dataclass
class WriteStats:
    """What the rules did with one clip's output (add them up over clips with ``+=``)."""

    episodic: int = 0
    semantic: int = 0
    reinforced: int = 0
    repeated: int = 0
    contradicted: int = 0
    equivalences: int = 0
    notes: list[str] = field(default_factory=list)
    memory_ids: list[int] = field(default_factory=list)

    @property
    def inserted(self) -> int:
        return self.episodic + self.semantic

    def __iadd__(self, other: WriteStats) -> WriteStats:
        for name in ("episodic", "semantic", "reinforced", "repeated", "contradicted", "equivalences"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.notes += other.notes
        self.memory_ids += other.memory_ids
        return self

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("memory_ids")
        return data


def apply_write_rules(store: MemoryStore, writer: ClipWriter, clip_input: ClipInput, output: WriterOutput,
                      embedder: Embedder, rules: WriteRules | None = None) -> WriteStats:
    """Store ``output`` for the clip of ``writer`` (see the module docstring); returns what happened."""
    rules = rules or WriteRules()
    check_embedding_model(store, embedder)
    stats = WriteStats(notes=list(output.dropped))
    stats.equivalences, refused = record_equivalences(store, writer, clip_input, output.equivalences)
    stats.notes += refused
    clip = writer.clip
    characters = store.characters(before_clip=clip.index, video_id=clip.video_id)
    facts = _Facts(store, writer, rules, {e: c.id for c in characters for e in c.entity_ids},
                   {e: c.entity_ids for c in characters for e in c.entity_ids}, stats)
    for memory in embedded(embedder, output.memories):
        if memory.kind == MemoryKind.EPISODIC:
            stats.memory_ids.append(writer.add_memory(memory))
            stats.episodic += 1
        else:
            facts.write(memory)
    return stats


def write_facts(store: MemoryStore, writer: ClipWriter, facts: list[Memory], rules: WriteRules | None = None,
                stats: WriteStats | None = None) -> list[int]:
    """Semantic ``facts`` (embedded, of ``writer``'s clip) through the merge rules of step 5 above; returns,
    per fact, the id of the stored fact it became (inserted, or the one it reinforced or repeated)."""
    clip = writer.clip
    characters = store.characters(before_clip=clip.index, video_id=clip.video_id)
    merger = _Facts(store, writer, rules or WriteRules(), {e: c.id for c in characters for e in c.entity_ids},
                    {e: c.entity_ids for c in characters for e in c.entity_ids},
                    stats if stats is not None else WriteStats())
    return [merger.write(fact) for fact in facts]


def embedded(embedder: Embedder, memories: tuple[Memory, ...] | list[Memory]) -> list[Memory]:
    """The memories with their text embeddings attached (one batch)."""
    if not memories:
        return []
    vectors = embedder.embed([m.text for m in memories])
    return [dataclasses.replace(m, embedding=v) for m, v in zip(memories, vectors, strict=True)]


@dataclass
class _Facts:
    """Semantic merge of one clip's facts."""

    store: MemoryStore
    writer: ClipWriter
    rules: WriteRules
    character_of: dict[int, int]
    members: dict[int, tuple[int, ...]]
    stats: WriteStats
    touched: set[int] = field(default_factory=set)

    def write(self, fact: Memory) -> int:
        """Insert ``fact`` or reinforce its closest equal; returns the id of the stored fact it became."""
        text = canonical(fact.text, self.character_of)
        people = self._people(fact)
        same: list[tuple[float, Memory]] = []
        for old in self._related(fact):
            found = relation(text, canonical(old.text, self.character_of))
            if found is Relation.CONTRADICTS:
                self.writer.weaken(old.id, self.rules.contradiction_penalty, self.rules.min_weight)
                self.stats.contradicted += 1
                self.stats.notes.append(f"{fact.text!r} contradicts memory {old.id} {old.text!r}")
                continue
            score = _cosine(fact, old)
            if self._people(old) == people and (found is Relation.SAME or score >= self.rules.merge_similarity):
                same.append((score, old))
        if not same:
            memory_id = self.writer.add_memory(fact)
            self.touched.add(memory_id)
            self.stats.memory_ids.append(memory_id)
            self.stats.semantic += 1
            return memory_id
        best = max(same, key=lambda pair: (pair[0], -pair[1].id))[1]
        if best.id in self.touched:
            self.stats.repeated += 1
            return best.id
        self.writer.reinforce(best.id, 1.0)
        self.touched.add(best.id)
        self.stats.reinforced += 1
        return best.id

    def _people(self, memory: Memory) -> frozenset[int]:
        return frozenset(self.character_of.get(e, -1 - e) for e in memory.entity_ids)

    def _related(self, fact: Memory) -> list[Memory]:
        """Semantic memories of the fact's people (all their entities) in this video, up to this clip."""
        clip = self.writer.clip
        flt = SearchFilter(video_ids=(clip.video_id,), before_clip=clip.index, kinds=(MemoryKind.SEMANTIC,))
        if not fact.entity_ids:
            return [m for m in self.store.memories(video_id=clip.video_id, flt=flt) if not m.entity_ids]
        entities = sorted({m for e in fact.entity_ids for m in self.members.get(e, (e,))})
        return self.store.memories_of_entities(entities, flt)


def _cosine(a: Memory, b: Memory) -> float:
    if a.embedding is None or b.embedding is None:
        return 0.0
    return float(a.embedding @ b.embedding)


def memorize_clip(store: MemoryStore, writer: ClipWriter, memory_writer: MemoryWriter, media: ClipMedia,
                  resolved: ResolvedClip, embedder: Embedder, *, fps: float,
                  rules: WriteRules | None = None,
                  senses: ClipSenses | None = None) -> tuple[WriterOutput, WriteStats]:
    """Build the clip's writer input, write its memories and apply the rules (inside ``writer``'s transaction).

    Errors of the memory writer (:class:`~m3agent.errors.MalformedReplyError`,
    :class:`~m3agent.errors.EndpointError`) propagate: the clip is then failed, not half-written.
    """
    from m3agent.memorize.inputs import clip_input

    inp = clip_input(store, media, resolved, fps, senses)
    output = memory_writer.write(inp)
    return output, apply_write_rules(store, writer, inp, output, embedder, rules)
