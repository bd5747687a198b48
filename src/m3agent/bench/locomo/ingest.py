"""LoCoMo conversations as memories: one video per conversation, one clip per session.

Speakers become voice entities named after them; every dialog turn becomes
one episodic memory ``"<voice_k> said: ..."``, a shared image (given only as
a BLIP caption) in the same memory: ``"... [shared an image: ...]"`` (as a
memory of its own it took a second place in the top k for the same turn).
A reply's vector is computed from the previous turn's line and its own when
that turn asked something ("?"), so it is found by the question it answers;
the memory's text stays its own line.
:data:`INGEST_FORMAT` names the layout in the default store's file name, so a
store written in another layout is not reused.
Each memory's provenance carries its ``dia_id`` so retrieval can be scored
against the evidence ids of the QA items. Sessions have no duration, so each
is laid out as a clip of ``clip_seconds`` with turns evenly spaced in it; the
session dates are kept in the video metadata.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.bench.locomo.data import LocomoSample, Session
from m3agent.domain import Clip, EntityKind, Memory, MemoryKind, Video
from m3agent.memorize.speech_line import said_line

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.store.protocol import ClipWriter, MemoryStore

PROVENANCE_PREFIX = "locomo"
INGEST_FORMAT = 3
"""1: image captions as memories of their own; 2: one memory per turn, its image caption inside; 3: as 2,
a reply's vector computed with the question before it."""


@dataclass(frozen=True, slots=True)
class IngestStats:
    sample_id: str
    sessions: int
    memories: int
    seconds: float


def provenance(sample_id: str, dia_id: str) -> str:
    return f"{PROVENANCE_PREFIX} {sample_id} {dia_id}"


def dia_id_of(memory: Memory) -> str | None:
    """The dialog id a LoCoMo memory came from (``None`` for other memories)."""
    parts = memory.provenance.split()
    return parts[2] if len(parts) >= 3 and parts[0] == PROVENANCE_PREFIX else None


def ingest_sample(
    store: MemoryStore, embedder: Embedder, sample: LocomoSample, clip_seconds: float = 30.0
) -> IngestStats:
    """Write one conversation into ``store`` (the video must not exist yet)."""
    started = time.perf_counter()
    dates = {str(i): s.date for i, s in enumerate(sample.sessions)}
    store.add_video(
        Video(
            sample.sample_id,
            source=f"locomo10.json#{sample.sample_id}",
            duration_s=len(sample.sessions) * clip_seconds,
            title=f"LoCoMo {sample.sample_id}: {sample.speakers[0]} and {sample.speakers[1]}",
            metadata={"benchmark": "locomo", "speakers": list(sample.speakers), "session_dates": dates},
        )
    )
    voices: dict[str, int] = {}
    total = 0
    for index, session in enumerate(sample.sessions):
        clip = Clip(sample.sample_id, index, index * clip_seconds, (index + 1) * clip_seconds)
        total += _ingest_session(store, embedder, sample.sample_id, clip, session, voices)
    return IngestStats(sample.sample_id, len(sample.sessions), total, time.perf_counter() - started)


def _ingest_session(
    store: MemoryStore,
    embedder: Embedder,
    sample_id: str,
    clip: Clip,
    session: Session,
    voices: dict[str, int],
) -> int:
    with store.clip(clip) as writer:
        for speaker in dict.fromkeys(t.speaker for t in session.turns):
            if speaker not in voices:
                voices[speaker] = writer.add_entity(EntityKind.VOICE, [], name=speaker).id
        drafts = list(_drafts(sample_id, clip, session, voices))
        vectors = embedder.embed([context for _, context in drafts])
        _add_all(writer, [memory for memory, _ in drafts], vectors)
    return len(drafts)


def _add_all(writer: ClipWriter, drafts: list[Memory], vectors: Iterable[Any]) -> None:
    from dataclasses import replace

    for draft, vector in zip(drafts, vectors, strict=True):
        writer.add_memory(replace(draft, embedding=vector))


def _drafts(sample_id: str, clip: Clip, session: Session, voices: dict[str, int]) -> Iterable[tuple[Memory, str]]:
    """Memories of one session without embeddings, in turn order, each with the text its vector is computed
    from: after a turn that asks something, that turn's line and then its own (a reply such as "Yes, last
    May!" is found by the question it answers; context from every previous turn measured 0.5 points lower
    recall@10). The memory's text, which keyword search and the answer prompt see, is its own line only."""
    step = clip.duration_s / max(1, len(session.turns))
    question = ""
    for i, turn in enumerate(session.turns):
        voice = voices[turn.speaker]
        start = clip.start_s + i * step
        said = said_line(tags.voice(voice), turn.text)
        if turn.image_caption:
            said += f" [shared an image: {turn.image_caption}]"
        memory = _memory(sample_id, clip, said, voice, start, start + step, provenance(sample_id, turn.dia_id))
        yield memory, f"{question}\n{said}" if question else said
        question = said if "?" in turn.text else ""


def _memory(sample_id: str, clip: Clip, text: str, voice: int, start: float, end: float, source: str) -> Memory:
    return Memory(
        kind=MemoryKind.EPISODIC,
        text=text,
        video_id=sample_id,
        clip_index=clip.index,
        start_s=round(start, 3),
        end_s=round(end, 3),
        entity_ids=(voice,),
        provenance=source,
    )
