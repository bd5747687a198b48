"""The run context: what every control mode receives for one question.

A mode is a function ``RunContext -> Iterator[Step]`` (the table is in
:mod:`m3agent.control.answering`). The context owns the tools (the
:class:`~m3agent.control.retrieval.search.MemorySearcher` scoped to ``video_id`` and
``before_clip``, the chat model), the spending (usage, latency), what the run
has seen (searches, thoughts), and the one way to end a run
(:meth:`RunContext.finish`), so every mode yields the same :class:`Answer`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.control.reading import QuestionReading, read_question
from m3agent.control.retrieval.evidence import CLIP_ID, SHOWN_MEMORY_ID, cited_clips, cited_memory_ids, rank_evidence
from m3agent.control.retrieval.search import MemorySearcher
from m3agent.control.steps import Answer
from m3agent.errors import ConfigError
from m3agent.llm import ChatModel, ChatReply, Usage
from m3agent.settings import MediaSettings
from m3agent.text import clock

if TYPE_CHECKING:
    from m3agent.control.config import AgentConfig
    from m3agent.control.people.characters import CharacterIndex
    from m3agent.control.results import Hit, SearchResult
    from m3agent.embed import Embedder
    from m3agent.graph.operators import EntityGraph
    from m3agent.store.protocol import MemoryStore

DEFAULT_FRAME_SIDE: int = MediaSettings.model_fields["max_frame_side"].default
"""``media.max_frame_side`` when the caller does not say (the setting's own default)."""


@dataclass
class RunContext:
    """State of one question. Mutable: modes add searches, thoughts and usage as they go.

    ``chat`` is ``None`` only in select mode (the reranker chooses). ``before_clip``
    (inclusive) hides every memory of a later clip from every search. ``max_frame_side`` is the
    ``media.max_frame_side`` setting: the people graph places faces of videos stored without their sampled
    frame size by it, as the server's graph does (:class:`~m3agent.graph.operators.EntityGraph`).
    """

    store: MemoryStore
    embedder: Embedder
    chat: ChatModel | None
    question: str
    video_id: str | None
    before_clip: int | None
    config: AgentConfig
    index: CharacterIndex | None = None  # a prebuilt character index (a server caches it between questions)
    max_frame_side: int = DEFAULT_FRAME_SIDE
    searcher: MemorySearcher = field(init=False)
    usage: Usage = field(default_factory=Usage)
    searches: list[SearchResult] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    _graph: EntityGraph | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.searcher = MemorySearcher(
            self.store,
            self.embedder,
            video_id=self.video_id,
            before_clip=self.before_clip,
            index=self.index,
            min_similarity=self.config.min_similarity,
        )

    @property
    def reading(self) -> QuestionReading:
        """The question's one reading (:mod:`m3agent.control.reading`; cached, so every module shares it)."""
        return read_question(self.question)

    def time_context(self) -> str:
        """The prompt line saying when the question is asked (``""`` without ``before_clip``)."""
        if self.before_clip is None:
            return ""
        clip = self.searcher.clip_ref(self.video_id or "", self.before_clip) if self.video_id else None
        when = f" (video time {clock(clip.end_s)})" if clip and clip.end_s >= 0 else ""
        return f"The question is asked after CLIP_{self.before_clip}{when}; later clips do not exist yet."

    def call(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int | None = None) -> ChatReply:
        """One chat call under ``schema`` at the configured temperature; its usage is added to the run's."""
        if self.chat is None:
            raise ConfigError(f"the {self.config.mode} mode needs a chat model", hint="pass --llm")
        reply = self.chat.chat(
            messages, schema=schema, max_tokens=max_tokens or self.config.max_tokens,
            temperature=self.config.temperature,
        )  # fmt: skip
        self.usage = self.usage + reply.usage
        return reply

    def search(self, tool: str, query: str, k: int | None = None) -> SearchResult:
        """Run search ``tool`` (default ``k``: ``clip_k`` or ``search_k``) and record the result as evidence."""
        k = k or (self.config.clip_k if tool == "search_clip" else self.config.search_k)
        result = self.searcher.search(tool, query, k)
        self.searches.append(result)
        return result

    def release(self, result: SearchResult, hits: list[Hit], whole: bool) -> None:
        """Memories trimmed out of the conversation may be returned again by later searches."""
        self.searcher.shown.difference_update(h.memory.id for h in hits)
        if whole:
            self.searcher.seen_clips.difference_update((c.clip.video_id, c.clip.index) for c in result.clips)

    def entity_graph(self) -> EntityGraph:
        """The people graph of the store, one snapshot for the whole question (plan, facts, tools, the answer's
        words), built on first use: what it reads per video is read once."""
        if self._graph is None:
            from m3agent.graph.operators import EntityGraph

            self._graph = EntityGraph(self.store, max_frame_side=self.max_frame_side)
        return self._graph

    def people_in_words(self, text: str) -> str:
        """``text`` with each person tag left (no given name) in words (:func:`~m3agent.control.people.words.in_words`):
        an answer never names someone by a bare tag."""
        if not tags.find_tags(text):
            return text
        from m3agent.control.people.words import in_words

        return in_words(self.entity_graph(), text, self.video_id or _first_video(self.searches),
                        keep=tags.find_tags(tags.canonical_spelling(self.question)))

    def cited(self) -> set[int]:
        """Memory ids the model's thoughts have named so far."""
        return cited_memory_ids(self.thoughts)

    def finish(
        self,
        content: str,
        rounds: int,
        raw: str = "",
        failure: str | None = None,
        *,
        cited: set[int] | None = None,
        rewrite: bool = True,
    ) -> Answer:
        """The Answer for final ``content`` (``""``: none, ``failure`` says why), with ranked evidence.

        Cited memories are the ids named in thoughts and answer, or exactly ``cited``
        when given; ``rewrite=False`` keeps ``content``'s character tags.
        """
        final_texts = [content, *self.thoughts[-1:]]
        text = names_for_tags(content, self.searcher) if rewrite else content
        text = without_internal_ids(text, self.searcher, self.video_id or _first_video(self.searches))
        evidence, clips = rank_evidence(
            self.searches,
            self.embedder,
            question=self.question,
            answer=text,
            cited_ids=cited_memory_ids([content, *self.thoughts]) if cited is None else cited,
            cited_clip_ids=cited_clips(final_texts) if cited is None else set(),
            limit=self.config.evidence_limit,
        ) if content else ((), ())  # fmt: skip
        if self.video_id is not None:  # a question scoped to one video cites only that video
            evidence = tuple(e for e in evidence if e.clip.video_id == self.video_id)
            clips = tuple(c for c in clips if c.video_id == self.video_id)
        return Answer(
            question=self.question, text=self.people_in_words(text), answered=bool(content), rounds=rounds,
            max_rounds=self.config.rounds, mode=self.config.mode, searches=tuple(self.searches),
            evidence=evidence, clips=clips, usage=self.usage, latency_s=time.perf_counter() - self.started,
            model=self.chat.name if self.chat else "rerank", video_id=self.video_id, before_clip=self.before_clip,
            raw_text=raw or content, failure=failure,
        )  # fmt: skip


def without_internal_ids(text: str, searcher: MemorySearcher, video_id: str | None) -> str:
    """The answer without the ids the model was shown: ``[m12]`` is dropped, ``CLIP_3`` becomes the clip's time
    (``the part at 1:30–2:00``) or date; a user never sees an internal id."""
    def clip(match: re.Match[str]) -> str:
        if video_id is None:
            return "that part"
        ref = searcher.clip_ref(video_id, int(match.group(1)))
        if ref.date:
            return ref.date
        return "that part" if ref.start_s < 0 else f"the part at {clock(ref.start_s)}–{clock(ref.end_s)}"

    return SHOWN_MEMORY_ID.sub("", CLIP_ID.sub(clip, text)).strip()


def _first_video(searches: list[SearchResult]) -> str | None:
    return next((h.memory.video_id for s in searches for h in s.hits), None)


def names_for_tags(text: str, searcher: MemorySearcher) -> str:
    """Answer text with entity/character tags replaced by known names (tags without one are kept)."""
    index = searcher.index
    text = index.rewrite(text)
    characters = {tag for tag in tags.find_tags(text) if tag.kind == tags.TagKind.CHARACTER}
    names = {tag: name for tag in characters if (name := index.name_of(tag.id))}
    return tags.to_names(text, names)
