"""The one definition of the measured attributes of a person (issue 47): the name each is stored under, the label
a profile shows it by, and the closed sets of values perception writes.

Perception writes the rows (:mod:`.clip`: one :class:`~m3agent.domain.EntityAttribute` per entity, clip and
:class:`Attribute`), the entity graph combines them into a profile (:mod:`m3agent.graph.descriptions`) and looks
them up by member (:meth:`m3agent.graph.values.Profile.attribute`), and control puts them into words; all of
them name an attribute by a member of :class:`Attribute`, never by its stored name or its label written out.
The stored strings are the members' values, so the database is what it was before the enum.

The value types below are the values perception decides; ``uncertain`` is the value of a measurement that
decided nothing (also the combined value of rows that all said so). A face's place in the picture (``left`` /
``centre`` / ``right``, ``foreground`` / ``background``) is defined with its rule in :mod:`.place`.
"""

from __future__ import annotations

import enum
from typing import Final, Literal

Uncertain = Literal["uncertain"]
UNCERTAIN: Final[Uncertain] = "uncertain"
"""The value of a measurement that decided nothing."""

ApparentGender = Literal["female", "male", "uncertain"]
EyewearValue = Literal["glasses", "none", "uncertain"]
RegisterValue = Literal["low", "high", "uncertain"]
ClothesColour = Literal["dark", "white", "grey", "red", "pink", "brown", "orange", "yellow", "green", "blue", "purple"]


class Attribute(enum.StrEnum):
    """A measured attribute of a person; its value is the name its rows are stored under, in the order profiles
    list them. :attr:`label` is how a profile (and its JSON) names it."""

    VOICE_REGISTER = "voice_register"
    POSITION = "position"
    DEPTH = "depth"
    APPARENT_GENDER = "apparent_gender"
    APPARENT_AGE = "apparent_age"
    EYEWEAR = "eyewear"
    CLOTHES = "clothes"

    @property
    def label(self) -> str:
        """How a profile names the attribute: ``voice`` for the voice register, else the name in words
        (``apparent gender``)."""
        return "voice" if self is Attribute.VOICE_REGISTER else self.value.replace("_", " ")

    @property
    def numeric(self) -> bool:
        """Whether the stored values are numbers (apparent age in years), combined by a weighted median rather
        than a vote."""
        return self is Attribute.APPARENT_AGE


STORED: Final[frozenset[str]] = frozenset(Attribute)
"""The stored names of the known attributes (rows of other names, say from a later version, are kept too)."""


def label_of(name: str) -> str:
    """How a profile names the attribute stored as ``name``: its :attr:`Attribute.label`, or the name with spaces
    for underscores when no member has it."""
    return Attribute(name).label if name in STORED else name.replace("_", " ")
