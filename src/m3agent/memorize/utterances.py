"""Speech as utterances: one per speaker's contiguous, sentence-complete speech, bounded in length.

ASR and diarization cut speech at pauses and speaker-change guesses, not at
sentences: "Why didn't" / "you do it?" arrive as two segments, often with
different speakers, because a speaker turn was guessed mid-sentence. A
memory per segment is a fragment nobody can answer from. Here segments are
first joined into sentences (a segment that does not end a sentence
continues into the next one when that starts within
:data:`CONTINUATION_GAP_S`, whoever the diarizer thought spoke it; the
sentence goes to the speaker of most of its words), then a speaker's
consecutive sentences are joined into one utterance while the pause stays
under :data:`UTTERANCE_GAP_S`, nobody else speaks in between, and the
utterance stays under :data:`MAX_WORDS` words and :data:`MAX_SECONDS`.

A cut to another scene ends a sentence when the speaker changes there: a
segment whose words straddle a cut is split at it (by word times), and an open
sentence does not continue across the cut into another voice. Without this an
edited video's last words of one scene ("...effective senator, to do.") and the
next scene's first sentence by someone else became one utterance of whoever said
more of it. One voice speaking over a cut (a narrator) stays one sentence.

Times come from the words (``VoiceSegment.words``) where the ASR gave them,
else from the segments; the segments themselves, with their word times,
stay in the store as the evidence under each utterance.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from m3agent.domain import VoiceSegment, Word
from m3agent.text import SPACELESS_LANGUAGES

CONTINUATION_GAP_S = 0.35
"""A sentence left open continues into speech that starts this soon after (a diarizer's cut, not a turn)."""
UTTERANCE_GAP_S = 1.5
"""A longer pause ends an utterance even when the same person speaks on."""
MAX_WORDS = 60
MAX_SECONDS = 25.0
"""Bounds of one utterance (a memory must stay one retrievable statement); a sentence is never cut."""
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*$")


@dataclass(frozen=True, slots=True)
class Utterance:
    """Speech of one voice entity: the joined text and its span (absolute seconds)."""

    entity_id: int
    text: str
    start_s: float
    end_s: float
    segments: int

    @property
    def words(self) -> int:
        return len(self.text.split())


def utterances(voices: Sequence[VoiceSegment], cuts: Sequence[float] = ()) -> list[Utterance]:
    """The utterances of a clip's voice segments, in time order (unattributed or empty segments skipped).

    ``cuts`` are the times of scene changes (shots that start at a cut); none: the clip is one scene."""
    spoken = sorted((piece for s in voices if s.entity_id is not None and s.text.strip()
                     for piece in split_at_cuts(s, cuts)), key=lambda s: s.start_s)
    out: list[Utterance] = []
    for sentence in _sentences(spoken, sorted(cuts)):
        last = out[-1] if out else None
        if last is not None and _continues(last, sentence):
            out[-1] = Utterance(last.entity_id, f"{last.text} {sentence.text}", last.start_s, sentence.end_s,
                                last.segments + sentence.segments)  # fmt: skip
        else:
            out.append(sentence)
    return out


def _continues(utterance: Utterance, sentence: Utterance) -> bool:
    return (
        sentence.entity_id == utterance.entity_id
        and sentence.start_s - utterance.end_s <= UTTERANCE_GAP_S
        and utterance.words + sentence.words <= MAX_WORDS
        and sentence.end_s - utterance.start_s <= MAX_SECONDS
    )


def split_at_cuts(segment: VoiceSegment, cuts: Sequence[float]) -> list[VoiceSegment]:
    """``segment`` in pieces at the cuts its words straddle (a word goes to the side its middle is on); a segment
    without word times, or within one scene, is returned whole."""
    inside = [c for c in cuts if segment.words and _start(segment) < c < _end(segment)]
    if not inside:
        return [segment]
    pieces: list[list[Word]] = [[]]
    bounds = iter(sorted(inside))
    bound = next(bounds, None)
    for word in segment.words:
        while bound is not None and (word.start_s + word.end_s) / 2 >= bound:
            pieces.append([])
            bound = next(bounds, None)
        pieces[-1].append(word)
    sep = "" if segment.language in SPACELESS_LANGUAGES else " "
    return [dataclasses.replace(segment, start_s=ws[0].start_s, end_s=ws[-1].end_s, words=tuple(ws),
                                text=sep.join(w.text for w in ws)) for ws in pieces if ws]


def _sentences(segments: Sequence[VoiceSegment], cuts: Sequence[float] = ()) -> list[Utterance]:
    """Segments joined into sentences; each sentence goes to the speaker of most of its words."""
    groups: list[list[VoiceSegment]] = []
    for segment in segments:
        previous = groups[-1][-1] if groups else None
        if (previous is not None and _open(groups[-1]) and segment.start_s - _end(previous) <= CONTINUATION_GAP_S
                and not _new_scene_voice(previous, segment, cuts)):
            groups[-1].append(segment)
        else:
            groups.append([segment])
    return [_sentence(group) for group in groups]


def _new_scene_voice(previous: VoiceSegment, segment: VoiceSegment, cuts: Sequence[float]) -> bool:
    """``segment`` is another voice than ``previous`` and a cut lies between them (it starts another scene)."""
    return previous.entity_id != segment.entity_id and any(_end(previous) <= c <= _start(segment) + 1e-6
                                                           for c in cuts)


def _open(group: list[VoiceSegment]) -> bool:
    """The group's last segment leaves a sentence unfinished, and the group is not already long."""
    words = sum(len(s.text.split()) for s in group)
    return not _SENTENCE_END.search(group[-1].text.strip()) and words < MAX_WORDS


def _sentence(group: list[VoiceSegment]) -> Utterance:
    counts: Counter[int] = Counter()
    for segment in group:
        counts[int(segment.entity_id or 0)] += len(segment.text.split())
    speaker = max(counts, key=lambda e: (counts[e], -_first_index(group, e)))
    text = " ".join(" ".join(s.text.split()) for s in group)
    return Utterance(speaker, text, _start(group[0]), _end(group[-1]), len(group))


def _first_index(group: list[VoiceSegment], entity: int) -> int:
    return next(i for i, s in enumerate(group) if s.entity_id == entity)


def _start(segment: VoiceSegment) -> float:
    return segment.words[0].start_s if segment.words else segment.start_s


def _end(segment: VoiceSegment) -> float:
    return segment.words[-1].end_s if segment.words else segment.end_s
