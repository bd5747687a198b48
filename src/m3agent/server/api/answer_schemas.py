"""Response bodies of ``/api/search`` and ``/api/ask``: the JSON of control's ``SearchResult`` and ``Answer``.

The control layer builds these bodies with ``to_dict()`` (the CLI, the MCP
tools and the benchmark share them); the models here type the same fields so
the OpenAPI document describes them. ``date`` of a clip is present only when
the clip has one, so the routes answer with ``response_model_exclude_unset``:
the JSON stays exactly what ``to_dict()`` wrote.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from m3agent.domain import ControlMode, MemoryKind


class ClipRefOut(BaseModel):
    """A clip as evidence: where in which video (``date``: the clip's calendar date, only when recorded)."""

    video_id: str
    clip_index: int
    start_s: float
    end_s: float
    date: str | None = Field(None, description="present only when the video's metadata dates the clip")


class HitOut(BaseModel):
    """A memory a search returned; ``matched`` is false for memories shown only as context of a returned clip."""

    memory_id: int
    kind: MemoryKind
    text: str = Field(description="the memory as the model saw it: tags rewritten to characters and names")
    video_id: str
    clip_index: int
    start_s: float
    end_s: float
    entity_ids: list[int]
    score: float
    similarity: float | None = Field(description="similarity to the query; null when the hit was not ranked by it")
    matched: bool


class ClipHitsOut(ClipRefOut):
    """One clip of a search result with its relevance and its hits."""

    score: float
    hits: list[HitOut]


class SearchOut(BaseModel):
    """One search (a tool call): hits grouped by clip, derived ``facts``, and ``notes`` on restrictions."""

    tool: str = Field(description="search_memory or search_clip")
    query: str
    clips: list[ClipHitsOut]
    facts: list[str] = Field(description="derived statements, e.g. which character a name refers to")
    notes: list[str] = Field(description="restrictions and fallbacks applied to this search")
    repeated: int = Field(description="memories left out because an earlier round already showed them")
    latency_s: float


class EvidenceOut(BaseModel):
    """A memory the answer relied on: ``cited`` by the model, ranked by ``relevance`` to the answer."""

    memory_id: int
    kind: MemoryKind
    text: str
    video_id: str
    clip_index: int
    start_s: float
    end_s: float
    entity_ids: list[int]
    relevance: float
    cited: bool


class UsageOut(BaseModel):
    """Tokens spent answering; ``calls`` counts model requests (retries excluded)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    calls: int


class AnswerOut(BaseModel):
    """An answer with its evidence; ``answered`` is false when the model never gave a usable answer."""

    type: Literal["answer"]
    question: str
    text: str
    answered: bool
    rounds: int
    max_rounds: int
    mode: ControlMode
    searches: list[SearchOut]
    evidence: list[EvidenceOut]
    clips: list[ClipRefOut] = Field(description="the clips of the evidence, in evidence order")
    usage: UsageOut
    latency_s: float
    model: str
    video_id: str | None
    before_clip: int | None
    raw_text: str = Field(description="the model's final reply as written")
    failure: str | None = Field(description="why the answer is empty, when it is")
    provenance: str | None = Field(None, description="which answerer decided, in grounded mode: graph decision, "
                                   "graph facts, nothing found, attribution check, model or reranker")
