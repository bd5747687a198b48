"""Run consolidation from settings: ``m3agent consolidate`` and the end of ``m3agent ingest``.

The model is ``memorize.consolidate_llm``, else the control ``llm``; with
neither (``none``) consolidation is skipped with a message saying how to run it.
``redo`` takes a video's consolidation back first and consolidates it again.
Each video is consolidated under its writer lock, so it never runs beside an
ingest of the same video.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from m3agent.memorize.consolidation.consolidate import (
    ConsolidationOptions,
    ConsolidationReport,
    consolidate_video,
    pending_units,
    progress_bar,
)

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore

SKIPPED = ("consolidation skipped: no LLM configured (llm is none); to write semantic memories run "
           "`m3agent consolidate --memory DB --llm llamacpp:qwen-1.5b`")
DEFERRED = ("consolidation deferred (memorize.consolidate_after_ingest is false, or --no-consolidate): run "
            "`m3agent consolidate` to write this video's semantic memories; the server does it while idle")


def consolidation_model(settings: Settings) -> str | None:
    """The spec of the consolidation model, or ``None`` when there is none (``none`` or unset)."""
    from m3agent.llm.spec import uses_llm

    spec = settings.memorize.consolidate_llm or settings.llm
    return spec if uses_llm(spec) else None


def consolidate_store(store: MemoryStore, settings: Settings, chat: ChatModel, embedder: Embedder,
                      video_ids: Sequence[str] | None = None, *, redo: bool = False, show_progress: bool = True,
                      on_wait: Callable[[str], None] | None = None) -> list[ConsolidationReport]:
    """Consolidate the pending clips of ``video_ids`` (default: every video), one video at a time.

    With ``redo`` a video's consolidation is first taken back (:meth:`MemoryStore.forget_consolidation`: its
    facts, sources and record of consolidated clips, in one transaction), so every clip is consolidated again;
    an interrupted redo leaves a partly consolidated video that the next run continues.
    """
    from m3agent.memorize.rules import WriteRules

    options = ConsolidationOptions.from_settings(settings)
    rules = WriteRules.from_settings(settings)
    for video_id in video_ids or ():
        store.get_video(video_id)  # an unknown video is an error, not an empty report
    reports = []
    for video_id in video_ids or [v.video_id for v in store.videos()]:
        with store.video_lock(video_id, on_wait=on_wait or _tell_waiting):
            forgotten = store.forget_consolidation(video_id) if redo else None
            units, _ = pending_units(store, video_id, options.clips_per_call)
            with progress_bar(show_progress, sum(len(u) for u in units)) as advance:
                report = consolidate_video(store, chat, embedder, video_id, options, rules, advance)
            report.forgotten = forgotten
            reports.append(report)
    return reports


def _tell_waiting(message: str) -> None:
    sys.stderr.write(f"m3agent: {message} (Ctrl-C stops waiting)\n")
    sys.stderr.flush()
