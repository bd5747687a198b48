"""One page of a video's timeline for the inspector: the clips of the page with their memories (filtered by
kind and by words), faces and voice lines, so an hour of video (about 10^4 memories) renders a page at a time.

Memories are read once per request (one query, no vectors) and filtered in Python; faces and voices are read
only for the clips of the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent import views
from m3agent.domain import ClipStatus, MemoryKind, SearchFilter
from m3agent.server.web.swimlanes import ON_SCREEN

if TYPE_CHECKING:
    from m3agent.domain import Clip
    from m3agent.store.protocol import MemoryStore


TEXT_KIND = "text"  # the filter's own kind for on-screen text (stored as episodic memories ``On screen …: "…"``)
FILTER_KINDS = {**{k.value: k.value for k in MemoryKind}, TEXT_KIND: "on-screen text"}  # value -> label


@dataclass(frozen=True, slots=True)
class TimelineQuery:
    """What the reader asked for: a kind of memory (a :class:`MemoryKind` value or :data:`TEXT_KIND`; empty:
    all), words to find, a page (1-based) or a time to land on."""

    kind: str = ""
    words: str = ""
    page: int | None = None
    at_s: float | None = None

    @property
    def filtered(self) -> bool:
        return bool(self.kind) or bool(self.words.strip())


@dataclass(frozen=True, slots=True)
class ClipView:
    """One clip of the page: its span and status, the memories that pass the filter, faces and voice lines."""

    index: int
    start_s: float
    end_s: float
    status: str
    reason: str
    memories: tuple[dict[str, Any], ...]
    faces: tuple[dict[str, Any], ...]
    voices: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class TimelinePage:
    """The clips of one page, where the page sits among all, and how many memories matched the filter."""

    clips: tuple[ClipView, ...]
    page: int
    pages: int
    clips_matched: int
    memories_matched: int
    names: dict[int, str]


def timeline_page(store: MemoryStore, video_id: str, query: TimelineQuery, per_page: int) -> TimelinePage:
    """The page of ``video_id``'s timeline that ``query`` asks for (the page holding ``at_s`` when no page is
    given; the last page when the page number is past the end)."""
    character_of, names = views.character_names(store, video_id)
    stored = MemoryKind(query.kind) if query.kind in {k.value for k in MemoryKind} else None
    flt = SearchFilter(kinds=(stored,)) if stored is not None else None
    rows = [{**views.memory_row(m, character_of, names), "on_screen": ON_SCREEN.match(m.text) is not None}
            for m in store.memories(video_id, None, flt)]
    if query.kind == TEXT_KIND:
        rows = [r for r in rows if r["on_screen"]]
    rows = _matching(rows, query.words)
    by_clip: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_clip.setdefault(row["clip"], []).append(row)
    clips = [(c, s, r) for c, s, r in store.clips(video_id) if not query.filtered or c.index in by_clip]
    pages = max(1, -(-len(clips) // per_page))
    page = min(max(1, query.page or _page_at(clips, query.at_s, per_page)), pages)
    shown = clips[(page - 1) * per_page:page * per_page]
    views_ = tuple(_clip_view(store, video_id, c, s, r, by_clip.get(c.index, []), character_of)
                   for c, s, r in shown)
    return TimelinePage(views_, page, pages, len(clips), len(rows), names)


def _matching(rows: list[dict[str, Any]], words: str) -> list[dict[str, Any]]:
    """The rows whose text (names resolved or as stored) holds every word, case-insensitively."""
    needles = words.lower().split()
    if not needles:
        return rows
    return [r for r in rows if all(n in f"{r['text']} {r['raw_text']}".lower() for n in needles)]


def _page_at(clips: list[tuple[Clip, ClipStatus, str]], at_s: float | None, per_page: int) -> int:
    """The 1-based page holding the clip that spans ``at_s`` (the first page when none does)."""
    if at_s is None:
        return 1
    for position, (clip, _, _) in enumerate(clips):
        if clip.start_s <= at_s < clip.end_s:
            return position // per_page + 1
    return 1


def _clip_view(store: MemoryStore, video_id: str, clip: Clip, status: ClipStatus, reason: str,
               memories: list[dict[str, Any]], character_of: dict[int, int]) -> ClipView:
    voices = [{"id": v.id, "start_s": round(v.start_s, 2), "end_s": round(v.end_s, 2), "entity": v.entity_id,
               "character": character_of.get(v.entity_id) if v.entity_id is not None else None, "text": v.text}
              for v in store.voices(video_id, clip.index)]
    return ClipView(clip.index, clip.start_s, clip.end_s, status.value, reason, tuple(memories),
                    tuple(views.face_summary(store.faces(video_id, clip.index), character_of)), tuple(voices))
