"""Whether a person fits a description: "a man" / "a woman" (measured apparent gender, else voice register) and
"with glasses" (measured eyewear). An unmeasured person fits: a description narrows, it never vetoes. Shared by
the resolution of references (:mod:`m3agent.graph.references`) and of described scenes (:mod:`m3agent.graph.scenes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3agent.graph.values import Role
from m3agent.perception.attributes.names import UNCERTAIN, Attribute

if TYPE_CHECKING:
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Person
    from m3agent.perception.attributes.names import ApparentGender, RegisterValue

_GENDER: dict[str, ApparentGender] = {"man": "male", "woman": "female"}
_REGISTER: dict[str, RegisterValue] = {"man": "low", "woman": "high"}


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
