"""A change of voice inside one diarized turn: the part that is another speaker's goes to that speaker.

The d-vector diarizer labels speech by 1.6 s windows and folds clusters under 1.5 s into their neighbours, so
when two people talk over each other or answer quickly, a turn can hold a second or two of someone else
(the interview: the long voice's "I don't worry about talking to you" filed under a third speaker whose two
halves CAM++ scores 0.11 against each other; that second counted as the long voice's silence while its lips
moved, and held its lip-sync correlation at 0.17; docs/benchmarks.md, issue 48).

For each turn of twice ``MIN_PIECE_S`` to ``LONGEST_TURN_S`` in a clip with two or more speakers, the cut that
makes its two sides least alike is found with 1 s CAM++ windows every ``STEP_S``; when the windows there score under
``SCREEN_BELOW`` and the two sides, each embedded whole, under ``change_below``, each side goes to the other
speaker it scores highest against if that is at least ``join_from`` and ``MARGIN`` above the turn's own speaker
(over the speaker's other turns). Nothing founds a new speaker here: a side that fits no one stays where it was,
so speech can only move to a voice heard elsewhere in the same clip.

A speaker heard twice far apart (:func:`split_apart`): the diarizer also clusters the last words of one person and,
after a silence of ten seconds, the first words of the next (a father's few words in a playground clip and a senator
who begins 9.6 s later were one speaker of the identity bench's episode, and one voice entity). When the speaker's
turns before and after its longest pause of at least ``APART_S`` score under ``change_below``, the smaller side
goes to the other speaker it fits, as above, or is a speaker of its own: the two sides were never heard together,
so the diarizer's cluster is the only evidence they are one voice, and CAM++ says they are not.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING

from m3agent.perception.audio.diarize import Diarization, SpeakerTurn
from m3agent.perception.audio.speakers import RATE

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from m3agent.perception.audio.campplus import CamppEmbedder

MIN_PIECE_S = 1.0
"""The shortest side of a cut: CAM++ was measured from 1 s of a voice on (docs/benchmarks.md, Voice embedders)."""
STEP_S = 0.5
"""Cut positions and window hop. 0.25 s found the same changes on the shared sets at 1.3 times the cost."""
WINDOW_FRAMES = 100
"""1 s search windows (10 ms frames): no window may straddle a cut and still count for one side."""
LONGEST_TURN_S = 4.0
"""Longer turns are not searched: the search costs about 0.03 CPU s per second of turn (every turn: 0.9 CPU s for a
clip of dense speech), and the changes found on the shared sets were all in turns of 2.1-2.7 s."""
SCREEN_BELOW = 0.45
"""The windows' cosine at the best cut under which the two sides are embedded whole. The windows' means differ
from the whole sides' embeddings by up to 0.09 at the four changes found on the shared sets, so the screen sits
0.15 above the default change bar; it spares two embeddings for most turns."""
MARGIN = 0.2
"""How much better a side must fit another speaker than its own: the sides moved on the shared sets fit their new
speaker 0.24 and 0.41 better; one that fit another 0.08 better was speech two people shared."""


def split_changes(
    audio: npt.NDArray[np.float32], diarization: Diarization, embedder: CamppEmbedder, *, change_below: float,
    join_from: float,
) -> tuple[Diarization, frozenset[int]]:
    """``diarization`` with each changed turn's sides given to the speakers they are, and the speakers that took
    speech (empty: ``diarization`` itself).

    Every speaker keeps its embedding; the caller takes those of the speakers that took speech again. A speaker
    that only gave some away keeps the one of its whole turns: what is left of it may be a second or so, too little
    to stand for a voice alone (left to itself, such a remainder founded a voice entity in the episode of
    docs/benchmarks.md, where the whole speaker had rejoined its entity).
    """
    if change_below <= -1 or len(diarization.embeddings) < 2:
        return diarization, frozenset()
    turns = list(diarization.turns)
    out: list[SpeakerTurn] = []
    gained: set[int] = set()
    for index, turn in enumerate(turns):
        pieces = _split_turn(audio, turns, index, diarization, embedder, change_below, join_from)
        gained |= {piece.speaker for piece in pieces if piece.speaker != turn.speaker}
        out.extend(pieces)
    if not gained:
        return diarization, frozenset()
    return dataclasses.replace(diarization, turns=tuple(sorted(out, key=lambda t: t.start_s))), frozenset(gained)


def _split_turn(
    audio: npt.NDArray[np.float32], turns: list[SpeakerTurn], index: int, diarization: Diarization,
    embedder: CamppEmbedder, change_below: float, join_from: float,
) -> list[SpeakerTurn]:
    """The turn as it is, or its two sides, each with the speaker it goes to."""
    turn = turns[index]
    if not 2 * MIN_PIECE_S <= turn.end_s - turn.start_s <= LONGEST_TURN_S:
        return [turn]
    found = best_cut(_samples(audio, turn.start_s, turn.end_s), embedder)
    if found is None or found[1] >= SCREEN_BELOW:
        return [turn]
    at = turn.start_s + found[0]
    sides = [(turn.start_s, at), (at, turn.end_s)]
    vectors = [embedder.embed(_samples(audio, a, b)) for a, b in sides]
    if float(vectors[0] @ vectors[1]) >= change_below:
        return [turn]
    rest = [t for i, t in enumerate(turns) if i != index and t.speaker == turn.speaker]
    own = embedder.embed(_joined(audio, rest)) if rest else None
    others = {k: v for k, v in diarization.embeddings.items() if k != turn.speaker}
    return [SpeakerTurn(a, b, _destination(v, own, others, join_from, turn.speaker))
            for (a, b), v in zip(sides, vectors, strict=True)]


def best_cut(samples: npt.NDArray[np.float32], embedder: CamppEmbedder) -> tuple[float, float] | None:
    """Seconds into ``samples`` where the mean 1 s windows before and after are least alike, and their cosine
    (None: too short)."""
    import numpy as np

    hop = round(STEP_S * 100)
    windows, starts = embedder.embed_windows(samples, hop_frames=hop, window_frames=WINDOW_FRAMES)
    ends = starts + WINDOW_FRAMES
    scored: list[tuple[float, float]] = []
    for cut in np.arange(MIN_PIECE_S, len(samples) / RATE - MIN_PIECE_S + 1e-6, STEP_S):
        frame = round(cut * 100)
        left, right = windows[ends <= frame], windows[starts >= frame]
        if len(left) and len(right):
            a, b = left.mean(axis=0), right.mean(axis=0)
            scored.append((float(cut), float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-9))))
    return min(scored, key=lambda pair: pair[1], default=None)


APART_S = 5.0
"""The pause in a speaker's speech after which :func:`split_apart` checks that the two sides are one voice: in a
conversation a speaker is answered and speaks again within a few seconds, and the diarizer's cluster of both sides
is evidence then. Measured (docs/benchmarks.md): no speaker of the RTTM sets' 30 s clips is split; with a clip's
8 s of context, one of the AMI minute (FEE013's 7.7 s, then 24 s later 1.5 s of two others talking at once: 0.20),
rightly, and the playground father and Ed Markey of the identity bench's episode (0.04)."""


def split_apart(
    audio: npt.NDArray[np.float32], diarization: Diarization, embedder: CamppEmbedder, *, change_below: float,
    join_from: float,
) -> tuple[Diarization, frozenset[int]]:
    """``diarization`` with each speaker heard twice far apart in two voices split (see the module), and the
    speakers whose speech changed (empty: ``diarization`` itself); a side that fits no other speaker is given a new
    speaker index."""
    if change_below <= -1:
        return diarization, frozenset()
    turns = list(diarization.turns)
    changed: set[int] = set()
    for speaker in sorted(diarization.embeddings):
        mine = [i for i, t in enumerate(turns) if t.speaker == speaker]
        at = _longest_pause(turns, mine)
        if at is None:
            continue
        sides = [mine[: at + 1], mine[at + 1 :]]
        heard = [_seconds([turns[i] for i in side]) for side in sides]
        if min(heard) < MIN_PIECE_S:
            continue
        vectors = [embedder.embed(_joined(audio, [turns[i] for i in side])) for side in sides]
        if float(vectors[0] @ vectors[1]) >= change_below:
            continue
        small = 0 if heard[0] < heard[1] else 1  # the later side on a tie: the speaker keeps who it was first
        others = {k: v for k, v in diarization.embeddings.items() if k != speaker}
        new = _destination(vectors[small], vectors[1 - small], others, join_from, speaker)
        if new == speaker:
            new = max({t.speaker for t in turns} | set(diarization.embeddings)) + 1
        moved = set(sides[small])
        turns = [SpeakerTurn(t.start_s, t.end_s, new) if i in moved else t for i, t in enumerate(turns)]
        changed |= {speaker, new}
    if not changed:
        return diarization, frozenset()
    return dataclasses.replace(diarization, turns=tuple(turns)), frozenset(changed)


def _longest_pause(turns: list[SpeakerTurn], mine: list[int]) -> int | None:
    """The position in ``mine`` (indices of one speaker's turns) after which its longest pause of at least
    :data:`APART_S` falls; None without one."""
    pauses = [(turns[b].start_s - turns[a].end_s, k) for k, (a, b) in enumerate(itertools.pairwise(mine))]
    longest = max(pauses, default=None)
    return longest[1] if longest is not None and longest[0] >= APART_S else None


def _destination(
    vector: npt.NDArray[np.float32], own: npt.NDArray[np.float32] | None,
    others: dict[int, npt.NDArray[np.float32]], join_from: float, speaker: int,
) -> int:
    """The other speaker a side fits (at least ``join_from`` and ``MARGIN`` above its own), else its own."""
    if not others:
        return speaker
    score, best = max((float(vector @ v), k) for k, v in others.items())
    own_score = float(vector @ own) if own is not None else None
    if score >= join_from and (own_score is None or score >= own_score + MARGIN):
        return best
    return speaker


def _samples(audio: npt.NDArray[np.float32], start_s: float, end_s: float) -> npt.NDArray[np.float32]:
    return audio[round(start_s * RATE) : round(end_s * RATE)]


def _joined(audio: npt.NDArray[np.float32], turns: list[SpeakerTurn]) -> npt.NDArray[np.float32]:
    import numpy as np

    return np.concatenate([_samples(audio, t.start_s, t.end_s) for t in turns])


def _seconds(turns: list[SpeakerTurn]) -> float:
    return sum(t.end_s - t.start_s for t in turns)
