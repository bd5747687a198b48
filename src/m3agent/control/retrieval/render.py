"""Search results as the text the model reads, at three levels of detail.

Level 0 shows every memory; level 1 (an older round squeezed for the token
budget) keeps only memories the query matched or the model cited; level 2
is a one-line stub. Memory lines carry ids (``[m12]``) the model can cite.
"""

from __future__ import annotations

from collections.abc import Collection

from m3agent.control.results import ClipRef, Hit, SearchResult
from m3agent.text import clock

FULL, COMPACT, STUB = 0, 1, 2


def render_result(
    result: SearchResult, *, level: int = FULL, cited: Collection[int] = (), with_video: bool = False
) -> str:
    """The observation text of ``result`` (the caller handles the empty case)."""
    notes = "".join(f"; {n}" for n in result.notes)
    header = f'Searched knowledge ({result.tool} "{result.query}"{notes}):'
    if level >= STUB:
        return header + " " + stub(result)
    lines = [header]
    lines += [f"- {fact}" for fact in result.facts]
    for clip in result.clips:
        hits = [h for h in clip.hits if level == FULL or h.matched or h.memory.id in cited]
        if hits:
            lines.append(clip_label(clip.clip, with_video))
            lines += [f"  {hit_line(h)}" for h in hits]
    if result.repeated:
        lines.append(f"({result.repeated} memories already shown in earlier rounds are not repeated.)")
    return "\n".join(lines)


def stub(result: SearchResult) -> str:
    """One line: which clips and memory ids an old search returned (their text was trimmed)."""
    parts = [f"{c.clip.label}: " + ", ".join(f"m{h.memory.id}" for h in c.hits) for c in result.clips]
    return "[trimmed to save space; returned " + ("; ".join(parts) or "nothing") + "]"


def hit_line(hit: Hit) -> str:
    return f"[m{hit.memory.id}] {hit.text}"


def clip_label(clip: ClipRef, with_video: bool = False) -> str:
    """``CLIP_3 [1:30-2:00] (8 May 2023):``: the span when the clip has one, the date when it has one."""
    video = f" of {clip.video_id}" if with_video else ""
    span = "" if clip.start_s < 0 else f" [{clock(clip.start_s)}-{clock(clip.end_s)}]"
    date = f" ({clip.date})" if clip.date else ""
    return f"{clip.label}{video}{span}{date}:"


def dropped_at(result: SearchResult, level: int, cited: Collection[int]) -> list[Hit]:
    """Hits that ``level`` leaves out of the text (released for later searches)."""
    if level == FULL:
        return []
    hits = [h for c in result.clips for h in c.hits]
    if level >= STUB:
        return hits
    return [h for h in hits if not (h.matched or h.memory.id in cited)]
