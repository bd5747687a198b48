"""Whether a person fits a description: "a man" / "a woman" (measured apparent gender, else voice register),
"with glasses" (measured eyewear), "in a dark suit" (measured clothes colour) and "grey-haired" / "young" (measured
apparent age). An unmeasured person fits: a description narrows, it never vetoes. Shared by the resolution of
references (:mod:`m3agent.graph.references`) and of described scenes (:mod:`m3agent.graph.scenes`);
:func:`clothes_named` is the one reading of a clothing colour in words, :func:`age_named` of an age.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from m3agent.graph.values import DESCRIBE_MIN, Role
from m3agent.perception.attributes.names import UNCERTAIN, Attribute, ClothesColour

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Person
    from m3agent.perception.attributes.names import ApparentGender, RegisterValue

_GENDER: dict[str, ApparentGender] = {"man": "male", "woman": "female"}
_REGISTER: dict[str, RegisterValue] = {"man": "low", "woman": "high"}
CLOTHES_COLOURS: dict[str, ClothesColour] = {
    "black": "dark", "dark": "dark", "navy": "dark", "charcoal": "dark", "white": "white", "cream": "white",
    "grey": "grey", "gray": "grey", "red": "red", "pink": "pink", "brown": "brown", "orange": "orange",
    "yellow": "yellow", "green": "green", "blue": "blue", "purple": "purple",
}  # fmt: skip
"""Colour words as said of clothes, in the colours perception names (black, navy and charcoal read dark)."""
GARMENTS = frozenset({"suit", "jacket", "blazer", "coat", "sweater", "jumper", "cardigan", "hoodie", "shirt",
                      "tshirt", "top", "blouse", "dress", "gown", "robe", "uniform", "clothes", "outfit", "vest"})
"""Words for what covers the chest (a tie, a hat or hair are not what the clothes colour measures)."""


def clothes_named(tokens: Sequence[str]) -> ClothesColour | None:
    """The clothes colour a description names: a colour word with a garment at most two words after it ("a dark
    suit", "a blue striped shirt", "a white T-shirt"); the first one named, None when none is ("dark hair")."""
    for i, word in enumerate(tokens):
        if word in CLOTHES_COLOURS and GARMENTS & set(tokens[i + 1: i + 3]):
            return CLOTHES_COLOURS[word]
    return None


def fits_clothes(graph: EntityGraph, person: Person, colour: str) -> bool:
    """Whether ``person``'s clothes are measured ``colour`` (``any``, an unmeasured person or one whose crops
    did not agree well enough to describe fits)."""
    measured = measured_clothes(graph, person)
    return colour == "any" or measured is None or measured == colour


def measured_clothes(graph: EntityGraph, person: Person) -> ClothesColour | None:
    """``person``'s clothes colour when it is measured surely enough to describe them (and so to contradict a
    description); else None."""
    measured = graph.profile(person).attribute(Attribute.CLOTHES)
    return measured[0] if measured is not None and measured[1] >= DESCRIBE_MIN else None


Age = Literal["any", "young", "older"]
OLDER_FROM = 50
"""Apparent age from which someone reads as older ("grey-haired", "elderly"): grey hair is common from about 50."""
YOUNG_BELOW = 40
"""Apparent age below which someone reads as young ("a young man"); from 40 to 50 neither word contradicts."""
_AGE_WORDS: dict[str, Age] = {
    "old": "older", "older": "older", "elderly": "older", "senior": "older", "balding": "older", "bald": "older",
    "young": "young", "younger": "young", "youthful": "young", "teen": "young", "teenage": "young",
    "teenager": "young",
}  # fmt: skip
"""Words that say how old someone looks ("middle-aged" says neither)."""
_HAIR_COLOURS = frozenset({"grey", "gray", "white", "silver"})
"""Hair colours that say someone is older, said of hair only ("grey-haired", "white hair"; a grey suit is not)."""
_OF_YEARS = frozenset({"year", "years", "month", "months"})
"""Words before "old" that make it an age in years ("a 10-year-old"), not a look."""


def age_named(tokens: Sequence[str]) -> tuple[Age, tuple[int, ...]]:
    """The age a description names and the positions of its words ("a grey-haired man": older, the words "grey"
    and "haired"); ``any`` and none when it names no age (a grey suit is no grey hair)."""
    for i, word in enumerate(tokens):
        if word in _HAIR_COLOURS:
            if i + 1 < len(tokens) and tokens[i + 1] in ("haired", "hair"):
                return "older", (i, i + 1)
        elif word in _AGE_WORDS and not (i and tokens[i - 1] in _OF_YEARS):
            return _AGE_WORDS[word], (i,)
    return "any", ()


def fits_age(graph: EntityGraph, person: Person, age: Age) -> bool | None:
    """Whether ``person``'s measured apparent age reads as ``age``: True or False when measured surely enough to
    describe them (from 40 to 50 an "older" or a "young" description is contradicted: neither word fits there),
    None otherwise."""
    if age == "any":
        return True
    measured = graph.profile(person).attribute(Attribute.APPARENT_AGE)
    if measured is None or measured[1] < DESCRIBE_MIN or not measured[0].isdigit():
        return None  # unmeasured, or not surely enough to describe (and so to contradict)
    years = int(measured[0])
    return years >= OLDER_FROM if age == "older" else years < YOUNG_BELOW


def fits_eyewear(graph: EntityGraph, person: Person, wears: str) -> bool:
    """Whether ``person`` is measured to wear ``wears`` (``any``: everyone fits; an unmeasured or uncertain
    person fits too, as with gender: a description narrows, it does not veto)."""
    if wears == "any":
        return True
    measured = graph.profile(person).attribute(Attribute.EYEWEAR)
    return measured is None or measured[0] in (UNCERTAIN, wears)


def fits_gender(graph: EntityGraph, person: Person, kind: str) -> bool:
    """Whether ``person`` reads as a ``man`` / ``woman``: by measured apparent gender, else by voice register (a
    voice matched to no face also fits when someone seen while it speaks does: :func:`seen_while_heard`); an
    unmeasured person fits either, and everyone fits a kind that names no gender."""
    if kind not in _GENDER:
        return True
    profile = graph.profile(person)
    gender = profile.attribute(Attribute.APPARENT_GENDER)
    if gender is not None and gender[0] in ("male", "female"):
        return gender[0] == _GENDER[kind]
    register = profile.attribute(Attribute.VOICE_REGISTER)
    if register is None or register[0] not in ("low", "high") or register[0] == _REGISTER[kind]:
        return True
    # a voice matched to no face may be that of someone seen while it speaks: a raised voice reads "high"
    return not person.face_ids and any(fits_gender(graph, p, kind) for p in seen_while_heard(graph, person))


def seen_while_heard(graph: EntityGraph, person: Person) -> list[Person]:
    """The people on screen in live video (not a still picture) while ``person`` is heard, in order of first
    sighting; the candidates for the face of a voice the links did not match (its lips were not read over
    overlapped speech, or it was shouted off the beat)."""
    seen: dict[int, Person] = {}
    for heard in graph.appearances(person):
        if heard.role == Role.FACE:
            continue
        shot = graph.shot_at(heard.video_id, (heard.start_s + heard.end_s) / 2)
        if shot is not None and shot.kind == "still":
            continue
        for sighting in graph.at(heard.video_id, heard.start_s, heard.end_s).on_screen:
            if sighting.person.character_id != person.character_id:
                seen.setdefault(sighting.person.character_id, sighting.person)
    return list(seen.values())
