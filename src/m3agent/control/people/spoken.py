"""What is said at a moment or in a scene, or after a quotation, quoted from the speech memories: "What is said
at 1:20?", "Quote the line near 0:40", "What does he say during the dark screen?", "What are the next words after
"…"?", "What is the talk about at 1:20?".

A question that asks for the words said (:attr:`~m3agent.control.reading.QuestionReading.asks_words`) is answered
by the lines themselves, not by a model retelling them: the packaged models, shown the right line, answered
with one word of it ("because") or with a neighbouring line. The window is the question's one instant
(:attr:`~m3agent.control.reading.QuestionReading.moment`, widened by :data:`AROUND_S`, or the nearest line within
:data:`NEAREST_S`) or the scene its plan describes (:func:`~m3agent.graph.scenes.matching_scenes`, at most
:data:`MAX_SCENES` of them). The lines are the perception writer's speech memories (``At 0:05 <voice_3> says:
"..."``, with the captions read on screen then) and, at an instant, the lines of text read on screen that no
line quotes as its caption (a caption the recogniser heard too little of to merge), cited as the answer's
evidence. No window, or no line in it: the question passes to the next answerer.

What a talk at an instant is about (:attr:`~m3agent.control.reading.QuestionReading.asks_gist`) is answered by
the lines of the shot that holds the instant, the :data:`MAX_LINES` nearest it: the 1.5B, shown the retrieved
memories, answered with one line ("Why didn't you do it?") or a word of one ("turbulence"); the talk's lines,
quoted with their span, say what it is about in the speakers' own words.

The words after a quotation (:attr:`~m3agent.control.reading.QuestionReading.asks_continuation`) are read from
the video's transcripts, the lines' quoted words one after another, and the captions and other text read on
screen in time order: a quotation the recogniser cut across two lines is still found, and what follows it runs on
into the next line when the first ends (:data:`FOLLOWING_WORDS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent.domain import MemoryKind, SearchFilter
from m3agent.graph.references import resolve
from m3agent.graph.scenes import Scene, describe, describe_as, matching_scenes
from m3agent.graph.values import span_text
from m3agent.memorize.captions import MIN_WORDS
from m3agent.memorize.scene_memories import read_screen, sounds_text, summary_sounds
from m3agent.memorize.speech_line import read_speech
from m3agent.text import clock, words

if TYPE_CHECKING:
    from m3agent.control.people.plan import Plan
    from m3agent.control.reading import QuestionReading
    from m3agent.domain import Memory
    from m3agent.graph.operators import EntityGraph
    from m3agent.memorize.speech_line import SpeechLine
    from m3agent.store.protocol import MemoryStore

AROUND_S = 1.0
"""Lines this close to the asked instant are said "at" it (a line's bounds are the recogniser's, known to about
a second); two lines meeting at the instant are both quoted."""
NEAREST_S = 4.0
"""With no line around the instant, the nearest line this close is the one meant ("around 1:20")."""
MAX_SCENES = 2
"""A description that fits more scenes than this names none of them: the model answers from the memories."""
MAX_LINES = 8
"""Lines quoted in one answer; more are counted."""
JOINED_GAP_S = 0.5
"""Scenes a description fits that follow one another this closely are one stretch (a performance cut by the camera)."""
FOLLOWING_WORDS = 12
"""The words after a quotation an answer gives: the rest of its sentence and the start of the next."""
MIN_QUOTE_SHARE = 0.6
"""A stretch of the transcript holding at least this share of a quotation's words (in any order) is where it
was said: the recogniser and the asker rarely write a line word for word alike."""


@dataclass(frozen=True, slots=True)
class Spoken:
    """The lines of a window, in time order (the memories quoted), and how many more were left out; or, after a
    quotation, the words that follow it (``said``) and the lines they come from."""

    lines: tuple[Memory, ...]
    more: int = 0
    said: str = ""
    heading: str = ""  # what the lines are ("The talk at 1:19–1:33: "), written before them
    found: str = ""  # after a quotation, the words where it was found, from the start of their sentence
    found_at: float = 0.0
    on_screen: bool = False  # the quotation was found in the captions read on screen, not in the speech heard

    @property
    def text(self) -> str:
        if self.found:
            where = "On screen" if self.on_screen else "Said"
            after = f'After it: "{self.said}"' if self.said else "Nothing is said after it."
            return f'{where} at {clock(self.found_at)}: "{self.found}" {after}'
        quoted = " ".join(" ".join(m.text.split()) for m in self.lines)
        return self.heading + quoted + (f" ({self.more} more lines follow.)" if self.more else "")


def spoken(store: MemoryStore, graph: EntityGraph, video_id: str, reading: QuestionReading, plan: Plan | None,
           before_clip: int | None = None) -> Spoken | None:
    """The lines said in the question's window (see the module); None when it names no window or none was said."""
    if reading.asks_continuation:
        return following(transcript_lines(store, video_id, before_clip), reading.quotes[0])
    if reading.asks_gist and reading.moment is not None:
        return talk_at(speech_lines(store, video_id, before_clip), graph, video_id, reading.moment)
    if not reading.asks_words and not reading.asks_gist:
        return None
    if reading.moment is not None:
        return _at(_theirs(transcript_lines(store, video_id, before_clip), graph, video_id, plan), reading.moment)
    lines = speech_lines(store, video_id, before_clip)
    found = described_scenes(graph, video_id, reading, plan)
    inside = [m for m in lines if any(m.start_s < s.end_s and m.end_s > s.start_s for s in found)]
    if not inside:
        return None
    if not reading.asks_gist:
        return _quoted(inside, "")
    sounds = tuple(dict.fromkeys(sound for scene in found for shot in scene.shots
                                 for sound in summary_sounds(shot.summary)))
    return _quoted(inside, _talk_heading(found[0].start_s, found[-1].end_s, sounds))


def described_scenes(graph: EntityGraph, video_id: str, reading: QuestionReading, plan: Plan | None) -> list[Scene]:
    """The scenes the question describes (at most :data:`MAX_SCENES`, else none): the plan's description when it
    wrote one the question holds, else the question's own words when they say what the picture is or name an
    event (:attr:`~m3agent.control.reading.QuestionReading.description`: "the dark screen with a voice", "the
    split-screen debate", "the rap performance on stage"; not a person's look alone, "the man in glasses", whose
    lines are another answerer's)."""
    if plan is not None and plan.person.about.strip() and not plan.person.quote.strip():
        wanted = describe_as(plan.person.about, plan.person.kind)
    else:
        wanted = describe(reading.description)
        if not wanted.pictured and not wanted.event:
            return []
    found = _joined(matching_scenes(graph, video_id, wanted))
    return found if len(found) <= MAX_SCENES else []


def _joined(found: list[Scene]) -> list[Scene]:
    """``found`` (in time order) with scenes that follow one another without a gap joined into one: a performance
    filmed with camera cuts is several scenes that fit alike, and one thing described."""
    out: list[Scene] = []
    for scene in found:
        if out and scene.start_s - out[-1].end_s <= JOINED_GAP_S:
            out[-1] = Scene(out[-1].shots + scene.shots, max(out[-1].fit, scene.fit))
        else:
            out.append(scene)
    return out


def speech_lines(store: MemoryStore, video_id: str, before_clip: int | None) -> list[Memory]:
    """The speech memories of a video (up to ``before_clip``), in time order."""
    return [m for m in transcript_lines(store, video_id, before_clip) if read_speech(m.text) is not None]


def transcript_lines(store: MemoryStore, video_id: str, before_clip: int | None) -> list[Memory]:
    """The speech memories of a video (up to ``before_clip``) and the lines of text read on screen that no speech
    memory quotes as its caption (:func:`~m3agent.memorize.scene_memories.read_screen`, at least
    :data:`~m3agent.memorize.captions.MIN_WORDS` words: a caption the recogniser's words did not hold enough of
    to be merged into them, not a logo), in time order: what a viewer could hear or read."""
    flt = SearchFilter(video_ids=(video_id,), kinds=(MemoryKind.EPISODIC,))
    return sorted((m for m in store.memories(video_id, flt=flt)
                   if (before_clip is None or m.clip_index <= before_clip)
                   and (read_speech(m.text) is not None or len(words(read_screen(m.text) or "")) >= MIN_WORDS)),
                  key=lambda m: (m.start_s, m.end_s))


def talk_at(lines: list[Memory], graph: EntityGraph, video_id: str, moment: float) -> Spoken | None:
    """The lines of the shot holding ``moment`` (without shots, those within :data:`NEAREST_S` of it), the
    :data:`MAX_LINES` nearest the moment in time order, headed by the span they cover; None when none was said."""
    shot = graph.shot_at(video_id, moment)
    start, end = (shot.start_s, shot.end_s) if shot is not None else (moment - NEAREST_S, moment + NEAREST_S)
    inside = [m for m in lines if m.start_s < end and m.end_s > start]
    nearest = sorted(sorted(inside, key=lambda m: _distance(m, moment))[:MAX_LINES], key=lambda m: m.start_s)
    if not nearest:
        return None
    sounds = summary_sounds(shot.summary) if shot is not None else ()
    return Spoken(tuple(nearest), heading=_talk_heading(nearest[0].start_s, nearest[-1].end_s, sounds))


def _talk_heading(start_s: float, end_s: float, sounds: tuple[str, ...] = ()) -> str:
    """``The talk at 0:48–0:57 (sounds: music, rapping): ``: the span, and the sounds heard with the talk, which
    say what kind of talk it is (a song, a laughing audience)."""
    heard = f" ({sounds_text(sounds)})" if sounds else ""
    return f"The talk at {span_text(start_s, end_s)}{heard}: "


def following(lines: list[Memory], quotation: str) -> Spoken | None:
    """The :data:`FOLLOWING_WORDS` words after ``quotation`` where a transcript holds most of it, with the words
    where it was found and the lines they come from; None when no stretch holds :data:`MIN_QUOTE_SHARE` of it.
    Two transcripts are searched: the captions read on screen while the lines were said (written text, word for
    word when a video has them) and the recogniser's words; one where words follow the quotation answers first,
    then the one holding more of it, the captions on a tie. Found where nothing follows (the last words of the
    video so far), the answer quotes where it was found and says so."""
    wanted = words(quotation)
    if not wanted:
        return None
    read = [(m, line) for m in lines if (line := read_speech(m.text)) is not None]
    shown: list[tuple[Memory, tuple[str, ...]]] = [(m, (text,)) for m in lines
                                                   if (text := read_screen(m.text)) is not None]
    captions = sorted([(m, line.captions) for m, line in read] + shown, key=lambda pair: pair[0].start_s)
    found = [f for stream in (_caption_stream(captions), _speech_stream(read)) if (f := _found(stream, wanted))]
    if not found:
        return None
    best = max(found, key=lambda f: (f.followed, f.share))
    stream, first, end = best.stream, best.first, best.end
    after = stream[end: end + FOLLOWING_WORDS]
    lead = stream[max(_sentence_start(stream, first), first - FOLLOWING_WORDS): end]
    sources = tuple(dict.fromkeys(w.memory for w in lead + after))
    return Spoken(sources, said=" ".join(w.token for w in after), found=" ".join(w.token for w in lead),
                  found_at=lead[0].memory.start_s, on_screen=stream[0].caption)


@dataclass(frozen=True, slots=True)
class _Word:
    """One word of a transcript: as written, the memory it comes from, and which of its lines (captions apart)."""

    token: str
    memory: Memory
    line: int
    caption: bool


@dataclass(frozen=True, slots=True)
class _Match:
    """Where a transcript holds a quotation best: the share of its distinct words held, and the stretch
    ``stream[first:end]``."""

    share: float
    stream: list[_Word]
    first: int
    end: int

    @property
    def followed(self) -> bool:
        """Whether anything is said after the stretch."""
        return self.end < len(self.stream)


def _speech_stream(read: list[tuple[Memory, SpeechLine]]) -> list[_Word]:
    return [_Word(token, m, i, False) for i, (m, line) in enumerate(read) for token in line.quote.split()]


def _caption_stream(read: list[tuple[Memory, tuple[str, ...]]]) -> list[_Word]:
    """The words read on screen in time order, each memory's lines (a speech line's captions, or a line of text of
    its own); a caption read again with the next line (it stays on screen) once."""
    out: list[_Word] = []
    previous: tuple[str, ...] = ()
    taken = 0  # captions taken so far: each is a line of its own
    for m, captions in read:
        for caption in (c for c in captions if c not in previous):
            out += [_Word(token, m, taken, True) for token in caption.split()]
            taken += 1
        previous = captions
    return out


def _found(stream: list[_Word], wanted: list[str]) -> _Match | None:
    """Where ``stream`` holds the most of ``wanted``'s distinct words in a stretch of its length, and of those the
    stretch holding most of them in the quotation's order (a line that says the same words twice in another order,
    "ask not what your country can do for you, ask what you can do for your country", is found where the asker's
    order is); None when that is under :data:`MIN_QUOTE_SHARE`."""
    distinct = set(wanted)
    plain = [" ".join(words(w.token)) for w in stream]
    best, first, end = (0, 0), 0, -1
    for start in range(len(stream)):
        window = plain[start: start + len(wanted)]
        held = sum(w in window for w in distinct)
        if held >= best[0] and held and (score := (held, _in_order(window, wanted))) > best:
            best, first, end = score, start, start + len(window)
    if best[0] < MIN_QUOTE_SHARE * len(distinct):
        return None
    return _Match(best[0] / len(distinct), stream, first, end)


def _in_order(window: list[str], wanted: list[str]) -> int:
    """How many of ``wanted``'s words ``window`` holds in the same order (the longest common subsequence)."""
    row = [0] * (len(wanted) + 1)
    for token in window:
        diagonal = 0
        for j, w in enumerate(wanted, 1):
            diagonal, row[j] = row[j], diagonal + 1 if token == w else max(row[j], row[j - 1])
    return row[-1]


def _sentence_start(stream: list[_Word], start: int) -> int:
    """Where the sentence holding the word at ``start`` begins: after the last word before it that ends a
    sentence, or where its line begins. The answer quotes the words where the quotation was found from there: the
    recogniser may write a line's words in another order than the asker ("if you were effective senator, you could
    have done it" for "you could have done it if you were an effective senator"), and what the asker takes for
    the words after the quotation then stands before them or among them."""
    begins = start
    while begins > 0 and stream[begins - 1].line == stream[start].line \
            and not stream[begins - 1].token.endswith(_ENDS):
        begins -= 1
    return begins


_ENDS = (".", "?", "!")


_ANYONE = frozenset({"person", "speaker", "voice"})
"""Kinds of reference that, with nothing else said of them, describe whoever is there."""


def _theirs(lines: list[Memory], graph: EntityGraph, video_id: str, plan: Plan | None) -> list[Memory]:
    """The lines of the person the plan describes ("what does the woman on the left say at 0:40?"), when the graph
    finds that person and they say something; else every line. "The speaker" or "someone" at a moment describes
    no one: every line there is theirs, and the text read on screen with them."""
    person = plan.person if plan is not None else None
    if person is None or person.kind in ("none", "photo") or (
            person.kind in _ANYONE and person.place == "any" and not person.about.strip()
            and person.wears == "any" and person.dressed == "any"):
        return lines
    found = resolve(graph, video_id, person)
    voices = set(found.person.voice_ids) if found is not None and found.person is not None else set()
    mine = [m for m in lines if voices & set(m.entity_ids)]
    return mine or lines


def _at(lines: list[Memory], moment: float) -> Spoken | None:
    around = [m for m in lines if m.start_s - AROUND_S <= moment <= m.end_s + AROUND_S]
    if around:
        return _quoted(around)
    nearest = min(lines, key=lambda m: _distance(m, moment), default=None)
    return _quoted([nearest]) if nearest is not None and _distance(nearest, moment) <= NEAREST_S else None


def _distance(memory: Memory, moment: float) -> float:
    return max(0.0, memory.start_s - moment, moment - memory.end_s)


def _quoted(lines: list[Memory], heading: str = "") -> Spoken | None:
    return Spoken(tuple(lines[:MAX_LINES]), max(0, len(lines) - MAX_LINES), heading=heading) if lines else None
