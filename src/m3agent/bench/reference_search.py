"""The reference system's clip search (reference doc §5.1), re-implemented for comparison.

Every memory of a clip is scored by cosine similarity to the query; a clip
scores its best memory; clips scoring at least ``threshold`` (0.5 in the
reference) and not after ``before_clip`` are ranked and the top
``top_clips`` (2) returned with *all* their memories, episodic first, then
semantic, each in insertion order, equivalence lines removed. Vectors are
the same ones our search uses, so only the search strategy differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.domain import Memory, MemoryKind, SearchFilter

if TYPE_CHECKING:
    from m3agent.domain import Vector
    from m3agent.store.protocol import MemoryStore

REFERENCE_THRESHOLD = 0.5
REFERENCE_TOP_CLIPS = 2


@dataclass(frozen=True, slots=True)
class ClipSearchResult:
    clips: tuple[int, ...]
    memories: tuple[Memory, ...]


class ReferenceClipSearch:
    """Clip search over one video of ``store``; vectors are loaded once."""

    def __init__(
        self,
        store: MemoryStore,
        video_id: str,
        threshold: float = REFERENCE_THRESHOLD,
        top_clips: int = REFERENCE_TOP_CLIPS,
    ) -> None:
        import numpy as np

        self.threshold = threshold
        self.top_clips = top_clips
        memories = [m for m in store.memories(video_id) if not _is_equivalence(m)]
        vectors = dict(store.iter_memory_vectors(SearchFilter(video_ids=(video_id,))))
        self._memories = [m for m in memories if m.id in vectors]
        rows = [np.asarray(vectors[m.id], dtype=np.float32) for m in self._memories]
        self._matrix: Any = np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32)
        self._clips: Any = np.array([m.clip_index for m in self._memories])
        self._by_clip: dict[int, list[Memory]] = {}
        for memory in sorted(self._memories, key=lambda m: (m.kind is not MemoryKind.EPISODIC, m.id)):
            self._by_clip.setdefault(memory.clip_index, []).append(memory)

    def search(self, query: Vector, before_clip: int | None = None) -> ClipSearchResult:
        import numpy as np

        if not self._memories:
            return ClipSearchResult((), ())
        scores = self._matrix @ np.asarray(query, dtype=np.float32)
        best: dict[int, float] = {}
        for clip, score in zip(self._clips.tolist(), scores.tolist(), strict=True):
            if score > best.get(clip, -2.0):
                best[clip] = score
        ranked = sorted(
            (c for c, s in best.items() if s >= self.threshold and (before_clip is None or c <= before_clip)),
            key=lambda c: (-best[c], c),
        )
        chosen = tuple(sorted(ranked[: self.top_clips]))
        memories = tuple(m for c in chosen for m in self._by_clip.get(c, []))
        return ClipSearchResult(chosen, memories)


def _is_equivalence(memory: Memory) -> bool:
    return memory.text.lstrip().lower().startswith("equivalence")
