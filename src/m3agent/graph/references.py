"""Resolve a description of a person or a moment ("the woman on the right at 0:44", "the voice that says
'ask not'", "the first scene") to an interval of a video and, where asked, a person of the graph.

A :class:`Reference` is what a question says, already typed (the query plan of :mod:`m3agent.control.people.plan`
writes it); resolution is deterministic and uses only the operators of :class:`EntityGraph`:

- the **window** is the instant named (widened by :data:`INSTANT_S`), the first or last shot, the span of the
  utterance whose words best match the quote, or the whole video;
- a **voice** (or an unseen speaker) is one of the people heard in the window, the one speaking the quote when
  there is one; a **person seen** is one of the people on screen, filtered by frame position, by apparent
  gender ("man" / "woman": measured face gender, else voice register) and by measured eyewear ("with
  glasses"), falling back to the speakers when nobody is on screen;
- a person named by no moment but by something measured about them ("the woman with glasses") is the person
  of the video it fits best, and the window is their first time on screen (or the one the reference counts:
  "when she appears for the second time").

Ties are broken by who is nearest the instant and, for people seen, foreground before background. A
filter that would leave nobody is dropped, never the person: a description is evidence, not a veto.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from m3agent.graph.fits import fits_clothes, fits_eyewear, fits_gender
from m3agent.graph.scenes import describe, matching_scenes
from m3agent.graph.values import Role
from m3agent.perception.attributes.names import Attribute
from m3agent.text import STOPWORDS, words

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Moment, Person, ShotView, Sighting, Utterance

Kind = Literal["none", "person", "man", "woman", "voice", "speaker", "photo"]
Place = Literal["any", "left", "right", "centre", "foreground", "background"]
Scene = Literal["any", "first", "last"]
Wears = Literal["any", "glasses"]
INSTANT_S = 1.0
"""An instant named in a question is read as this many seconds either side (people are sampled at 2 fps and
speech is segmented, so an exact instant often holds nobody)."""
NEAR_S = 3.0  # with nobody heard inside the window, a voice this close to it is the one meant
MIN_QUOTE_MATCH = 0.5  # share of the quote's content words an utterance must hold to be the one quoted
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reference:
    """A person or a moment as a question names it: ``kind`` of person (``none``: only a moment), frame
    ``place``, a clock ``time_s``, the first / last ``scene``, a ``quote`` of what is said, what the person
    ``wears`` and, for a person named by no moment, which of their times on screen is meant (``occurrence``: 1
    the first, 2 the second, -1 the last)."""

    kind: Kind = "none"
    place: Place = "any"
    time_s: float | None = None
    scene: Scene = "any"
    quote: str = ""
    wears: Wears = "any"
    occurrence: int = 1
    dressed: str = "any"
    """The colour of the person's clothes (``"dark"``: "the man in a dark suit"; ``any`` unsaid)."""
    about: str = ""
    """A scene described by its content ("the photo of two men"), found by :mod:`m3agent.graph.scenes`."""

    @property
    def anchored(self) -> bool:
        """Whether the reference pins a time (an instant, a scene, a quote or a described scene)."""
        return self.time_s is not None or self.scene != "any" or bool(self.quote.strip()) or bool(self.about.strip())

    @property
    def heard(self) -> bool:
        """Whether the reference names a voice (a speaker heard) rather than a face."""
        return self.kind in ("voice", "speaker") or (bool(self.quote.strip()) and self.kind == "none")


@dataclass(frozen=True, slots=True)
class Resolved:
    """A reference read against the graph: the ``window`` (start, end) it names, the ``shot`` there, the
    ``person`` meant (None for a moment) and how they were found there (``sighting`` or ``utterance``)."""

    video_id: str
    window: tuple[float, float]
    shot: ShotView | None
    person: Person | None = None
    sighting: Sighting | None = None
    utterance: Utterance | None = None


def window_of(graph: EntityGraph, video_id: str, ref: Reference) -> tuple[float, float] | None:
    """The interval ``ref`` names; None when it names no time, scene or quote."""
    shots = graph.shots(video_id)
    if ref.time_s is not None:
        return (max(0.0, ref.time_s - INSTANT_S), ref.time_s + INSTANT_S)
    if ref.scene != "any" and shots:
        shot = shots[0] if ref.scene == "first" else shots[-1]
        return (shot.start_s, shot.end_s)
    if ref.quote.strip():
        said = quoted(graph, video_id, ref.quote)
        return (said.start_s, said.end_s) if said is not None else None
    if ref.about.strip():
        found = matching_scenes(graph, video_id, describe(ref.about))
        return (found[0].start_s, found[0].end_s) if found else None
    return None


def quoted(graph: EntityGraph, video_id: str, quote: str) -> Utterance | None:
    """The utterance of the video holding most of ``quote``'s content words (None below
    :data:`MIN_QUOTE_MATCH`), then most of all its words, then the earliest."""
    wanted = _content(quote)
    if not wanted:
        return None
    every = set(words(quote))
    scored = [(len(wanted & _content(u.text)) / len(wanted), len(every & set(words(u.text))), -u.start_s, u)
              for u in graph.heard(video_id, 0.0, float("inf"))]
    # ties on the content words go to the utterance holding more of the whole quote: "why didn't you do it" is
    # the segment "Why didn't you do it?", not a two-word fragment "Why didn't" that the diarizer gave another voice
    best = max(scored, key=lambda s: (s[0], s[1], s[2]), default=None)
    return best[3] if best is not None and best[0] >= MIN_QUOTE_MATCH else None


def resolve(graph: EntityGraph, video_id: str, ref: Reference) -> Resolved | None:
    """``ref`` against the graph of ``video_id``: None when it names no time, or names a person nobody fits."""
    window = window_of(graph, video_id, ref)
    if window is None:
        return _described_anywhere(graph, video_id, ref)
    middle = (window[0] + window[1]) / 2
    shot = graph.shot_at(video_id, ref.time_s if ref.time_s is not None else middle)
    if ref.kind == "none" and not ref.quote.strip():
        return Resolved(video_id, window, shot)
    moment = graph.at(video_id, *window)
    if ref.heard or ref.quote.strip():
        return _heard(graph, video_id, ref, window, shot, moment)
    return _seen(graph, video_id, ref, window, shot, moment)


def _heard(graph: EntityGraph, video_id: str, ref: Reference, window: tuple[float, float],
           shot: ShotView | None, moment: Moment) -> Resolved | None:
    said = quoted(graph, video_id, ref.quote) if ref.quote.strip() else None
    if said is None:
        middle = (window[0] + window[1]) / 2
        speaking = list(moment.speaking) or graph.heard(video_id, window[0] - NEAR_S, window[1] + NEAR_S)
        if not speaking:
            return None
        speaking = _by_gender(graph, speaking, ref.kind, lambda u: u.person) or speaking
        said = min(speaking, key=lambda u: _distance(u.start_s, u.end_s, middle))
    sighting = next((s for s in moment.on_screen if s.person.character_id == said.person.character_id), None)
    return Resolved(video_id, window, shot, said.person, sighting, said)


def _seen(graph: EntityGraph, video_id: str, ref: Reference, window: tuple[float, float],
          shot: ShotView | None, moment: Moment) -> Resolved | None:
    seen = list(moment.on_screen)
    if not seen:  # nobody on screen: the person meant may be the one heard ("the man speaking at 0:52")
        return _heard(graph, video_id, Reference("speaker", ref.place, ref.time_s, ref.scene, ref.quote),
                      window, shot, moment)
    placed = [s for s in seen if ref.place in ("any", s.horizontal, s.depth)] or seen
    fitting = _by_gender(graph, placed, ref.kind, lambda s: s.person) or placed
    fitting = [s for s in fitting if fits_eyewear(graph, s.person, ref.wears)] or fitting
    fitting = [s for s in fitting if fits_clothes(graph, s.person, ref.dressed)] or fitting
    speakers = {u.person.character_id for u in moment.speaking}
    middle = (window[0] + window[1]) / 2
    best = min(fitting, key=lambda s: (s.depth == "background", s.person.character_id not in speakers,
                                       abs(s.time_s - middle)))
    said = next((u for u in moment.speaking if u.person.character_id == best.person.character_id), None)
    return Resolved(video_id, window, shot, best.person, best, said)


def _described_anywhere(graph: EntityGraph, video_id: str, ref: Reference) -> Resolved | None:
    """The person of the video measured to wear what ``ref`` says (and fitting its kind), seen longest; the
    window is their ``ref.occurrence``-th time on screen. None when the reference says nothing measured, nobody is
    measured to fit it (an unmeasured person is no answer here: there is no moment to narrow them down) or they
    are not seen that many times."""
    if ref.wears == "any":
        return None
    found = []
    for person in graph.people():
        profile = graph.profile(person)
        if (profile.attribute(Attribute.EYEWEAR) or ("",))[0] != ref.wears or not fits_gender(graph, person, ref.kind):
            continue
        seen = [a for a in profile.appearances if a.video_id == video_id and a.role != Role.VOICE]
        if seen:
            found.append((sum(a.end_s - a.start_s for a in seen), -seen[0].start_s, person, seen))
    if not found:
        return None
    _, _, person, seen = max(found, key=lambda f: (f[0], f[1]))
    index = ref.occurrence - 1 if ref.occurrence > 0 else ref.occurrence
    if not -len(seen) <= index < len(seen):
        return None
    window = (seen[index].start_s, seen[index].end_s)
    moment = graph.at(video_id, *window)
    sighting = next((s for s in moment.on_screen if s.person.character_id == person.character_id), None)
    return Resolved(video_id, window, graph.shot_at(video_id, window[0]), person, sighting)


def _by_gender(graph: EntityGraph, items: list[T], kind: str, person_of: Callable[[T], Person]) -> list[T]:
    """The items whose person fits "man" / "woman" (measured apparent gender, else voice register); all of
    them for any other kind."""
    return [i for i in items if fits_gender(graph, person_of(i), kind)]


def _distance(start: float, end: float, t: float) -> float:
    return 0.0 if start <= t <= end else min(abs(start - t), abs(end - t))


def _content(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOPWORDS}
