"""A person's measured attributes combined over clips, and a shot's kind from its stored parts.

The store keeps one row per entity, clip and attribute name (:class:`~m3agent.domain.EntityAttribute`), each
with a confidence and a weight (the evidence it rests on: voiced seconds, sightings, face crops). A person's
value of an attribute is a weighted vote over all rows of their face and voice entities: each row votes
``weight * confidence`` for its value, ``uncertain`` rows vote for nothing but still count in the total, and
the winner's confidence is its share of the total weight, so a person measured ``left`` in 27 sightings and
``right`` in 3 is ``left`` with about 0.9 times the per-clip confidence. Apparent age is a number: its value
is the weighted median of the rows' ages, its confidence their mean consistency.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from m3agent.perception.attributes.names import STORED, UNCERTAIN, Attribute, label_of

if TYPE_CHECKING:
    from m3agent.domain import EntityAttribute, ShotRecord

Described = tuple[str, str, float]  # (label, value, confidence)


def combine_attributes(rows: Iterable[EntityAttribute]) -> tuple[Described, ...]:
    """One ``(label, value, confidence)`` per attribute name of ``rows`` (the known names first, in
    :class:`~m3agent.perception.attributes.names.Attribute` order); a name whose rows carry no weight is left
    out."""
    by_name: dict[str, list[EntityAttribute]] = defaultdict(list)
    for row in rows:
        by_name[row.name].append(row)
    order = [a.value for a in Attribute if a in by_name] + sorted(n for n in by_name if n not in STORED)
    out = []
    for name in order:
        numeric = name in STORED and Attribute(name).numeric
        combined = _numeric(by_name[name]) if numeric else _vote(by_name[name])
        if combined is not None:
            out.append((label_of(name), *combined))
    return tuple(out)


def _vote(rows: Sequence[EntityAttribute]) -> tuple[str, float] | None:
    total = sum(r.weight for r in rows)
    if total <= 0:
        return None
    score: dict[str, float] = defaultdict(float)
    for r in rows:
        if r.value != UNCERTAIN:
            score[r.value] += r.weight * r.confidence
    if not score or max(score.values()) <= 0:
        return UNCERTAIN, 0.0
    winner = min(score, key=lambda v: (-score[v], v))
    return winner, round(score[winner] / total, 3)


def _numeric(rows: Sequence[EntityAttribute]) -> tuple[str, float] | None:
    values = [(float(r.value), r.weight, r.confidence) for r in rows if _is_number(r.value) and r.weight > 0]
    if not values:
        return None
    total = sum(w for _, w, _ in values)
    ordered = sorted(values)
    seen = 0.0
    median = ordered[-1][0]
    for value, weight, _ in ordered:
        seen += weight
        if seen >= total / 2:
            median = value
            break
    return f"{median:.0f}", round(sum(w * c for _, w, c in values) / total, 3)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def shot_kind(records: Iterable[ShotRecord], start_s: float, end_s: float) -> tuple[str | None, float]:
    """Still or live for the interval ``start_s .. end_s`` of a video from its stored shots (``records``): the
    kinds of the parts overlapping it, each voting ``seconds of overlap * confidence``; ``(None, 0.0)`` when no
    stored shot overlaps it, ``("uncertain", 0.0)`` when none of them decided."""
    overlaps = [(min(end_s, r.end_s) - max(start_s, r.start_s), r) for r in records]
    parts = [(seconds, r) for seconds, r in overlaps if seconds > 0 or (seconds == 0 and start_s == end_s)]
    if not parts:
        return None, 0.0
    total = sum(max(seconds, 1e-6) for seconds, _ in parts)
    score: dict[str, float] = defaultdict(float)
    for seconds, r in parts:
        if r.kind != UNCERTAIN:
            score[r.kind] += max(seconds, 1e-6) * r.confidence
    if not score or max(score.values()) <= 0:
        return UNCERTAIN, 0.0
    winner = min(score, key=lambda k: (-score[k], k))
    return winner, round(score[winner] / total, 3)
