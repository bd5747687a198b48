"""Reading LoCoMo (``locomo10.json``): conversations, sessions, turns and QA items.

Evidence ids in the file are not always clean (``"D8:6; D9:17"``,
``"D:11:26"``, ``"D30:05"``); they are split and normalised to ``D<s>:<t>``.
Evidence that names no turn of its conversation is dropped and counted in
:attr:`LocomoSample.dropped_evidence`, so recall is measured only against
turns that exist.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m3agent.errors import BenchmarkError

CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ANSWERABLE_CATEGORIES = (1, 2, 3, 4)
UNANSWERABLE = "Not mentioned in the conversation."
"""The expected answer of adversarial (category 5) questions; their ``adversarial_answer`` is the bait."""
_EVIDENCE_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION_RE = re.compile(r"session_(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    image_caption: str = ""


@dataclass(frozen=True, slots=True)
class Session:
    """One conversation session; ``number`` is the N of ``session_N`` (from 1)."""

    number: int
    date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class QAItem:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int
    adversarial_answer: str = ""

    @property
    def adversarial(self) -> bool:
        return self.category == 5


@dataclass(frozen=True, slots=True)
class LocomoSample:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    qa: tuple[QAItem, ...]
    dropped_evidence: int = 0

    def dia_ids(self) -> set[str]:
        return {t.dia_id for s in self.sessions for t in s.turns}


def normalise_dia_ids(raw: str) -> list[str]:
    """All ``D<s>:<t>`` ids in ``raw``, without leading zeros (``"D30:05"`` -> ``"D30:5"``)."""
    return [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE_RE.findall(raw)]


def default_locomo_path(shared_dir: Path) -> Path:
    return shared_dir / "data" / "locomo" / "locomo10.json"


def load_locomo(path: Path | str) -> list[LocomoSample]:
    """Load every sample of a LoCoMo JSON file (list of samples)."""
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchmarkError(
            f"cannot read LoCoMo data {file}: {exc.strerror or exc}",
            hint="pass --data PATH to locomo10.json, or place ../shared/data beside the repository",
        ) from None
    except json.JSONDecodeError as exc:
        raise BenchmarkError(f"{file} is not valid JSON: {exc}") from None
    if not isinstance(raw, list):
        raise BenchmarkError(f"{file} is not a LoCoMo file (expected a list of samples)")
    return [_sample(item, file) for item in raw]


def _sample(item: Any, file: Path) -> LocomoSample:
    try:
        conversation = item["conversation"]
        sample_id = str(item["sample_id"])
        speakers = (str(conversation["speaker_a"]), str(conversation["speaker_b"]))
    except (KeyError, TypeError) as exc:
        raise BenchmarkError(f"{file}: a sample lacks {exc}", hint="the file is not in LoCoMo format") from None
    sessions = _sessions(conversation)
    known = {t.dia_id for s in sessions for t in s.turns}
    qa, dropped = _qa_items(item.get("qa", []), known)
    return LocomoSample(sample_id, speakers, sessions, qa, dropped)


def _sessions(conversation: dict[str, Any]) -> tuple[Session, ...]:
    sessions = []
    for key, turns in conversation.items():
        match = _SESSION_RE.fullmatch(key)
        if match is None or not isinstance(turns, list):
            continue
        number = int(match.group(1))
        date = str(conversation.get(f"{key}_date_time", ""))
        sessions.append(Session(number, date, tuple(_turn(t) for t in turns)))
    return tuple(sorted(sessions, key=lambda s: s.number))


def _turn(raw: dict[str, Any]) -> Turn:
    ids = normalise_dia_ids(str(raw.get("dia_id", "")))
    caption = raw.get("blip_caption") or ""
    return Turn(ids[0] if ids else str(raw.get("dia_id")), str(raw["speaker"]), str(raw["text"]), str(caption))


def _qa_items(raw_items: list[dict[str, Any]], known: set[str]) -> tuple[tuple[QAItem, ...], int]:
    items, dropped = [], 0
    for raw in raw_items:
        ids = [i for e in raw.get("evidence", []) for i in normalise_dia_ids(str(e))]
        kept = tuple(dict.fromkeys(i for i in ids if i in known))
        dropped += len(set(ids)) - len(kept)
        category = int(raw["category"])
        answer = UNANSWERABLE if category == 5 else str(raw.get("answer", ""))
        bait = str(raw.get("adversarial_answer", ""))
        items.append(QAItem(str(raw["question"]), answer, kept, category, bait))
    return tuple(items), dropped


def adversarial_attribution(samples: list[LocomoSample]) -> tuple[int, int]:
    """``(naming one speaker, all evidence by the other)`` counts of adversarial questions.

    Adversarial questions usually ask about one speaker what the other one said.
    """
    naming = by_other = 0
    for sample in samples:
        speaker_of = {t.dia_id: t.speaker for session in sample.sessions for t in session.turns}
        for item in sample.qa:
            names = [n for n in sample.speakers if n in item.question]
            if item.category != 5 or not item.evidence or len(names) != 1:
                continue
            naming += 1
            by_other += all(speaker_of[e] != names[0] for e in item.evidence)
    return naming, by_other
