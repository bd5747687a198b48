"""The agent's search tools over a memory store: ``search_clip`` and ``search_memory``.

One :class:`MemorySearcher` serves one question: it fixes the visible part
of the store (``video_id``, ``before_clip``: no memory of a later clip is
ever returned), keeps the character index, and remembers what earlier
rounds returned so repeated queries bring the next-best results:

- ``search_clip`` ranks clips by their best-matching memory and returns each
  clip's memories; clips already returned are excluded *before* the top-k
  cut (the reference cut first and then removed, returning nothing).
- ``search_memory`` returns individual memories, excluding ones shown before.
- A query naming characters (tag or known name) is restricted to memories
  linked to their entities; a name<->character question is answered from
  names; a time phrase or ``CLIP_n`` restricts the time range.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.control.people import mapping
from m3agent.control.people.characters import CharacterIndex, build_index
from m3agent.control.reading import read_question
from m3agent.control.results import ClipCache, ClipHits, ClipRef, Hit, SearchResult
from m3agent.control.retrieval.query import Intent, ParsedQuery, parse_query
from m3agent.control.retrieval.ranking import (
    Ranked,
    alias_variants,
    closeness,
    hybrid_rank,
    in_own_words,
    keyword_text,
    with_clip_context,
    without_names,
)
from m3agent.domain import Memory, SearchFilter
from m3agent.errors import ConfigError, M3AgentError
from m3agent.text import clock

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.store.protocol import MemoryStore

TOOLS = ("search_clip", "search_memory")


def is_bookkeeping(memory: Memory) -> bool:
    """Equivalence lines record identity links for the store; the agent never sees them."""
    return memory.text.lstrip().lower().startswith("equivalence")


class MemorySearcher:
    """Search tools for one question over the visible part of ``store``."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        *,
        video_id: str | None = None,
        before_clip: int | None = None,
        index: CharacterIndex | None = None,
        pool: int = 60,
        min_similarity: float = 0.2,
        clips: ClipCache | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.video_id = video_id
        self.before_clip = before_clip
        self.index = index or build_index(store, video_id=video_id, before_clip=before_clip)
        self.pool = pool
        self.min_similarity = min_similarity
        self.seen_clips: set[tuple[str, int]] = set()
        self.shown: set[int] = set()
        cache = clips if clips is not None else ClipCache()  # shared when the caller keeps one per memory state
        self._clip_spans, self._dates = cache.spans, cache.dates
        self._duration = self._video_duration()

    # tools ------------------------------------------------------------------
    def search(self, tool: str, query: str, k: int) -> SearchResult:
        """Run ``tool`` (one of :data:`TOOLS`) and time it."""
        if tool not in TOOLS:
            raise ConfigError(f"unknown search tool {tool!r}", hint=f"use one of: {', '.join(TOOLS)}")
        started = time.perf_counter()
        result = self.search_clip(query, k) if tool == "search_clip" else self.search_memory(query, k)
        return replace(result, latency_s=time.perf_counter() - started)

    def search_clip(self, query: str, k: int = 2) -> SearchResult:
        """Top-``k`` unseen clips by their best memory, each with all its visible memories."""
        parsed = parse_query(query, self.index, self._duration)
        if parsed.intent is not Intent.SEARCH:
            return self._mapping("search_clip", parsed, k)
        if parsed.clips:
            return self._explicit_clips("search_clip", parsed)
        ranked, notes = self._ranked(parsed, exclude_seen=True)
        best: dict[tuple[str, int], Ranked] = {}
        for item in ranked:
            best.setdefault((item.memory.video_id, item.memory.clip_index), item)
        ordered = sorted(best.items(), key=lambda kv: -kv[1].score)
        clips, repeated = self._whole_clips([(key, item.score, item) for key, item in ordered], parsed, k)
        return SearchResult("search_clip", query, tuple(clips), notes=notes, repeated=repeated)

    def search_memory(self, query: str, k: int = 10) -> SearchResult:
        """Top-``k`` individual memories not shown in earlier rounds, grouped by clip."""
        parsed = parse_query(query, self.index, self._duration)
        if parsed.intent is not Intent.SEARCH:
            return self._mapping("search_memory", parsed, k)
        if parsed.clips:
            return self._explicit_clips("search_memory", parsed)
        ranked, notes = self._ranked(parsed, exclude_seen=False, moment=read_question(query).moment)
        fresh = [r for r in ranked if r.memory.id not in self.shown]
        repeated = len(ranked) - len(fresh)
        hits = [Hit(r.memory, self._text(r.memory), r.score, r.similarity) for r in fresh[:k]]
        self.shown.update(h.memory.id for h in hits)
        return SearchResult("search_memory", query, self._group(hits), notes=notes, repeated=repeated)

    # filters and ranking ----------------------------------------------------
    def base_filter(self) -> SearchFilter:
        """What this question may see: its video, clips up to ``before_clip``."""
        videos = (self.video_id,) if self.video_id else None
        return SearchFilter(video_ids=videos, before_clip=self.before_clip)

    def visible(self, memory: Memory) -> bool:
        """Causality and scope, checked again on every result whatever the store did."""
        if self.before_clip is not None and memory.clip_index > self.before_clip:
            return False
        if self.video_id is not None and memory.video_id != self.video_id:
            return False
        return not is_bookkeeping(memory)

    def _ranked(self, parsed: ParsedQuery, *, exclude_seen: bool,
                moment: float | None = None) -> tuple[list[Ranked], tuple[str, ...]]:
        flt = replace(self.base_filter(), start_s=parsed.start_s, end_s=parsed.end_s)
        if exclude_seen:
            flt = replace(flt, exclude_clips=frozenset(self.seen_clips))
        notes = _time_notes(parsed)
        if parsed.entity_ids:
            ranked = self._rank(parsed, replace(flt, entity_ids=parsed.entity_ids), restricted=True, moment=moment)
            if ranked:
                return ranked, (*notes, f"restricted to memories of {self._who(parsed)}")
            notes += (f"nothing found for {self._who(parsed)}; searched all memories",)
        return self._rank(parsed, flt, restricted=False, moment=moment), notes

    def _rank(self, parsed: ParsedQuery, flt: SearchFilter, *, restricted: bool,
              moment: float | None = None) -> list[Ranked]:
        """The fused ranking under ``flt``, visible memories only; unless ``restricted``, a memory needs a keyword
        or enough similarity, or to lie at the question's ``moment`` (what is there is what "at 1:20" asks
        about, whatever its words)."""
        # restricted: who is settled by the entity filter, so the vector asks only what, in the person's own
        # words and without the names; the alias variants (names as <voice_j> tags) measured 3 points of LoCoMo
        # recall@10 lower
        variants = _restricted_variants(parsed) if restricted else []
        if not variants:
            variants = alias_variants(parsed.text, self.index, parsed.names)
        # names became an entity restriction; as keywords they would favour name statements
        keywords = keyword_text(parsed.text, drop=parsed.names if restricted else ())
        pool = self.pool + len(self.shown)  # shown memories are filtered after ranking
        ranked = hybrid_rank(self.store, self.embedder, variants, keywords, flt, pool=pool)
        # only what may be shown lends its clip context (not bookkeeping, nothing past the question's time)
        return with_clip_context([r for r in ranked if self.visible(r.memory)
                                  and (restricted or self._relevant(r) or _at(r.memory, moment))])

    def _relevant(self, item: Ranked) -> bool:
        return item.keyword or item.similarity is None or item.similarity >= self.min_similarity

    # building results -------------------------------------------------------
    def _whole_clips(
        self,
        candidates: Sequence[tuple[tuple[str, int], float, Ranked | None]],
        parsed: ParsedQuery,
        k: int | None = None,
    ) -> tuple[list[ClipHits], int]:
        """Up to ``k`` clips with their visible memories (episodic first), best candidates first.

        Memories shown before are counted, not repeated; a clip with nothing
        new is marked seen but does not take one of the ``k`` places.
        """
        clips: list[ClipHits] = []
        repeated = 0
        for (video_id, index), score, best in candidates:
            if k is not None and len(clips) >= k:
                break
            self.seen_clips.add((video_id, index))
            memories = self._clip_memories(video_id, index, parsed)
            fresh = [m for m in memories if m.id not in self.shown]
            repeated += len(memories) - len(fresh)
            hits = tuple(self._context_hit(m, best) for m in fresh)
            self.shown.update(m.id for m in fresh)
            if hits:
                clips.append(ClipHits(self.clip_ref(video_id, index, memories), score, hits))
        return clips, repeated

    def _clip_memories(self, video_id: str, index: int, parsed: ParsedQuery) -> list[Memory]:
        flt = replace(self.base_filter(), start_s=parsed.start_s, end_s=parsed.end_s)
        memories = [m for m in self.store.memories(video_id, index, flt) if self.visible(m)]
        return sorted(memories, key=lambda m: (m.kind.value != "episodic", m.id))

    def _context_hit(self, memory: Memory, best: Ranked | None) -> Hit:
        if best is not None and memory.id == best.memory.id:
            return Hit(memory, self._text(memory), best.score, best.similarity)
        return Hit(memory, self._text(memory), 0.0, None, matched=False)

    def _explicit_clips(self, tool: str, parsed: ParsedQuery) -> SearchResult:
        """``CLIP_n`` in a query: return those clips (within the visible range)."""
        videos = [self.video_id] if self.video_id else [v.video_id for v in self.store.videos()]
        wanted = [c for c in parsed.clips if self.before_clip is None or c <= self.before_clip]
        notes = tuple(f"CLIP_{c} is after the question time" for c in parsed.clips if c not in wanted)
        top = [((video, c), 1.0, None) for video in videos for c in wanted]
        clips, repeated = self._whole_clips(top, parsed)
        return SearchResult(tool, parsed.raw, tuple(clips), notes=notes, repeated=repeated)

    def _mapping(self, tool: str, parsed: ParsedQuery, k: int) -> SearchResult:
        facts, support = mapping.answer_mapping(self, parsed, k)
        fresh = [m for m in support if m.id not in self.shown and self.visible(m)]
        self.shown.update(m.id for m in fresh)
        hits = [Hit(m, self._text(m), 1.0, None) for m in fresh]
        return SearchResult(tool, parsed.raw, self._group(hits), facts=tuple(facts))

    def _group(self, hits: Iterable[Hit]) -> tuple[ClipHits, ...]:
        """Hits grouped by clip; clips ordered by their best hit (relevance, not clip id)."""
        groups: dict[tuple[str, int], list[Hit]] = {}
        for hit in hits:
            groups.setdefault((hit.memory.video_id, hit.memory.clip_index), []).append(hit)
        return tuple(
            ClipHits(self.clip_ref(v, c, [h.memory for h in hs]), max(h.score for h in hs), tuple(hs))
            for (v, c), hs in groups.items()
        )

    def _text(self, memory: Memory) -> str:
        return self.index.with_names(memory.text)

    def _who(self, parsed: ParsedQuery) -> str:
        return ", ".join(tags.character(c) for c in parsed.characters) or "the named entities"

    # clip metadata ----------------------------------------------------------
    def clip_ref(self, video_id: str, index: int, memories: Sequence[Memory] = ()) -> ClipRef:
        """Clip times from the store, else the span of ``memories`` (a clip row may be missing). Read clip by
        clip and kept (``ClipCache``): reading a 250-clip video whole for the one clip shown cost 2-4 ms."""
        dates = self._dates.get(video_id)
        if dates is None:
            dates = self._dates[video_id] = self._clip_dates(video_id)
        spans = self._clip_spans.setdefault(video_id, {})
        if index not in spans:
            clip = self.store.recorded_clip(video_id, index)
            spans[index] = None if clip is None else ClipRef(video_id, index, clip.start_s, clip.end_s,
                                                             dates.get(str(index)))
        found = spans[index]
        if found is not None:
            return found
        start = min((m.start_s for m in memories), default=-1.0)
        end = max((m.end_s for m in memories), default=-1.0)
        return ClipRef(video_id, index, start, end, dates.get(str(index)))

    def _clip_dates(self, video_id: str) -> dict[str, str]:
        """Clip index -> calendar date from the video's metadata (``session_dates``); empty when it has none."""
        try:
            found = self.store.get_video(video_id).metadata.get("session_dates")
        except M3AgentError:
            return {}
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def _video_duration(self) -> float | None:
        if self.video_id is None:
            return None
        return self.store.get_video(self.video_id).duration_s


def _at(memory: Memory, moment: float | None) -> bool:
    """Whether ``memory`` lies at the instant a question asks about
    (:func:`~m3agent.control.retrieval.ranking.closeness`)."""
    return moment is not None and closeness(memory.start_s, memory.end_s, moment) >= 1.0


def _restricted_variants(parsed: ParsedQuery) -> list[str]:
    """The vector queries of a search restricted to the people named: the question in their own words (their
    speech is stored quoted, in the first person), then without the names (what is said about them)."""
    variants = [in_own_words(parsed.text, parsed.names), without_names(parsed.text, parsed.names)]
    return [v for v in dict.fromkeys(variants) if v]


def _time_notes(parsed: ParsedQuery) -> tuple[str, ...]:
    if parsed.start_s is None and parsed.end_s is None:
        return ()
    end = "end" if parsed.end_s is None else clock(parsed.end_s)
    return (f"time range {clock(parsed.start_s or 0.0)}-{end}",)
