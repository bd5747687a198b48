"""Evidence of an answer: the returned memories it relied on, cited first, then by relevance.

A memory is *cited* when the model names its id (``[m12]``) in a thought
or in the answer, or names its clip (``CLIP_4``) in the final reply.
Relevance is the cosine between the memory text and "question + answer".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from m3agent.control.results import ClipRef, Hit, SearchResult
from m3agent.control.steps import Evidence

if TYPE_CHECKING:
    from m3agent.embed import Embedder

MEMORY_ID = re.compile(r"\bm(\d+)\b", re.IGNORECASE)
"""A memory id as the model is shown it and cites it (``m12``)."""
CLIP_ID = re.compile(r"\bCLIP_(\d+)\b", re.IGNORECASE)
"""A clip id as the model is shown it (``CLIP_3``)."""
SHOWN_MEMORY_ID = re.compile(r"\s*\[m\d+\]")
"""A memory id as a model copies it from a memory line into an answer (`` [m12]``)."""


def cited_memory_ids(texts: Iterable[str]) -> set[int]:
    return {int(m) for text in texts for m in MEMORY_ID.findall(text)}


def cited_clips(texts: Iterable[str]) -> set[int]:
    return {int(c) for text in texts for c in CLIP_ID.findall(text)}


def returned_hits(searches: Sequence[SearchResult]) -> list[tuple[Hit, ClipRef]]:
    """Every distinct memory the searches returned, with its clip, first occurrence kept."""
    seen: dict[int, tuple[Hit, ClipRef]] = {}
    for result in searches:
        for clip in result.clips:
            for hit in clip.hits:
                seen.setdefault(hit.memory.id, (hit, clip.clip))
    return list(seen.values())


def rank_evidence(
    searches: Sequence[SearchResult],
    embedder: Embedder,
    *,
    question: str,
    answer: str,
    cited_ids: set[int],
    cited_clip_ids: set[int],
    limit: int = 8,
) -> tuple[tuple[Evidence, ...], tuple[ClipRef, ...]]:
    """``(evidence memories, their clips)``: all cited ones, then the most relevant up to ``limit``."""
    hits = returned_hits(searches)
    if not hits:
        return (), ()
    vectors = embedder.embed([f"{question} {answer}", *(hit.text for hit, _ in hits)])
    relevance = [float(v) for v in vectors[1:] @ vectors[0]]
    def is_cited(hit: Hit) -> bool:
        return hit.memory.id in cited_ids or hit.memory.clip_index in cited_clip_ids

    pairs = zip(hits, relevance, strict=True)
    items = [_evidence(hit, clip, rel, is_cited(hit)) for (hit, clip), rel in pairs]
    items.sort(key=lambda e: (not e.cited, -e.relevance, e.memory_id))
    cited = [e for e in items if e.cited]
    chosen = cited + [e for e in items if not e.cited][: max(0, limit - len(cited))]
    clips = tuple(dict.fromkeys(e.clip for e in chosen))
    return tuple(chosen), clips


def _evidence(hit: Hit, clip: ClipRef, relevance: float, memory_cited: bool) -> Evidence:
    memory = hit.memory
    return Evidence(
        memory.id, memory.kind.value, hit.text, clip, memory.start_s, memory.end_s,
        tuple(memory.entity_ids), relevance, memory_cited,
    )  # fmt: skip
