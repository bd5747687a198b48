"""Scenes found by their content: "the photo of two men", "the dark screen with a voice", "the split-screen
interview about the senate".

No model here can match a picture to words (nothing like CLIP installs offline), so a description is read into
what perception measured (:class:`SceneDescription`): still picture, live video or a dark screen with nobody on
it (an event or an activity said of people, "the split-screen debate", "the woman talking indoors", unfolds: live
video); how many people are on screen (a close-up frames one); men or women among them, as many as named
(measured apparent gender, else voice register); glasses; the colour of someone's clothes; how old someone looks
("grey-haired", "young": measured apparent age); one voice or several heard (ranks scenes that fit alike); and the
remaining content words, looked for in what is said, written on screen and detected there. The vocabulary is a
table (:data:`_SHOWN`, :data:`_PEOPLE`, :data:`_KINDS`, :data:`_UNFOLDING`, and :mod:`m3agent.graph.fits`' clothing
and age words): it names what perception measures, not one question's wording.

A scene is a run of shots from one detected cut to the next (:meth:`EntityGraph.shots`, ``opens_scene``).
:func:`matching_scenes` scores every scene against the description and returns those that fit best, in order of
time: a described feature the scene contradicts costs more than one it merely lacks evidence for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, TypeVar

from m3agent.graph.fits import (
    CLOTHES_COLOURS,
    GARMENTS,
    Age,
    age_named,
    clothes_named,
    fits_age,
    fits_eyewear,
    fits_gender,
    measured_clothes,
)
from m3agent.text import STOPWORDS, stem, words

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Moment, Person, ShotView

T = TypeVar("T")
Shown = Literal["any", "still", "live", "dark"]
_SHOWN: dict[str, Shown] = {
    "photo": "still", "photograph": "still", "picture": "still", "still": "still", "image": "still",
    "portrait": "still", "snapshot": "still", "slide": "still", "frozen": "still", "static": "still",
    "video": "live", "footage": "live", "live": "live", "moving": "live", "recording": "live",
}  # fmt: skip
"""What kind of picture a word says is on screen."""
_DARK = frozenset({"dark", "black", "blank", "empty"})
"""Said of the screen ("a dark screen", "the screen goes black"), these words mean nobody is on it."""
_PEOPLE = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "couple": 2, "pair": 2, "split": 2, "both": 2}
"""How many people on screen a word says (a split screen shows two)."""
_PICTURES: dict[Shown, str] = {"dark": "a dark screen", "still": "a still picture", "live": "a live video",
                               "any": "a scene"}
_NUMBER_WORDS = {n: w for w, n in _PEOPLE.items() if w in ("one", "two", "three", "four", "five")}
_KINDS = {"man": "man", "men": "man", "boy": "man", "guy": "man", "gentleman": "man", "woman": "woman",
          "women": "woman", "girl": "woman", "lady": "woman"}
_EYEWEAR = frozenset({"glasses", "eyeglasses", "spectacles"})
_FRAME_WORDS = frozenset({"scene", "shot", "part", "screen", "shown", "show", "seen", "see", "video", "first",
                          "last", "appear", "appears", "person", "people", "someone", "somebody", "anyone",
                          "anybody", "side", "by", "with",
                          "front", "while", "voice", "talking", "speaking", "speaks", "talks", "says", "heard",
                          "goes", "gone", "went", "turns", "becomes", "include", "includes",
                          "different", "distinct", "separate", "times", "time", "passage", "passages", "moment",
                          "moments", "only", "just", "instance", "instances", "occasion", "occasions", "over",
                          "stretch", "stretches"})
"""Words that frame a description rather than say what is in it."""
_UNFOLDING = frozenset({
    "debate", "interview", "meeting", "performance", "perform", "performs", "performing", "rally", "concert",
    "ceremony", "conference", "game", "match", "party", "talking", "speaking", "singing", "dancing", "playing",
    "walking", "running", "arguing", "laughing", "cooking", "eating", "driving"})
"""Events and activities, which unfold in time: a scene described by one and by no picture word is live video
("the split-screen debate", "the woman with glasses talking indoors"); "the photo of a man speaking" stays a
photo."""
_SOUNDED: dict[str, frozenset[str]] = {
    **dict.fromkeys(("performance", "perform", "concert", "song", "sing", "danc", "dance"),
                    frozenset({"music", "sing", "rap", "choir"})),
    **dict.fromkeys(("rally", "ceremony"), frozenset({"applause", "cheer", "crowd"})),
    "laugh": frozenset({"laughter"}),
}  # fmt: skip
"""Events (stemmed) and the sounds (stemmed, as the sound classifier names them in a shot's summary) that attest
them: no model here sees a stage, but a performance is heard as music or singing, a rally as applause."""
_CLOSE_UP = (("close", "up"), ("closeup",))
"""A close-up frames one person."""
_ONE_VOICE = frozenset({"a", "one", "single", "lone"})
MIN_FIT = 0.5
"""A scene must fit at least this share of what the description says to be one it may mean."""
CONTRADICTED = 2.0
"""A described feature the scene contradicts weighs this many times one it only lacks evidence for."""
EDGE_S = 1.0
"""Seconds at each end of a scene left out when reading who is in it."""
TOPIC_WEIGHT = 0.25
"""What the topic words found in a scene add to the fit of its measured features (they only tell apart scenes
that fit alike; alone they are the whole fit)."""


@dataclass(frozen=True, slots=True)
class SceneDescription:
    """What a description of a scene says in measured terms (``people``: how many on screen, None unsaid)."""

    shown: Shown = "any"
    people: int | None = None
    kinds: tuple[str, ...] = ()
    glasses: bool = False
    topic: tuple[str, ...] = ()
    clothes: str = "any"
    """The colour of someone's clothes (:func:`~m3agent.graph.fits.clothes_named`), ``any`` unsaid."""
    age: Age = "any"
    """How old someone on screen looks ("a grey-haired man": older; :func:`~m3agent.graph.fits.age_named`)."""
    voices: int | None = None
    """How many voices are heard ("with a voice": 1, "with three voices": 3), None unsaid."""
    split: bool = False
    """It says a split screen ("the split-screen debate")."""
    event: bool = False
    """It names an event or activity (:data:`_UNFOLDING`: "the rap performance on stage", "the meeting")."""

    @property
    def pictured(self) -> bool:
        """Whether it says what the picture is: its kind (a photo, a dark screen) or how many are on screen (a
        split screen, a couple); "the man in glasses" describes a person, not a scene."""
        return self.shown != "any" or self.people is not None

    @property
    def picture(self) -> str:
        """The kind of picture and how many are on it, in words :func:`describe` reads back the same ("a dark
        screen", "a still picture of two people"); what else was described is left out."""
        said = _PICTURES[self.shown]
        people = _NUMBER_WORDS.get(self.people or 0)
        return f"{said} of {people} people" if people and self.shown != "dark" else said

    @property
    def empty(self) -> bool:
        return self.shown == "any" and self.people is None and not self.kinds and not self.glasses and \
            not self.topic and self.clothes == "any" and self.age == "any" and self.voices is None


@dataclass(frozen=True, slots=True)
class Scene:
    """A run of shots from one cut to the next, and how well it fits a description (0 to 1)."""

    shots: tuple[ShotView, ...]
    fit: float

    @property
    def start_s(self) -> float:
        return self.shots[0].start_s

    @property
    def end_s(self) -> float:
        return self.shots[-1].end_s


def describe(text: str) -> SceneDescription:
    """``text`` (a description of a scene, as a question words it) in measured terms. A still word beside a live
    one names the still picture ("the photos in the video", "a still image the video shows": the video is the
    recording)."""
    tokens = words(text.replace("-", " "))
    dark = _dark_screen(tokens)
    named = [k for w in tokens if (k := _lookup(_SHOWN, w))]
    kinds = _kinds(tokens)
    counted = [n for w in tokens if (n := _lookup(_PEOPLE, w))]
    close_up = _phrase_at(tokens, _CLOSE_UP)
    event = bool(_UNFOLDING & set(tokens))
    if not named and event and (kinds or counted or close_up):
        named = ["live"]  # implied, so never the only thing measured: "the Oval Office meeting" is no live scene
    shown: Shown = "dark" if dark else "still" if "still" in named else named[0] if named else "any"
    people = max([*counted, len(kinds) if len(kinds) > 1 else 0]) or (1 if close_up else None)
    voices = _voices(tokens)
    clothes = clothes_named(tokens)
    age, aged = age_named(tokens)
    if dark:  # nobody on screen, however many are heard ("a dark screen with three voices")
        people, kinds, clothes, age = 0, (), None, "any"
    tokens = [w for i, w in enumerate(tokens) if i not in aged and i not in close_up]
    known = set(_SHOWN) | set(_PEOPLE) | set(_KINDS) | _EYEWEAR | _FRAME_WORDS | ((_DARK | _SCREEN) if dark else set())
    known |= (set(CLOTHES_COLOURS) | GARMENTS) if clothes else set()
    topic = tuple(dict.fromkeys(stem(w) for w in tokens
                                if w not in known and stem(w) not in known and w not in STOPWORDS and len(w) > 2))
    return SceneDescription(shown, people, kinds, bool(_EYEWEAR & set(tokens)), topic, clothes or "any", age, voices,
                            "split" in tokens, event)


def describe_as(text: str, kind: str) -> SceneDescription:
    """:func:`describe` of what a reference of ``kind`` says: a ``photo`` reference's words describe a still picture
    whatever they say happens in it ("a man speaking into a microphone")."""
    described = describe(text)
    return replace(described, shown="still") if kind == "photo" and described.shown != "dark" else described


def _kinds(tokens: list[str]) -> tuple[str, ...]:
    """The kinds of people named, once per person: "two men" is two men, "men" at least two, "a man and a
    woman" one of each."""
    kinds: list[str] = []
    for i, word in enumerate(tokens):
        kind = _lookup(_KINDS, word)
        if kind is None:
            continue
        plural = word in _PLURAL_KINDS
        number = _PEOPLE.get(tokens[i - 1], 0) if i and plural else 0
        kinds += [kind] * (number or (2 if plural else 1))
    return tuple(kinds)


_PLURAL_KINDS = frozenset({"men", "women", "boys", "girls", "guys", "gentlemen", "ladies"})


def _phrase_at(tokens: list[str], phrases: tuple[tuple[str, ...], ...]) -> tuple[int, ...]:
    """The positions of the words of the first of ``phrases`` found in ``tokens`` (none found: empty)."""
    for i in range(len(tokens)):
        for phrase in phrases:
            if tuple(tokens[i: i + len(phrase)]) == phrase:
                return tuple(range(i, i + len(phrase)))
    return ()


def _voices(tokens: list[str]) -> int | None:
    """How many voices the words say are heard: "a voice" one, "three voices" three; None unsaid."""
    for i, word in enumerate(tokens):
        before = tokens[i - 1] if i else ""
        if word == "voice" and before in _ONE_VOICE:
            return 1
        if word == "voices" and (n := _PEOPLE.get(before)) is not None and before not in ("split", "both"):
            return n
    return None


_PARTS = frozenset({"scene", "shot", "part", "segment", "clip", "section", "passage", "stretch", "moment", "one",
                    "person", "people", "someone", "anyone", "speaker", "voice", "face",
                    "speech", "talk", "interview", "debate", "conversation", "discussion", "rally", "performance",
                    "song", "address", "lecture", "announcement", "remark", "question", "answer", "line", "sentence",
                    "word", "statement", "quote", "cut", "change", "pause", "silence", "break", "applause", "laugh",
                    "noise", "sound", "music"})
"""Words for a part of the video, someone in it, or what happens in it: what :func:`names_scene` counts beside
:func:`describe`'s vocabulary."""


def names_scene(tokens: Sequence[str]) -> bool:
    """Whether ``tokens`` name something the video shows or plays, in the terms :func:`describe` reads: a kind of
    picture, a screen, people or a kind of person, a part of the video, a clock time; not a thing in a picture ("a
    flag", "a bookshelf")."""
    return any(word in _SCENE_WORDS or stem(word) in _SCENE_WORDS or any(c.isdigit() for c in word) for word in tokens)


def person_kind(word: str) -> str | None:
    """``man`` or ``woman`` for a word naming one or several of them ("gentlemen", "girl"), else None: the one
    vocabulary of kinds of people, for descriptions and questions alike."""
    return _lookup(_KINDS, word)


def shown_by(word: str) -> Shown | None:
    """The kind of picture ``word`` names ("photos": still, "footage": live), or None."""
    return _lookup(_SHOWN, word)


def _lookup(table: dict[str, T], word: str) -> T | None:
    """``word``'s entry in ``table``, as written or stemmed ("photos" is a photo)."""
    return table.get(word, table.get(stem(word)))


_SCREEN = frozenset({"screen", "picture", "frame", "display"})
"""What a dark word is said of when the screen is dark ("the screen goes black", "the picture went dark")."""
_SCENE_WORDS = frozenset(_SHOWN) | frozenset(_KINDS) | frozenset(_PEOPLE) | _SCREEN | _DARK | _PARTS
"""Everything :func:`names_scene` counts as naming something the video shows or plays."""


def _dark_screen(tokens: list[str]) -> bool:
    """Whether the words say the screen is dark: a dark word right before "screen" (or "picture", "frame"), or
    within three words after it ("dark hair" is no dark screen), or right after an "over" ("a voice over black",
    "voice-over-black moments"); in the plural too ("black screens with voice only")."""
    for i, w in enumerate(tokens):
        screen = w in _SCREEN or stem(w) in _SCREEN
        if screen and ((i and tokens[i - 1] in _DARK) or _DARK & set(tokens[i + 1: i + 4])):
            return True
        if w in _DARK and i and tokens[i - 1] == "over":
            return True
    return False


def scenes(graph: EntityGraph, video_id: str) -> list[tuple[ShotView, ...]]:
    """The scenes of a video: its shots grouped from each cut to the next."""
    grouped: list[list[ShotView]] = []
    for shot in graph.shots(video_id):
        if shot.opens_scene or not grouped:
            grouped.append([shot])
        else:
            grouped[-1].append(shot)
    return [tuple(g) for g in grouped]


def picture_span(graph: EntityGraph, video_id: str, time_s: float) -> tuple[float, float] | None:
    """The stretch of the video around ``time_s`` that shows one picture: its shots up to a cut into or out of a
    still picture or a dark screen (another photo under the same narration is another thing shown), while cuts
    between two live shots stay inside it (a camera cut within one recording). None without shots."""
    shot = graph.shot_at(video_id, time_s)
    if shot is None:
        return None
    shots = graph.shots(video_id)
    first = last = shot.index
    while first > 0 and not _picture_changes(shots[first - 1], shots[first]):
        first -= 1
    while last + 1 < len(shots) and not _picture_changes(shots[last], shots[last + 1]):
        last += 1
    return shots[first].start_s, shots[last].end_s


def _picture_changes(before: ShotView, after: ShotView) -> bool:
    return after.opens_scene and not (before.kind == "live" and after.kind == "live")


def matching_scenes(graph: EntityGraph, video_id: str, description: SceneDescription) -> list[Scene]:
    """The scenes of ``video_id`` that fit ``description`` best (all with the best fit, at least
    :data:`MIN_FIT`), in order of time; empty when the description says nothing or nothing fits."""
    return _best(fitting_scenes(graph, video_id, description))


def _best(fitting: list[Scene]) -> list[Scene]:
    best = max((s.fit for s in fitting), default=0.0)
    return [s for s in fitting if s.fit >= best - 1e-9]


def fitting_scenes(graph: EntityGraph, video_id: str, description: SceneDescription, *,
                   voices: bool = True) -> list[Scene]:
    """Every scene of ``video_id`` that fits ``description`` at least :data:`MIN_FIT`, in order of time; ``voices``:
    the number of voices heard ranks them too."""
    if description.empty:
        return []
    scored = [(group, *_fit(graph, group, description)) for group in scenes(graph, video_id)]
    return [Scene(group, fit + (heard if voices else 0.0)) for group, fit, heard in scored if fit >= MIN_FIT]


def counted_scenes(graph: EntityGraph, video_id: str, description: SceneDescription,
                   before: float | None = None) -> list[Scene]:
    """The scenes a count of ``description`` counts (those starting ``before`` a bound, when given): every one that
    fits best on what is measured and said. The number of voices heard, which picks out the one scene a question
    means, does not rank them: "how many stretches of a dark screen with a voice?" counts the dark screen where
    diarization heard two voices too."""
    fitting = fitting_scenes(graph, video_id, description, voices=False)
    return _best([s for s in fitting if before is None or s.start_s < before])


def two_scenes(graph: EntityGraph, video_id: str, one: SceneDescription, two: SceneDescription
               ) -> tuple[Scene, Scene] | None:
    """The first scene each of two descriptions means (as :func:`matching_scenes`), never the same one: a question
    that sets two described things in order speaks of two scenes, so when both mean one scene first, the pair of
    different scenes that fits best in all is taken (the earlier pair on a tie); None when there is no such pair."""
    a, b = fitting_scenes(graph, video_id, one), fitting_scenes(graph, video_id, two)
    pairs = [(x.fit + y.fit, -x.start_s - y.start_s, x, y) for x in a for y in b if x.start_s != y.start_s]
    if not pairs:
        return None
    first_a, first_b = _best(a)[0], _best(b)[0]
    if first_a.start_s != first_b.start_s:
        return first_a, first_b
    _, _, x, y = max(pairs, key=lambda p: (p[0], p[1]))
    return x, y


def _fit(graph: EntityGraph, group: tuple[ShotView, ...], wanted: SceneDescription) -> tuple[float, float]:
    """The share of the described features the scene shows, a contradicted one counting :data:`CONTRADICTED`
    times against it, and what the number of voices heard adds (only to rank scenes that fit: never to make one
    fit)."""
    moment = _inside(graph, group[0].video_id, group[0].start_s, group[-1].end_s)
    on_screen = {s.person.character_id: s.person for s in moment.on_screen}
    most = max((len(_inside(graph, s.video_id, s.start_s, s.end_s).on_screen) for s in group), default=0)
    checks: list[bool | None] = []  # measured features: True fits, False contradicts, None unknown
    if wanted.shown != "any":
        checks.append(_shown_fits(group, most, wanted.shown))
    if wanted.people is not None:
        checks.append(most == wanted.people)
    if wanted.split and any(s.split_screen for s in graph.shots(group[0].video_id)):  # else never measured
        checks.append(any(s.split_screen for s in group))
    for kind in dict.fromkeys(wanted.kinds):  # "two men": two people on screen who read as men
        needed = wanted.kinds.count(kind)
        checks.append(sum(fits_gender(graph, p, kind) for p in on_screen.values()) >= needed)
    if wanted.glasses:
        checks.append(any(fits_eyewear(graph, p, "glasses") for p in on_screen.values()) if on_screen else False)
    if wanted.clothes != "any":
        checks.append(_clothes_fit(graph, list(on_screen.values()), wanted.clothes))
    if wanted.age != "any":
        checks.append(_age_fit(graph, list(on_screen.values()), wanted.age))
    voices = 0.0  # one voice or several: what diarization tells apart, not three from four
    if wanted.voices is not None and checks:
        heard = len({u.person.character_id for u in moment.speaking})
        voices = TOPIC_WEIGHT * (heard == 1 if wanted.voices == 1 else heard >= 2)
    topic = 0.0
    if wanted.topic:
        said = {stem(w) for u in moment.speaking for w in words(u.text)}
        said |= {stem(w) for s in group for w in words(s.summary)} | {stem(w) for t in moment.scene for w in words(t)}
        topic = sum(w in said or bool(_SOUNDED.get(w, frozenset()) & said) for w in wanted.topic) / len(wanted.topic)
    return (_score(checks) + TOPIC_WEIGHT * topic if checks else topic), voices


def _inside(graph: EntityGraph, video_id: str, start_s: float, end_s: float) -> Moment:
    """The moment of an interval without its edges (:data:`EDGE_S`, at most a quarter of it): people sampled just
    before or after a cut belong to the neighbouring scene."""
    inner = min(EDGE_S, (end_s - start_s) / 4)
    return graph.at(video_id, start_s + inner, end_s - inner)


def _someone_fits(people: list[Person], fits: list[bool | None]) -> bool | None:
    """True when someone on screen fits (``fits``: per person, None when not measured), False when everyone is
    measured and nobody does (or nobody is there), None when it is not known."""
    if not people:
        return False
    if True in fits:
        return True
    return None if None in fits else False


def _clothes_fit(graph: EntityGraph, people: list[Person], colour: str) -> bool | None:
    measured = [measured_clothes(graph, p) for p in people]
    return _someone_fits(people, [None if m is None else m == colour for m in measured])


def _age_fit(graph: EntityGraph, people: list[Person], age: Age) -> bool | None:
    return _someone_fits(people, [fits_age(graph, p, age) for p in people])


def _shown_fits(group: tuple[ShotView, ...], most_on_screen: int, shown: Shown) -> bool | None:
    kinds = {s.kind for s in group if s.kind in ("still", "live")}
    if shown == "dark":  # a still picture with nobody on it: a moving one where no face was found is no dark screen
        return most_on_screen == 0 and "live" not in kinds
    if not kinds:
        return None
    return (shown in kinds) and (shown != "still" or most_on_screen > 0)


def _score(checks: list[bool | None]) -> float:
    fits = sum(1 for c in checks if c is True)
    contradicted = sum(1 for c in checks if c is False)
    return fits / (len(checks) + (CONTRADICTED - 1) * contradicted)
