"""Validate and repair the statements a model wrote for one clip, and turn them into memories.

Rules (each dropped statement is reported with its reason, never silently lost):

- Tag spellings a model commonly produces (``<Face 3>``, ``< voice_7 >``,
  ``[face_3]``, bare ``face_3``) are rewritten to the canonical ``<face_3>``.
- Entity ids share one id space, so a tag whose id belongs to the clip but
  with the wrong kind (``<voice_3>`` for face 3) is repaired to the right kind.
- A statement naming an entity that is not in this clip (``<face_99>``) or a
  ``<character_k>`` tag is dropped: which person it meant cannot be known, and
  deleting the tag would change what the sentence says.
- Empty, over-long and repeated statements are dropped.
- A semantic line in the reference's form ``Equivalence: <face_3>, <voice_7>``
  becomes an equivalence, not a memory.
- An episodic statement that starts with a time (``[1:32]``, ``[1:32-1:40]``)
  inside the clip gets that time span; others span the whole clip.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from m3agent import tags
from m3agent.domain import Clip, FaceVoiceLink, LinkSource, Memory, MemoryKind
from m3agent.text import CLOCK, clock_seconds

MAX_CHARS = 600
_EQUIVALENCE = re.compile(r"^\s*equivalen(?:ce|t)s?\s*:\s*(.*)$", re.IGNORECASE)
_LEADING_TIME = re.compile(rf"^\s*\[\s*({CLOCK})\s*(?:[-–]\s*({CLOCK})\s*)?\]\s*")
_SPAN_SLACK_S = 1.0


@dataclass(frozen=True, slots=True)
class Interpreted:
    """Statements of one reply after validation."""

    memories: tuple[Memory, ...]
    equivalences: tuple[FaceVoiceLink, ...]
    dropped: tuple[str, ...]
    offered: int  # statements and equivalences the reply contained


def clean_statement(text: str, kinds: Mapping[int, str]) -> tuple[str | None, str]:
    """``(clean text, "")`` or ``(None, reason)``; ``kinds`` maps the clip's entity ids to face/voice."""
    flat = " ".join(str(text).split())
    if not flat:
        return None, "empty statement"
    if len(flat) > MAX_CHARS:
        return None, f"longer than {MAX_CHARS} characters"
    spelled = tags.canonical_spelling(flat)
    for tag in tags.find_tags(spelled):
        if tag.kind == tags.TagKind.CHARACTER:
            return None, f"uses {tag}; only the face/voice tags of this clip are allowed"
        if tag.id not in kinds:
            return None, f"names {tag}, which is not in this clip"

    def right_kind(tag: tags.Tag) -> tags.Tag:
        return tags.Tag(tags.TagKind(kinds[tag.id]), tag.id)

    return tags.rewrite(spelled, right_kind), ""


def equivalence_line(text: str, kinds: Mapping[int, str]) -> tuple[int, int] | str | None:
    """For an ``Equivalence: ...`` line: ``(face, voice)``, or a reason it is unusable; ``None`` otherwise."""
    match = _EQUIVALENCE.match(str(text))
    if match is None:
        return None
    found = tags.find_tags(tags.canonical_spelling(match.group(1)))
    faces = [t.id for t in found if kinds.get(t.id) == "face"]
    voices = [t.id for t in found if kinds.get(t.id) == "voice"]
    if len(faces) == 1 and len(voices) == 1 and len(found) == 2:
        return faces[0], voices[0]
    return f"equivalence {text!r} does not pair one face and one voice of this clip"


def checked_equivalence(face: object, voice: object, kinds: Mapping[int, str]) -> tuple[int, int] | str:
    """``(face, voice)`` when both are entities of this clip of the right kind, else the reason."""
    if not isinstance(face, int) or not isinstance(voice, int):
        return f"equivalence {face!r}~{voice!r} is not a pair of numbers"
    if kinds.get(face) == "voice" and kinds.get(voice) == "face":
        face, voice = voice, face  # the two numbers in the wrong fields
    if kinds.get(face) != "face" or kinds.get(voice) != "voice":
        return f"equivalence {tags.face(face)}~{tags.voice(voice)} does not pair a face and a voice of this clip"
    return face, voice


def statement_span(text: str, clip: Clip) -> tuple[str, float, float]:
    """The text without a leading ``[m:ss]``/``[m:ss-m:ss]`` marker, and the span it names
    (the whole clip when absent or outside the clip; the marker is kept as ``At m:ss,``)."""
    match = _LEADING_TIME.match(text)
    if match is None:
        return text, clip.start_s, clip.end_s
    start = clock_seconds(match.group(1))
    end = clock_seconds(match.group(2)) if match.group(2) else start
    lo, hi = clip.start_s - _SPAN_SLACK_S, clip.end_s + _SPAN_SLACK_S
    if not (lo <= start <= hi and lo <= end <= hi and start <= end):
        return text, clip.start_s, clip.end_s
    start, end = max(start, clip.start_s), min(max(end, start), clip.end_s)
    rest = text[match.end():]
    return f"At {match.group(0).strip()[1:-1].strip()}, {rest}", start, max(start, end)


def interpret(parsed: Mapping[str, object], clip: Clip, kinds: Mapping[int, str], *, provenance: str,
              confidence: float, link_confidence: float) -> Interpreted:
    """Memories (``confidence``) and face-voice equivalences (``link_confidence``, source ``llm``)
    of a schema-valid reply ``{"episodic": [...], "semantic": [...], "equivalences": [...]}``."""
    dropped: list[str] = []
    pairs: list[tuple[int, int]] = []
    memories: list[Memory] = []
    seen: set[str] = set()
    offered = 0
    for kind in (MemoryKind.EPISODIC, MemoryKind.SEMANTIC):
        for raw in _strings(parsed.get(kind.value)):
            offered += 1
            if kind == MemoryKind.SEMANTIC and (pair := equivalence_line(raw, kinds)) is not None:
                pairs.append(pair) if isinstance(pair, tuple) else dropped.append(pair)
                continue
            memory = _memory(raw, kind, clip, kinds, provenance, confidence, seen, dropped)
            if memory is not None:
                memories.append(memory)
    for item in _dicts(parsed.get("equivalences")):
        offered += 1
        pair = checked_equivalence(item.get("face"), item.get("voice"), kinds)
        pairs.append(pair) if isinstance(pair, tuple) else dropped.append(pair)
    equivalences = tuple(FaceVoiceLink(f, v, link_confidence, LinkSource.LLM) for f, v in dict.fromkeys(pairs))
    return Interpreted(tuple(memories), equivalences, tuple(dropped), offered)


def _memory(raw: str, kind: MemoryKind, clip: Clip, kinds: Mapping[int, str], provenance: str,
            confidence: float, seen: set[str], dropped: list[str]) -> Memory | None:
    text, reason = clean_statement(raw, kinds)
    if text is None:
        dropped.append(f"{kind.value} {raw[:120]!r}: {reason}")
        return None
    key = text.lower().rstrip(". ")
    if key in seen:
        dropped.append(f"{kind.value} {raw[:120]!r}: repeated")
        return None
    seen.add(key)
    text, start, end = statement_span(text, clip) if kind == MemoryKind.EPISODIC else (text, clip.start_s, clip.end_s)
    return Memory(kind=kind, text=text, video_id=clip.video_id, clip_index=clip.index, start_s=start, end_s=end,
                  entity_ids=tags.entity_ids(text), confidence=confidence, provenance=provenance)


def _strings(value: object) -> Iterable[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _dicts(value: object) -> Sequence[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
