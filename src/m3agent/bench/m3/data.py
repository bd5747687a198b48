"""Reading M3-Bench annotations (``robot.json`` / ``web.json``) with normalised question types.

Labels were renamed upstream (reference doc §8): robot's "Multi-Detail
Reasoning" is the web file's "Multi-Evidence Reasoning", and "Human
Understanding" became "Person Understanding"; both are mapped to the current
names so per-type results line up with the published table (§9).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import BenchmarkError

if TYPE_CHECKING:
    from m3agent.control.steps import Answer
    from m3agent.store.protocol import MemoryStore

TYPE_CODES = {
    "Multi-Evidence Reasoning": "ME",
    "Multi-Hop Reasoning": "MH",
    "Cross-Modal Reasoning": "CM",
    "Person Understanding": "PU",
    "General Knowledge Extraction": "GK",
}
LABEL_ALIASES = {
    "Multi-Detail Reasoning": "Multi-Evidence Reasoning",
    "Human Understanding": "Person Understanding",
}
SPLITS = ("robot", "web")
PUBLISHED_M3_AGENT = {
    "robot": {"ME": 32.8, "MH": 29.4, "CM": 31.2, "PU": 43.3, "GK": 19.1, "All": 30.7},
    "web": {"ME": 45.9, "MH": 28.4, "CM": 44.3, "PU": 59.3, "GK": 53.9, "All": 48.9},
}
"""M3-Agent's published accuracy (%, GPT-4o judge), reference doc §9."""


@dataclass(frozen=True, slots=True)
class M3Question:
    """One question; ``before_clip`` (inclusive) limits the memory to what was seen when it was asked."""

    question_id: str
    video_id: str
    question: str
    answer: str
    types: tuple[str, ...]
    before_clip: int | None = None
    timestamp: str | None = None


Answerer = Callable[["MemoryStore", M3Question], "Answer"]
"""Answers one question on an open store (already holding the question's video)."""


def normalise_type(label: str) -> str:
    clean = " ".join(label.split())
    return LABEL_ALIASES.get(clean, clean)


def resolve_split(split: str, shared_dir: Path) -> tuple[str, Path]:
    """``(name, path)`` for ``robot``/``web`` (from ``shared_dir``) or a path to an annotation file."""
    if split in SPLITS:
        return split, shared_dir / "data" / "m3bench" / f"{split}.json"
    path = Path(split)
    return path.stem, path


def load_m3bench(path: Path | str) -> list[M3Question]:
    """All questions of an annotation file, in file order."""
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchmarkError(
            f"cannot read M3-Bench annotations {file}: {exc.strerror or exc}",
            hint="pass robot, web (read from ../shared/data/m3bench) or the path of an annotation JSON",
        ) from None
    except json.JSONDecodeError as exc:
        raise BenchmarkError(f"{file} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BenchmarkError(f"{file} is not an M3-Bench annotation file (expected a dict keyed by video id)")
    return [q for video_id, entry in raw.items() for q in _questions(str(video_id), entry, file)]


def _questions(video_id: str, entry: Any, file: Path) -> list[M3Question]:
    items = entry.get("qa_list") if isinstance(entry, dict) else None
    if not isinstance(items, list):
        raise BenchmarkError(f"{file}: video {video_id} has no qa_list")
    return [_question(video_id, item, file) for item in items]


def _question(video_id: str, item: dict[str, Any], file: Path) -> M3Question:
    try:
        labels = item.get("type") or []
        types = tuple(dict.fromkeys(normalise_type(str(t)) for t in labels))
        before = item.get("before_clip")
        return M3Question(
            question_id=str(item["question_id"]),
            video_id=video_id,
            question=str(item["question"]),
            answer=str(item["answer"]),
            types=types,
            before_clip=int(before) if before is not None else None,
            timestamp=item.get("timestamp"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchmarkError(f"{file}: a question of video {video_id} is malformed ({exc})") from None
