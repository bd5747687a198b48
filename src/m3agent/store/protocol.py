"""The memory-store contract every backend fulfils (the SQLite file and PostgreSQL + pgvector).

Conventions:
- Entity ids (faces and voices) share one id space, so ``<face_3>`` and
  ``<voice_3>`` never both exist; memory ids are a separate space.
- All writes that belong to one clip go through :meth:`MemoryStore.clip`,
  a transaction: either every row of the clip is stored and the clip is
  marked done, or nothing of it is.
- Embeddings are float32 vectors; memories are L2-normalised text vectors
  of the dimension recorded in the store's metadata (see ``embedding_model``).
- ``before_clip`` is inclusive and applies to the memory's ``clip_index``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from m3agent.domain import (
    Character,
    Clip,
    ClipStatus,
    ConsolidatedClip,
    Entity,
    EntityAttribute,
    EntityKind,
    EntityMerge,
    FaceObservation,
    FaceVoiceLink,
    ForgottenConsolidation,
    Memory,
    MergedEntity,
    ScoredMemory,
    SearchFilter,
    ShotRecord,
    Video,
    VoiceSegment,
)

if TYPE_CHECKING:
    from m3agent.domain import Vector


class EmbeddingModel(NamedTuple):
    """The text embedder a memory's vectors were made with."""

    name: str
    dim: int


class ClipRecord(NamedTuple):
    """A recorded clip with its status and the reason of a failed or skipped one."""

    clip: Clip
    status: ClipStatus
    reason: str


class FaceSighting(NamedTuple):
    """An identified face observation: when, and whose face."""

    time_s: float
    entity_id: int


class MouthMotion(NamedTuple):
    """An identified face observation whose mouth motion was measured (the active-speaker cue)."""

    time_s: float
    entity_id: int
    motion: float


class VoiceSpan(NamedTuple):
    """An identified voice segment: its span and whose voice."""

    start_s: float
    end_s: float
    entity_id: int


@runtime_checkable
class ClipWriter(Protocol):
    """Writes of one clip, committed together when the ``with`` block ends cleanly."""

    clip: Clip

    def add_memory(self, memory: Memory) -> int:
        """Insert a memory (embedding required) with edges to its ``entity_ids``; returns its id."""
        ...

    def reinforce(self, memory_id: int, delta: float = 1.0) -> None:
        """Add ``delta`` to a memory's weight and record this clip as its last confirmation."""
        ...

    def weaken(self, memory_id: int, amount: float, floor: float = 0.1) -> None:
        """Lower a (contradicted) memory's weight by ``amount``, not below ``floor``; its clip span stays."""
        ...

    def add_entity(self, kind: EntityKind, embeddings: Sequence[Vector], name: str = "") -> Entity:
        """Create a face/voice entity first seen in this clip, with its initial embedding bank."""
        ...

    def update_entity_bank(self, entity_id: int, embeddings: Sequence[Vector]) -> None:
        """Replace an entity's embedding bank (the caller chose the exemplars deterministically)."""
        ...

    def add_face(self, face: FaceObservation) -> int:
        """Store a face observation (crop as JPEG blob if present)."""
        ...

    def add_voice(self, segment: VoiceSegment, audio_wav: bytes | None = None) -> int:
        """Store a voice segment with its transcript and optional WAV snippet (see media.snippets)."""
        ...

    def set_link(self, link: FaceVoiceLink) -> None:
        """Record face-voice evidence (the latest of a pair wins; confidence 0 revokes it).

        Raises :class:`~m3agent.errors.IntegrityError` unless ``face_id`` is a face entity and
        ``voice_id`` a voice entity.
        """
        ...

    def merge_entities(self, keep: int, absorb: int, evidence: str) -> int:
        """Automatic merge of ``absorb`` into ``keep`` in this clip's transaction, recorded with
        ``evidence`` (see :meth:`MemoryStore.undo_merge`); returns the record id."""
        ...

    def add_attribute(self, attribute: EntityAttribute) -> int:
        """Store a measured description of an entity seen or heard in this clip (one per entity and name: a
        second replaces the first); returns its id. Raises :class:`~m3agent.errors.IntegrityError` for an
        unknown entity, a confidence outside [0, 1] or a negative weight."""
        ...

    def add_shot(self, shot: ShotRecord) -> None:
        """Store a shot of this clip with whether it shows a still picture or live video."""
        ...

    def record_timing(self, stage: str, seconds: float) -> None:
        """Per-stage wall time of this clip (perception, memorize, ...)."""
        ...


@runtime_checkable
class ConsolidationWriter(ClipWriter, Protocol):
    """Writes of one clip's consolidation (:meth:`MemoryStore.consolidation`): semantic memories attached
    to the clip, reinforced or weakened facts, their sources; ``notes`` are recorded with the clip."""

    notes: list[str]
    seconds: float | None  # wall seconds of the whole unit (model call included), set by the caller

    def add_sources(self, memory_id: int, source_ids: Sequence[int]) -> None:
        """Record the episodic memories ``source_ids`` as provenance of memory ``memory_id`` (repeats ignored).

        Raises :class:`~m3agent.errors.IntegrityError` for a source that is not an episodic memory of this
        video up to this clip (a fact never rests on a later clip).
        """
        ...


@runtime_checkable
class MemoryStore(Protocol):
    """Graph + vectors + media of one memory file or database."""

    url: str
    link_confidence: float  # links from this confidence on form characters (settings.perception)

    # lifecycle -----------------------------------------------------------
    def close(self) -> None: ...

    def __enter__(self) -> MemoryStore: ...

    def __exit__(self, *exc: object) -> None: ...

    def schema_version(self) -> int: ...

    def embedding_model(self) -> EmbeddingModel | None:
        """``(name, dim)`` of the text embeddings stored, or ``None`` while empty."""
        ...

    def set_embedding_model(self, name: str, dim: int) -> None:
        """Record the text embedder; raises if memories of another model/dim exist."""
        ...

    # videos and clips ----------------------------------------------------
    def add_video(self, video: Video) -> None:
        """Register a video; re-adding an existing id updates source/duration/title. A different file (both
        fingerprints known and unequal) under a stored id raises :class:`~m3agent.errors.VideoMismatchError`."""
        ...

    def get_video(self, video_id: str) -> Video: ...

    def videos(self) -> list[Video]: ...

    def clip(self, clip: Clip) -> AbstractContextManager[ClipWriter]:
        """Open the transactional writer of ``clip``; its video must exist."""
        ...

    def mark_clip(self, clip: Clip, status: ClipStatus, reason: str = "") -> None:
        """Record a clip as failed/skipped (in its own transaction); a done clip stays done."""
        ...

    def video_lock(self, video_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> AbstractContextManager[None]:
        """The writer lock of a video, across processes; held by an ingest for its whole run.

        Busy: with ``wait``, ``on_wait`` gets a message naming the holder and the
        call blocks until it is free; without, :class:`StoreError` is raised.
        A lock of a process that died is free again.
        """
        ...

    def consolidation(self, clips: Sequence[Clip], model: str) -> AbstractContextManager[ConsolidationWriter]:
        """The transaction writing what ``model`` consolidated from ``clips`` (done clips of one video, none
        consolidated yet, in index order; :class:`IntegrityError` otherwise). The writer writes as the last
        clip: facts are attached to it. When the block ends cleanly every clip is recorded as consolidated
        (the writer's ``notes`` with the last, the block's seconds shared out); nothing of it otherwise."""
        ...

    def consolidated_clips(self, video_id: str) -> dict[int, ConsolidatedClip]:
        """The consolidated clips of a video by index."""
        ...

    def forget_consolidation(self, video_id: str) -> ForgottenConsolidation:
        """Take back the consolidation of ``video_id`` in one transaction (``m3agent consolidate --redo``):
        delete the facts it wrote (semantic memories of the video whose provenance starts ``consolidate/``),
        the sources it recorded on memories that stay, and the record of its consolidated clips; put back the
        weight and last confirmed clip of the memories it reinforced or weakened (as recorded by the
        consolidation writer). Semantic memories written otherwise (names the perception writer stored) stay.
        The caller holds the video's writer lock; :class:`NotFoundError` for an unknown video."""
        ...

    def memory_sources(self, memory_ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
        """The recorded sources (episodic memory ids, ascending) of each of ``memory_ids`` that has any."""
        ...

    def clips(self, video_id: str) -> list[ClipRecord]:
        """Recorded clips of a video in index order, with status and reason."""
        ...

    def recorded_clip(self, video_id: str, index: int) -> Clip | None:
        """Clip ``index`` of a video if it is recorded (not pending), else None: one row, where :meth:`clips`
        reads them all (a search shows a few clips of videos that may have thousands)."""
        ...

    def delete_video(self, video_id: str) -> None:
        """Remove the video and every row and blob derived from it."""
        ...

    # entities and characters --------------------------------------------
    def entities(self, kind: EntityKind | None = None) -> list[Entity]: ...

    def get_entity(self, entity_id: int) -> Entity: ...

    def entity_bank(self, entity_id: int) -> list[Vector]:
        """The stored embedding exemplars of an entity."""
        ...

    def entity_crops(self, entity_id: int, limit: int = 3) -> list[bytes]:
        """Best face crops (JPEG) of a face entity."""
        ...

    def entity_snippets(self, entity_id: int, limit: int = 3) -> list[bytes]:
        """Voice snippets (WAV) of a voice entity, from its longest segments first."""
        ...

    def rename_entity(self, entity_id: int, name: str) -> None: ...

    def merge_entities(self, keep: int, absorb: int) -> None:
        """Fold ``absorb`` into ``keep``: observations, edges and tags in memory text move over."""
        ...

    def split_entity(self, entity_id: int, observation_ids: Sequence[int]) -> Entity:
        """Move the given face/voice observations to a new entity of the same kind."""
        ...

    def link_entities(self, link: FaceVoiceLink) -> None:
        """Record a face-voice link made by hand (the latest link of a pair wins; confidence 0 revokes it).

        Raises :class:`~m3agent.errors.IntegrityError` unless ``face_id`` is a face entity and ``voice_id`` a
        voice entity, :class:`~m3agent.errors.NotFoundError` for an unknown id.
        """
        ...

    def voice_audio(self, voice_id: int) -> bytes | None:
        """The WAV snippet stored with voice segment ``voice_id`` (None when none was kept);
        :class:`~m3agent.errors.NotFoundError` for an unknown segment."""
        ...

    def face_crop(self, face_id: int) -> bytes | None:
        """The crop (JPEG) of face observation ``face_id``: its own, else the nearest in time of its track in the
        same clip and entity (only a track's chosen frames keep one); None when the track kept none,
        :class:`~m3agent.errors.NotFoundError` for an unknown observation."""
        ...

    def observations_with_media(self, kind: EntityKind, observation_ids: Sequence[int]) -> set[int]:
        """Those of ``observation_ids`` that :meth:`face_crop` (faces) or :meth:`voice_audio` (voice segments)
        would answer with bytes: what a page can show without a broken image or a silent ▶."""
        ...

    def merged_entity(self, merge_id: int) -> MergedEntity | None:
        """What merge ``merge_id`` recorded of the entity it absorbed; None when undone or unknown."""
        ...

    def entity_merges(self) -> list[EntityMerge]:
        """Every recorded merge (by hand or automatic), oldest first."""
        ...

    def merge_of_character(self, character_id: int) -> EntityMerge | None:
        """The newest merge not undone that took character id ``character_id`` away (one of its two entities
        held that id before it), so a page of that character can lead to where the person went; None when no
        merge did."""
        ...

    def undo_merge(self, merge_id: int) -> Entity:
        """Bring back the entity a recorded merge absorbed, under its old id, with its observations,
        bank, edges, links and the memory text the merge rewrote (where unchanged since); the pair is
        then never merged automatically again. Returns the restored entity."""
        ...

    def delete_entity(self, entity_id: int) -> None:
        """Remove the entity, its embeddings, crops, snippets, edges and links, and what memory text
        says about it: memories about it alone (and link bookkeeping lines naming it) are deleted, its
        tag in other memories becomes "someone"."""
        ...

    def entity_attributes(self, entity_ids: Sequence[int]) -> list[EntityAttribute]:
        """The measured descriptions of ``entity_ids``, by entity, video, clip, name and id. A merge hands the
        absorbed entity's rows to the kept one (an undo hands them back); a split moves a clip's rows with the
        majority of that clip's observations, their weight scaled to the share moved or kept."""
        ...

    def shots(self, video_id: str) -> list[ShotRecord]:
        """The stored shots of a video (with still or live), in time order."""
        ...

    def links(self, min_confidence: float = 0.0) -> list[FaceVoiceLink]:
        """The latest link of every face-voice pair with at least ``min_confidence``, by (face, voice)."""
        ...

    def characters(self, before_clip: int | None = None, video_id: str | None = None) -> list[Character]:
        """Entities grouped by links of at least ``link_confidence``; ids stay stable as evidence grows."""
        ...

    # memories ------------------------------------------------------------
    def get_memory(self, memory_id: int) -> Memory: ...

    def memories(
        self, video_id: str | None = None, clip_index: int | None = None, flt: SearchFilter | None = None
    ) -> list[Memory]:
        """Memories in (video, clip, id) order, optionally restricted."""
        ...

    def memories_containing(self, fragments: Sequence[str], flt: SearchFilter | None = None) -> list[Memory]:
        """Memories passing ``flt`` whose text contains any of ``fragments`` (case-sensitive, as ``in``), in
        (video, clip, id) order; the store tests the text, so only the matching rows are read whole."""
        ...

    def memories_of_entities(self, entity_ids: Sequence[int], flt: SearchFilter | None = None) -> list[Memory]:
        """Memories linked to any of ``entity_ids`` (through the indexed adjacency)."""
        ...

    def delete_memory(self, memory_id: int) -> None:
        """Remove the memory, its edges and index entries, and the transcript (text and words) of the
        voice segments it quotes: segments of its clip spoken by a voice it names, inside its span,
        whose text it contains."""
        ...

    def compact(self) -> None:
        """Rewrite the memory's files so that deleted rows leave no bytes behind (SQLite: VACUUM;
        PostgreSQL: VACUUM FULL, which locks each table while it is rewritten)."""
        ...

    def adjust_weight(self, memory_id: int, delta: float) -> None: ...

    def faces(self, video_id: str, clip_index: int | None = None) -> list[FaceObservation]: ...

    def voices(self, video_id: str, clip_index: int | None = None) -> list[VoiceSegment]: ...

    def face_sightings(self, video_id: str) -> list[FaceSighting]:
        """``(time_s, entity_id)`` of every identified face observation of a video, in time order.

        The narrow view face-voice linking reads after every clip: no embeddings, no crops.
        """
        ...

    def mouth_motions(self, video_id: str) -> list[MouthMotion]:
        """``(time_s, entity_id, mouth_motion)`` of every identified face sighting of a video whose
        mouth motion was measured, in time order (the active-speaker cue face-voice linking reads)."""
        ...

    def voice_spans(self, video_id: str) -> list[VoiceSpan]:
        """``(start_s, end_s, entity_id)`` of every identified voice segment of a video, in time order."""
        ...

    # search --------------------------------------------------------------
    def vector_search(self, query: Vector, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` memories by cosine similarity that pass ``flt``, best first."""
        ...

    def vector_search_best(self, queries: Sequence[Vector], k: int,
                           flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` memories by their best cosine over ``queries`` that pass ``flt``, best first."""
        ...

    def keyword_search(self, query: str, k: int, flt: SearchFilter | None = None) -> list[ScoredMemory]:
        """Top-``k`` memories by BM25 (FTS5 / tsvector) that pass ``flt``, best first."""
        ...

    def reembed_memories(
        self,
        name: str,
        dim: int,
        embed: Callable[[list[str]], Iterable[Vector]],
        *,
        batch: int = 256,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Replace every memory's embedding by ``embed(texts)`` (batches in id order) and record the
        model ``name``/``dim``, all in one transaction; returns the number of memories re-embedded.
        ``progress(done, total)`` is called after each batch."""
        ...

    def iter_memory_vectors(self, flt: SearchFilter | None = None) -> Iterator[tuple[int, Vector]]:
        """All (memory id, embedding) pairs passing ``flt`` (for re-embedding and export)."""
        ...
