"""Evaluation episodes by seed: a seeded choice and order of catalogue pieces.

``generate`` draws, with ``random.Random(seed)``, a split screen, a still under a voice, a voice over a dark
screen, speech with a transcript and two pieces that share a person (Trump in the debate, the Oval Office or as
a voice; the woman with glasses in two segments; ...), then fills the target length with more pieces; a piece
may recur, which is itself a "seen earlier?" fact. Pieces longer than a quarter of the target are left out of
short episodes. The same seed and catalogue always give the same episode; ground truth follows from the order
of the parts. (The questions: :mod:`m3agent.bench.episodes.questions`.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from m3agent.bench.episodes.catalogue import Catalogue, Piece
from m3agent.bench.episodes.people_eval import EvalPart
from m3agent.errors import BenchmarkError

MIN_MINUTES, MAX_MINUTES = 2.0, 30.0
REPEAT_CHANCE = 0.15  # the chance that a filling step replays a piece already chosen
LENGTH_SLACK_S = 5.0  # an episode may end this much before or after its target


@dataclass(frozen=True, slots=True)
class Placed:
    """A piece at ``index`` in the episode; ``part_id`` names it in questions (``p03_debate``)."""

    part_id: str
    piece: Piece
    index: int


@dataclass(frozen=True, slots=True)
class Episode:
    seed: int
    minutes: float
    catalogue: str
    parts: tuple[Placed, ...]

    @property
    def name(self) -> str:
        """The cache name: seed, length and catalogue digest."""
        return f"gen-s{self.seed}-{self.minutes:g}m-{self.catalogue}"

    @property
    def planned_s(self) -> float:
        return sum(p.piece.duration_s for p in self.parts)

    def eval_parts(self) -> tuple[EvalPart, ...]:
        return tuple(p.piece.eval_part(p.part_id) for p in self.parts)


def generate(catalogue: Catalogue, seed: int, minutes: float) -> Episode:
    """The episode of ``seed``, about ``minutes`` long (within :data:`LENGTH_SLACK_S`, when pieces allow)."""
    if not MIN_MINUTES <= minutes <= MAX_MINUTES:
        raise BenchmarkError(f"an episode lasts {MIN_MINUTES:g} to {MAX_MINUTES:g} minutes, not {minutes:g}")
    rng = random.Random(seed)
    target = minutes * 60
    allowed = [p for p in catalogue.pieces if p.duration_s <= max(20.0, target / 4)]
    chosen = _required(rng, allowed)
    while (remaining := target - sum(p.duration_s for p in chosen)) > LENGTH_SLACK_S:
        fits = [p for p in allowed if p.duration_s <= remaining + LENGTH_SLACK_S]
        if not fits:
            break
        fresh = [p for p in fits if p not in chosen]
        replay = len(chosen) >= 3 and rng.random() < REPEAT_CHANCE
        chosen.append(rng.choice(fits if replay or not fresh else fresh))
    rng.shuffle(chosen)
    ordered = _no_adjacent_repeats(chosen)
    parts = tuple(Placed(f"p{str(i).zfill(2)}_{p.id}", p, i) for i, p in enumerate(ordered, 1))
    return Episode(seed, minutes, catalogue.digest[:8], parts)


def _required(rng: random.Random, allowed: list[Piece]) -> list[Piece]:
    """A split screen, a still, a dark screen, speech with a transcript (so speech can be asked about), and two
    pieces sharing a person (on screen or as a voice)."""
    chosen: list[Piece] = []
    for kind in ("split", "still", "dark", "speech"):
        pool = [p for p in allowed if _is(kind, p)]
        if kind == "speech" and any(_is(kind, p) for p in chosen):
            continue
        if not pool:
            raise BenchmarkError(f"the catalogue has no {kind} piece short enough for this length")
        chosen.append(rng.choice(pool))
    shared = _people_in_two(allowed)
    who = rng.choice(sorted(shared))
    for piece in rng.sample(shared[who], 2):
        if piece not in chosen:
            chosen.append(piece)
    return chosen


def _is(kind: str, piece: Piece) -> bool:
    """Whether ``piece`` is a split screen, a still, a dark screen, or speech with a known transcript."""
    if kind == "split":
        return piece.split_screen
    if kind == "speech":
        return any(line.text != "unknown" for line in piece.lines or ())
    return piece.kind == kind


def _people_in_two(pieces: list[Piece]) -> dict[str, list[Piece]]:
    """Identity key -> the pieces that show or voice that person, for people in two pieces or more."""
    found: dict[str, list[Piece]] = {}
    for piece in pieces:
        for who in sorted({p.who for p in piece.people} | {v.who for v in piece.voices}):
            found.setdefault(who, []).append(piece)
    return {who: ps for who, ps in found.items() if len(ps) >= 2}


def _no_adjacent_repeats(pieces: list[Piece]) -> list[Piece]:
    """``pieces`` with a piece never right after itself (a replay is moved to the first place it fits)."""
    out: list[Piece] = []
    waiting: list[Piece] = []
    for piece in pieces:
        if out and out[-1] is piece:
            waiting.append(piece)
            continue
        out.append(piece)
        for held in list(waiting):
            if out[-1] is not held:
                out.append(held)
                waiting.remove(held)
    for held in waiting:  # no later place fitted: the first gap where it has different neighbours
        spot = next((i for i in range(len(out) + 1)
                     if (i == 0 or out[i - 1] is not held) and (i == len(out) or out[i] is not held)), len(out))
        out.insert(spot, held)
    return out
