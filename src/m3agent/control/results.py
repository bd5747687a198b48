"""Typed, frozen search results shared by the tools, the agent loop and the answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from m3agent.domain import Memory


@dataclass(frozen=True, slots=True)
class ClipRef:
    """A clip as evidence: where in which video. ``date`` is the clip's calendar date when the video's metadata
    records one (conversation logs such as LoCoMo keep a date per session); it answers "when" questions."""

    video_id: str
    index: int
    start_s: float
    end_s: float
    date: str | None = None

    @property
    def label(self) -> str:
        return f"CLIP_{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "video_id": self.video_id,
            "clip_index": self.index,
            "start_s": self.start_s,
            "end_s": self.end_s,
        } | ({"date": self.date} if self.date else {})


@dataclass
class ClipCache:
    """Clip spans (read clip by clip) and dates by video, kept and shared by the searchers of one state of
    the memory (a server's requests, the API's calls) until it changes."""

    spans: dict[str, dict[int, ClipRef | None]] = field(default_factory=dict)  # None: no clip row
    dates: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hit:
    """A memory returned by a search. ``text`` is what the model saw (tags rewritten);
    ``matched`` is False for memories shown only as context of a returned clip."""

    memory: Memory
    text: str
    score: float = 0.0
    similarity: float | None = None
    matched: bool = True

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        return {
            "memory_id": m.id,
            "kind": m.kind.value,
            "text": self.text,
            "video_id": m.video_id,
            "clip_index": m.clip_index,
            "start_s": m.start_s,
            "end_s": m.end_s,
            "entity_ids": list(m.entity_ids),
            "score": round(self.score, 6),
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "matched": self.matched,
        }


@dataclass(frozen=True, slots=True)
class ClipHits:
    """Hits of one clip, with the clip's relevance."""

    clip: ClipRef
    score: float
    hits: tuple[Hit, ...]

    def to_dict(self) -> dict[str, Any]:
        hits = [h.to_dict() for h in self.hits]
        return {**self.clip.to_dict(), "score": round(self.score, 6), "hits": hits}


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One tool call. ``facts`` are derived statements (name <-> character mappings);
    ``notes`` explain restrictions and fallbacks; ``repeated`` counts memories
    left out because an earlier round already showed them."""

    tool: str
    query: str
    clips: tuple[ClipHits, ...] = ()
    facts: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    repeated: int = 0
    latency_s: float = 0.0

    @property
    def hits(self) -> tuple[Hit, ...]:
        return tuple(h for c in self.clips for h in c.hits)

    @property
    def empty(self) -> bool:
        return not self.clips and not self.facts

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "query": self.query,
            "clips": [c.to_dict() for c in self.clips],
            "facts": list(self.facts),
            "notes": list(self.notes),
            "repeated": self.repeated,
            "latency_s": round(self.latency_s, 4),
        }
