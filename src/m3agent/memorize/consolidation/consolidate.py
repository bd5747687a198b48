"""Semantic memory consolidation: a model turns a video's episodic memories into lasting facts.

A resumable step after perception (``m3agent consolidate``, and the end of
``m3agent ingest`` when an LLM is configured). The video's stored clips that
are not consolidated yet are taken in index order, ``clips_per_call`` at a
time (a *unit*; 0: all of them in one call). For each unit the model reads
the unit's episodic memories and the known semantic facts of the same people
(:mod:`.consolidate_facts`) and writes facts: names (from how people are
addressed), roles, relations, preferences, facts of the place.

Causality: a unit's facts are attached to its last clip, and nothing it reads
comes from a later clip (every read is bounded by ``before_clip`` = that clip).

Each kept fact carries a confidence, its provenance (the episodic memories
it came from, stored as the fact's sources; provenance string
``consolidate/1:<model>``) and its time validity: valid from the clip it was
first drawn from (``clip_index``, evidence span ``start_s``-``end_s``),
confirmed up to ``last_clip_index``; a later fact that contradicts it lowers
its weight. Facts enter through the write rules (:func:`.rules.write_facts`):
a fact already known reinforces it (and adds its sources), a contradicting one
weakens the old fact.

A unit's facts, sources and its record as consolidated are one store
transaction, so a killed run loses at most the unit in progress and a rerun
continues from there. An unusable reply or a prompt over the model's context
is recorded as a note of the unit (nothing fabricated) and the unit counts as
consolidated, and so is a unit the pre-check (:mod:`.fact_cues`) finds nothing
to ask about (no model call); an unreachable endpoint or a model that cannot load stops the
run (the unit is retried by the next one).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from m3agent.domain import Clip, ClipStatus, ForgottenConsolidation, Memory, MemoryKind, SearchFilter
from m3agent.errors import MalformedReplyError
from m3agent.llm import Usage
from m3agent.llm.schema import parse_reply
from m3agent.memorize.consolidation import checks as fact_checks
from m3agent.memorize.consolidation import exchange as cf

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel, ChatReply, Message
    from m3agent.memorize.rules import WriteRules, WriteStats
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore

VERSION = "consolidate/1"
NOTHING_TO_ASK = ("nothing that could state a fact (no first-person sentence with a cue, no one spoken to by name, no "
                  "named place, no description of someone); no call")


@dataclass(frozen=True, slots=True)
class ConsolidationOptions:
    """``clips_per_call``: clips read by one model call (0: the whole video at once); ``precheck``: skip units
    with nothing that could hold a fact (:mod:`.fact_cues`) without a call."""

    clips_per_call: int = 1
    max_tokens: int = 320
    precheck: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsolidationOptions:
        """The options of ``settings.memorize`` (consolidate_clips, consolidate_precheck)."""
        return cls(clips_per_call=settings.memorize.consolidate_clips, precheck=settings.memorize.consolidate_precheck)


@dataclass
class ConsolidationReport:
    """What one video's consolidation run did; ``rtf`` = wall seconds / media seconds of its clips."""

    video_id: str
    model: str
    clips_consolidated: int = 0
    clips_already: int = 0
    skipped: int = 0  # clips the pre-check found nothing to ask about (no call)
    calls: int = 0
    facts_written: int = 0
    reinforced: int = 0
    contradicted: int = 0
    dropped: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens a local model did not evaluate again (its kept prefix)
    completion_tokens: int = 0
    media_seconds: float = 0.0
    wall_seconds: float = 0.0
    forgotten: ForgottenConsolidation | None = None  # what a redo took back first

    @property
    def rtf(self) -> float:
        return self.wall_seconds / self.media_seconds if self.media_seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["rtf"] = round(self.rtf, 3)
        data["wall_seconds"] = round(self.wall_seconds, 2)
        return data


def pending_units(store: MemoryStore, video_id: str, clips_per_call: int) -> tuple[list[list[Clip]], int]:
    """The video's stored, not yet consolidated clips grouped into units, and how many are consolidated."""
    done = [c for c, status, _ in store.clips(video_id) if status == ClipStatus.DONE]
    consolidated = store.consolidated_clips(video_id)
    pending = [c for c in done if c.index not in consolidated]
    size = clips_per_call if clips_per_call > 0 else max(1, len(pending))
    return [pending[i:i + size] for i in range(0, len(pending), size)], len(done) - len(pending)


def consolidate_video(store: MemoryStore, chat: ChatModel, embedder: Embedder, video_id: str,
                      options: ConsolidationOptions | None = None, rules: WriteRules | None = None,
                      on_unit: Callable[[ConsolidationReport, int], None] | None = None) -> ConsolidationReport:
    """Consolidate every pending clip of ``video_id`` (see the module docstring); resumable.

    ``on_unit(report, clips)`` runs after each committed unit (progress). The caller holds the video's
    writer lock. :class:`~m3agent.errors.EndpointError` and :class:`~m3agent.errors.ModelError` propagate:
    the unit in progress is not recorded.
    """
    from m3agent.memorize.embedding import check_embedding_model

    options = options or ConsolidationOptions()
    check_embedding_model(store, embedder)
    units, already = pending_units(store, video_id, options.clips_per_call)
    report = ConsolidationReport(video_id, chat.name, clips_already=already)
    started = time.perf_counter()
    for unit in units:
        consolidate_unit(store, chat, embedder, unit, options, rules, report)
        report.wall_seconds = time.perf_counter() - started
        if on_unit is not None:
            on_unit(report, len(unit))
    return report


def consolidate_unit(store: MemoryStore, chat: ChatModel, embedder: Embedder, unit: list[Clip],
                     options: ConsolidationOptions, rules: WriteRules | None, report: ConsolidationReport) -> None:
    """Read, ask, check and write one unit of clips in one transaction (facts attached to its last clip)."""
    from m3agent.memorize.rules import WriteStats, embedded, write_facts

    started = time.perf_counter()
    last = unit[-1]
    new = _new_memories(store, unit)
    drafts: list[cf.Draft] = []
    notes: list[str] = []
    if new and options.precheck and not cf.shown_memories(new, []).offer:  # the pre-check: nothing offered, no call
        notes.append(f"clip {last.index}: {NOTHING_TO_ASK}")
        report.skipped += len(unit)
    elif new:
        drafts, notes = _ask(store, chat, new, last, options, report)
    facts = embedded(embedder, [_fact(d, last, chat.name) for d in drafts])
    stats = WriteStats()
    with store.consolidation(unit, chat.name) as writer:
        writer.notes.extend(notes)
        for memory_id, draft in zip(write_facts(store, writer, facts, rules, stats), drafts, strict=True):
            writer.add_sources(memory_id, [m.id for m in draft.sources])
        writer.seconds = time.perf_counter() - started
    _count(report, unit, stats, notes)


def _new_memories(store: MemoryStore, unit: list[Clip]) -> list[Memory]:
    flt = SearchFilter(kinds=(MemoryKind.EPISODIC,))
    return [m for clip in unit for m in store.memories(clip.video_id, clip.index, flt)]


def _known_facts(store: MemoryStore, new: list[Memory], last: Clip) -> list[Memory]:
    """Semantic memories of the people of ``new`` (all entities of their characters) and of nobody, up to
    ``last`` in its video."""
    characters = store.characters(before_clip=last.index, video_id=last.video_id)
    members = {e: c.entity_ids for c in characters for e in c.entity_ids}
    entities = sorted({m for memory in new for e in memory.entity_ids for m in members.get(e, (e,))})
    flt = SearchFilter(video_ids=(last.video_id,), before_clip=last.index, kinds=(MemoryKind.SEMANTIC,))
    about = store.memories_of_entities(entities, flt) if entities else []
    place = [m for m in store.memories(last.video_id, flt=flt) if not m.entity_ids]
    return [*about, *place]


def _ask(store: MemoryStore, chat: ChatModel, new: list[Memory], last: Clip, options: ConsolidationOptions,
         report: ConsolidationReport) -> tuple[list[cf.Draft], list[str]]:
    """One model call over the unit; the checked drafts and the notes of what was dropped."""
    from m3agent.llm.prompts import load_prompt_set

    prompts = load_prompt_set(cf.PROMPT)
    shown = cf.shown_memories(new, _known_facts(store, new, last), whole=not options.precheck)
    try:
        reply = chat.chat(_messages(shown), schema=cf.reply_schema(prompts.schema, shown),
                          max_tokens=options.max_tokens)
    except MalformedReplyError as exc:  # an endpoint's reply that stayed off the schema after its retries
        return [], [f"clip {last.index}: the reply was unusable ({exc.message}); no facts written"]
    except ValueError as exc:  # llama.cpp: the prompt does not fit the model's context window
        return [], [f"clip {last.index}: the model could not take the prompt ({exc}); no facts written"]
    _add_usage(report, reply)
    if reply.parsed is None:  # off the schema: perhaps only by naming what was not shown
        loose, error = parse_reply(reply.text, cf.loose_schema(prompts.schema))
        reply = dataclasses.replace(reply, parsed=loose, error=reply.error if loose is None else error)
    try:
        parsed = cf.ConsolidationReply.read(reply)
    except MalformedReplyError as exc:
        return [], [f"clip {last.index}: the reply was unusable ({exc.message}); no facts written"]
    drafts, notes = fact_checks.checked(parsed, shown)
    return drafts, [f"clip {last.index}: {note}" for note in notes]


def _messages(shown: cf.Shown) -> list[Message]:
    """The call's messages: the fixed instructions and worked examples first (the same tokens on every call, so
    a local model keeps their state), then the unit's known facts and memories."""
    from m3agent.llm.prompts import load_prompt_set

    prompts = load_prompt_set(cf.PROMPT)
    messages: list[Message] = [{"role": "system", "content": prompts.render("system")}]
    for section in prompts.sections:  # the worked examples (few-shot), in file order
        if section.startswith(("example_user", "example_reply")):
            role = "user" if section.startswith("example_user") else "assistant"
            messages.append({"role": role, "content": prompts.render(section)})
    return [*messages, {"role": "user", "content": prompts.render("user", **cf.prompt_fields(shown))}]


def _fact(draft: cf.Draft, last: Clip, model: str) -> Memory:
    return Memory(kind=MemoryKind.SEMANTIC, text=draft.text, video_id=last.video_id, clip_index=last.index,
                  start_s=min(m.start_s for m in draft.sources), end_s=max(m.end_s for m in draft.sources),
                  entity_ids=draft.entity_ids, confidence=draft.confidence, provenance=f"{VERSION}:{model}")


def _add_usage(report: ConsolidationReport, reply: ChatReply) -> None:
    usage = reply.usage if reply.usage.calls else Usage(reply.usage.prompt_tokens, reply.usage.completion_tokens, 1)
    report.calls += usage.calls
    report.prompt_tokens += usage.prompt_tokens
    report.cached_tokens += usage.cached_tokens
    report.completion_tokens += usage.completion_tokens


def _count(report: ConsolidationReport, unit: list[Clip], stats: WriteStats, notes: list[str]) -> None:
    report.clips_consolidated += len(unit)
    report.media_seconds += sum(c.duration_s for c in unit)
    report.facts_written += stats.semantic
    report.reinforced += stats.reinforced
    report.contradicted += stats.contradicted
    report.dropped += notes


@contextmanager
def progress_bar(enabled: bool, total: int) -> Iterator[Callable[[ConsolidationReport, int], None]]:
    """A rich progress bar of clips with the running real-time factor; a no-op when disabled."""
    if not enabled or total == 0:
        yield lambda report, clips: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("[bold]consolidate[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("clips"),
               TimeElapsedColumn(), TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("consolidate", total=total, status="")

        def advance(report: ConsolidationReport, clips: int) -> None:
            bar.update(task, advance=clips, status=f"RTF {report.rtf:.2f}  facts {report.facts_written}"
                                                   f"  reinforced {report.reinforced}")

        yield advance
