"""People and shots of the entity graph in words: the one place that phrases who someone is ("the man on the left
(<character_2>)", "an unseen speaker with a high voice", "a high voice not matched to a face"), what a shot holds,
and a count as a word, for the graph's answers (:mod:`m3agent.control.people.graph_answers`) and the recall lines of the
grounded mode."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.control.people.graph_facts import quote
from m3agent.errors import NotFoundError
from m3agent.graph.fits import seen_while_heard
from m3agent.graph.values import DESCRIBE_MIN, Role, span_text
from m3agent.memorize.scene_memories import (
    SPLIT_SCREEN,
    sounds_text,
    summary_objects,
    summary_sounds,
    summary_texts,
)
from m3agent.perception.attributes.names import Attribute
from m3agent.perception.attributes.place import PLACE_WORDS

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Person, ShotView, Sighting, Utterance

QUOTE_CHARS = 70
SHOT_LINES = 3
"""How many of a shot's utterances its description quotes (:func:`_told`)."""
EDGE_S = 1.0
"""A shot is described from this far inside its cuts (faces are sampled near the cut on both sides)."""
_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
KIND_TEXT = {"still": "a still picture", "live": "live video"}


UNDESCRIBED = "the person"


def who(graph: EntityGraph, person: Person, sighting: Sighting | None = None) -> str:
    """``the man on the left (<character_2>)``: measured gender, the place at the moment (else the usual one),
    and the label; ``an unseen speaker with a high voice (<character_8>)`` for someone only heard."""
    return f"{described(graph, person, sighting)} ({person.label})"


def described(graph: EntityGraph, person: Person, sighting: Sighting | None = None) -> str:
    """``the man on the left`` / ``the woman with glasses on the right`` / ``an unseen speaker with a high voice``
    (heard with nobody on screen, or over a still picture) / ``a high voice not matched to a face`` (heard while
    people are seen: :data:`UNMATCHED`): :func:`who` without the label."""
    profile = graph.profile(person)
    gender = profile.attribute(Attribute.APPARENT_GENDER)
    noun = {"male": "man", "female": "woman"}.get(gender[0] if gender and gender[1] >= DESCRIBE_MIN else "", "person")
    if not person.face_ids:
        register = profile.attribute(Attribute.VOICE_REGISTER)
        pitch = register[0] if register and register[0] in ("high", "low") else ""
        if seen_while_heard(graph, person):
            return f"a {pitch} {UNMATCHED}" if pitch else f"a {UNMATCHED}"
        return f"{UNSEEN} with a {pitch} voice" if pitch else UNSEEN
    eyewear = profile.attribute(Attribute.EYEWEAR)
    noun += " with glasses" if eyewear is not None and eyewear[0] == "glasses" and eyewear[1] >= DESCRIBE_MIN else ""
    place = sighting.horizontal if sighting is not None else (profile.attribute(Attribute.POSITION) or ("", 0.0))[0]
    where = f" {PLACE_WORDS[place]}" if place in PLACE_WORDS else ""
    if sighting is not None and sighting.depth == "background":
        where += " in the background"
    return f"the {noun}{where}"


def in_words(graph: EntityGraph, text: str, video_id: str | None, keep: Iterable[tags.Tag] = ()) -> str:
    """``text`` with every person tag put into words, as a person would name someone they cannot click: how they
    look or sound and when they are first seen or heard (``the woman on the right (seen 0:40–0:52)``), in
    ``video_id`` when they are there, else wherever they are. A tag already in parentheses after its description
    (:func:`who`: ``the man on the left (<character_2>)``) gives way to the time alone. Given names were substituted
    before this; a tag the graph does not know becomes "someone"; the tags in ``keep`` (those the question itself
    used) stay. The tag itself stays in the evidence."""
    kept = set(keep)
    text = tags.rewrite(text, lambda _tag: None)  # canonical spellings, so that "(<character_2>)" is found
    words: dict[tags.Tag, str] = {}
    for tag in tags.find_tags(text):
        if tag in words or tag in kept:
            continue
        description, when = _person_words(graph, str(tag), video_id)
        text = _without_restated(text.replace(f" ({tag})", f" ({when})" if when else ""), str(tag), description)
        words[tag] = f"{description} ({when})" if when else description
    out = tags.to_names(text, words)
    return out[:1].upper() + out[1:] if out[:1] != text[:1] else out


def _without_restated(text: str, tag: str, description: str) -> str:
    """``text`` without a parenthesis right after ``tag`` that only restates its description (``<character_1>
    (right)`` when the description is "the woman on the right")."""
    known = set(description.lower().split())
    marker = f"{tag} ("
    start = text.find(marker)
    while start >= 0:
        close = text.find(")", start + len(marker))
        inner = text[start + len(marker):close].lower().split() if close > 0 else []
        if inner and set(inner) <= known:
            text = text[:start + len(tag)] + text[close + 1:]
        start = text.find(marker, start + 1)
    return text


def _person_words(graph: EntityGraph, tag: str, video_id: str | None) -> tuple[str, str]:
    """(who: a name or a description, when: ``seen 0:40–0:52`` or ``""``)."""
    try:
        person = graph.person(tag)
    except NotFoundError:
        return "someone", ""
    if person.name:
        return person.name, ""
    if not person.face_ids and not person.voice_ids:
        return "someone", ""  # a character of text alone (a conversation's speaker has a name)
    seen = graph.appearances(person, video_id) if video_id is not None else []
    first = next(iter(seen or graph.appearances(person)), None)
    words = described(graph, person)
    if first is None:
        return ("someone" if words == UNDESCRIBED else words), ""
    how = "heard" if first.role is Role.VOICE else "seen"
    where = "" if first.video_id == video_id or video_id is None else f" in {first.video_id}"
    return words, f"{how} {span_text(first.start_s, first.end_s)}{where}"


UNSEEN = "an unseen speaker"
UNMATCHED = "voice not matched to a face"
"""A voice linked to no face is "unseen" only when nobody live is on screen while it speaks (a narrator over a
photo or a dark screen); heard while people are seen, it may be one of them whose lips were not matched to it (a
shouted line over someone else's speech), and calling it unseen would say what the memory does not know."""


def describe_people(graph: EntityGraph, texts: list[str]) -> list[str]:
    """``texts`` with the first mention of each person followed by what they look or sound like
    (``<character_7> (an unseen speaker with a high voice)``), so that a question about "the woman" or "the man
    on the left" can be matched to the tags of what was said; a tag the graph does not know, or knows nothing of, is
    left as it is."""
    done: set[str] = set()
    out = []
    for text in texts:
        for tag in dict.fromkeys(str(t) for t in tags.find_tags(text)):
            if tag in done or tag not in text:
                continue
            done.add(tag)
            try:
                person = graph.person(tag)
            except NotFoundError:
                continue
            words = described(graph, person)
            if words != UNDESCRIBED:
                text = text.replace(tag, f"{tag} ({words})", 1)
        out.append(text)
    return out


def unseen(graph: EntityGraph, person: Person) -> str:
    """What the graph knows of the face of ``person``, who is matched to none: never seen, or heard while people
    were on screen (and so perhaps one of them)."""
    meanwhile = seen_while_heard(graph, person)
    if not meanwhile:
        return f"{person.label} is never seen on screen"
    return f"no face is matched to {person.label}, heard while {number_word(len(meanwhile))} " \
           f"{'person is' if len(meanwhile) == 1 else 'people are'} on screen"


def shot_content(graph: EntityGraph, shot: ShotView) -> str:
    """What a shot holds, in words: who is on screen (or nobody), the text written on it, the objects seen, who
    says what (its first utterance and, when it holds more, its last: the words nearest each neighbour) and the
    sounds heard; what a person asking "what comes after the line X?" would recognise the shot by."""
    inner = min(EDGE_S, (shot.end_s - shot.start_s) / 4)  # the shot's own people, not its neighbours' at the cut
    moment = graph.at(shot.video_id, shot.start_s + inner, shot.end_s - inner)
    seen = ", ".join(who(graph, s.person, s) for s in moment.on_screen)
    heard = [u for u in moment.speaking if _share_inside(u.start_s, u.end_s, shot) >= 0.5]
    parts = [f"on screen {seen}" if seen else "nobody on screen"]
    if written := summary_texts(shot.summary):
        parts.append("written: " + ", ".join(f'"{quote(t, QUOTE_CHARS)}"' for t in written))
    if objects := summary_objects(shot.summary):
        parts.append("seen: " + ", ".join(objects))
    if heard:
        said = [f'{who(graph, u.person)} says "{quote(u.text, QUOTE_CHARS)}"' for u in _told(heard)]
        parts.append("heard: " + ", later ".join(said))
    if sounds := summary_sounds(shot.summary):
        parts.append(sounds_text(sounds))
    return "; ".join(parts)


def _told(heard: list[Utterance]) -> list[Utterance]:
    """At most :data:`SHOT_LINES` of a shot's utterances, in time order: the first and the last (the words nearest
    each neighbouring shot) and the longest between them (a short line is more often a misheard noise)."""
    if len(heard) <= SHOT_LINES:
        return heard
    middle = sorted(heard[1:-1], key=lambda u: len(u.text), reverse=True)[:SHOT_LINES - 2]
    return [u for u in heard if u is heard[0] or u is heard[-1] or u in middle]


def _share_inside(start: float, end: float, shot: ShotView) -> float:
    inside = max(0.0, min(end, shot.end_s) - max(start, shot.start_s))
    return inside / (end - start) if end > start else float(shot.start_s <= start <= shot.end_s)


def shot_kind(shot: ShotView) -> str:
    """``live video`` / ``a still picture`` / ``video``, and ``, a split screen`` where it is one."""
    kind = KIND_TEXT.get(shot.kind or "", "video")
    return f"{kind}, {SPLIT_SCREEN}" if shot.split_screen else kind


def sighting_place(s: Sighting) -> str:
    """``on the left, in the background``: where a sighting is, across and in depth."""
    return f"{PLACE_WORDS[s.horizontal]}, in the {s.depth}"


def number_word(n: int) -> str:
    return _NUMBERS[n] if n < len(_NUMBERS) else str(n)
