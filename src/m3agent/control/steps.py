"""The typed, frozen steps an agent run yields: Thought, Action, Observation, Answer.

The CLI, the benchmark and the server consume the same stream; every step
has ``to_dict()`` (JSON-serialisable, with a ``"type"`` key). The last step
of a run is always an :class:`Answer`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from m3agent.control.results import ClipRef, SearchResult
from m3agent.domain import ControlMode
from m3agent.llm import Usage


class Provenance(enum.StrEnum):
    """Who decided an answer: the answerer of the grounded chain that answered or abstained."""

    GRAPH = "graph decision"
    """The entity graph's operators carried out the question's plan; no model wrote the answer."""
    GRAPH_FACTS = "graph facts"
    """The model phrased facts of the entity graph (and a few memories)."""
    SPOKEN = "speech lines"
    """The lines said at the question's moment or in its scene are quoted; no model wrote the answer."""
    NOTHING_FOUND = "nothing found"
    """No memory matched the question: an abstention without a model call."""
    ATTRIBUTION = "attribution check"
    """Only other people's memories hold the question's details: an abstention without a model call."""
    MODEL = "model"
    """The model answered from retrieved memories."""
    RERANKER = "reranker"
    """The reranker's first memory is quoted (no model, or its call or reply failed)."""


@dataclass(frozen=True, slots=True)
class Thought:
    """The model's stated reasoning in round ``round`` (1-based)."""

    round: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "thought", "round": self.round, "text": self.text}


@dataclass(frozen=True, slots=True)
class Action:
    """What the model chose: ``search_clip``, ``search_memory`` or ``answer``, with its content."""

    round: int
    tool: str
    content: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "action", "round": self.round, "tool": self.tool, "content": self.content}


@dataclass(frozen=True, slots=True)
class Observation:
    """What the model is told next: search results, or (``error`` set) why its reply was unusable."""

    round: int
    text: str
    result: SearchResult | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "observation",
            "round": self.round,
            "text": self.text,
            "result": None if self.result is None else self.result.to_dict(),
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class Evidence:
    """A memory the answer relied on: ``cited`` by the model, ranked by ``relevance`` to the answer."""

    memory_id: int
    kind: str
    text: str
    clip: ClipRef
    start_s: float
    end_s: float
    entity_ids: tuple[int, ...]
    relevance: float
    cited: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "kind": self.kind,
            "text": self.text,
            "video_id": self.clip.video_id,
            "clip_index": self.clip.index,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "entity_ids": list(self.entity_ids),
            "relevance": round(self.relevance, 6),
            "cited": self.cited,
        }


@dataclass(frozen=True, slots=True)
class Answer:
    """The outcome of a run. ``answered`` is False when the model never gave a usable answer."""

    question: str
    text: str
    answered: bool
    rounds: int
    max_rounds: int
    mode: ControlMode
    searches: tuple[SearchResult, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    clips: tuple[ClipRef, ...] = ()
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    model: str = ""
    video_id: str | None = None
    before_clip: int | None = None
    raw_text: str = ""
    failure: str | None = None
    provenance: Provenance | None = None
    """Which answerer decided (grounded mode; None in modes without a chain)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "answer",
            "question": self.question,
            "text": self.text,
            "answered": self.answered,
            "rounds": self.rounds,
            "max_rounds": self.max_rounds,
            "mode": self.mode,
            "searches": [s.to_dict() for s in self.searches],
            "evidence": [e.to_dict() for e in self.evidence],
            "clips": [c.to_dict() for c in self.clips],
            "usage": self.usage.to_dict(),
            "latency_s": round(self.latency_s, 4),
            "model": self.model,
            "video_id": self.video_id,
            "before_clip": self.before_clip,
            "raw_text": self.raw_text,
            "failure": self.failure,
            "provenance": self.provenance.value if self.provenance is not None else None,
        }


Step = Thought | Action | Observation | Answer
