"""Bounds on importing an untrusted memory graph: sizes, depth, time, and how problems are reported.

:class:`GraphLimits` is built from :class:`~m3agent.settings.ImportSettings`
(the settings own the defaults). :class:`Deadline` ends an import that runs
too long; :class:`Problems` keeps the list of recorded skips short, and
:func:`shown` quotes a value from the file in a few characters whatever it is.
"""

from __future__ import annotations

import reprlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.errors import BenchmarkError

if TYPE_CHECKING:
    from m3agent.settings import ImportSettings

MAX_PROBLEMS = 200
"""Recorded skips listed one by one; the rest are counted."""
MAX_PROBLEM_CHARS = 300
MAX_INDEX = 2**31 - 1
"""Largest node id or clip index accepted (the stores keep them in 32-bit columns)."""

_MB = 2**20


@dataclass(frozen=True, slots=True)
class GraphLimits:
    """The bounds of one import, in bytes and counts."""

    max_file_bytes: int
    max_memory_bytes: int
    max_seconds: float
    max_depth: int
    max_items: int
    max_array_bytes: int
    max_text_chars: int
    face_dim: int
    voice_dim: int

    @classmethod
    def from_settings(cls, settings: ImportSettings | None = None) -> GraphLimits:
        """The limits of ``settings.importer`` (megabytes turned into bytes); the defaults when ``None``."""
        from m3agent.settings import ImportSettings

        s = settings or ImportSettings()
        return cls(
            max_file_bytes=int(s.max_file_mb * _MB), max_memory_bytes=int(s.max_memory_mb * _MB),
            max_seconds=s.max_seconds, max_depth=s.max_depth, max_items=s.max_items,
            max_array_bytes=int(s.max_array_mb * _MB), max_text_chars=s.max_text_chars,
            face_dim=s.face_dim, voice_dim=s.voice_dim,
        )

    def deadline(self) -> Deadline:
        """A deadline ``max_seconds`` from now: start it when the import starts, check it between steps."""
        return Deadline(time.monotonic() + self.max_seconds, self.max_seconds)


@dataclass(frozen=True, slots=True)
class Deadline:
    """The monotonic time by which an import must be done."""

    at: float
    seconds: float

    def check(self, doing: str) -> None:
        """Raise :class:`BenchmarkError` naming ``doing`` once the deadline has passed, so an import that
        runs too long stops before writing anything."""
        if time.monotonic() > self.at:
            raise BenchmarkError(
                f"the import ran longer than its limit of {self.seconds:g} s ({doing}); nothing of it was kept",
                hint="raise importer.max_seconds (M3AGENT_IMPORTER__MAX_SECONDS) for a very large graph",
            )


class Problems(list[str]):
    """A list of recorded skips that keeps the first :data:`MAX_PROBLEMS`, each cut to a few hundred characters."""

    def __init__(self, items: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__()
        self.more = 0
        for item in items:
            self.append(item)

    def append(self, item: str) -> None:
        """Keep ``item`` (shortened) while fewer than :data:`MAX_PROBLEMS` are kept, else only count it, so a
        graph full of bad nodes cannot grow the report without bound."""
        if len(self) < MAX_PROBLEMS:
            super().append(item if len(item) <= MAX_PROBLEM_CHARS else item[: MAX_PROBLEM_CHARS - 1] + "…")
        else:
            self.more += 1

    def final(self) -> tuple[str, ...]:
        """The kept skips, plus one line counting the others."""
        return (*self, f"… and {self.more} more problems not listed") if self.more else tuple(self)


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlong = 40
for _name in ("maxlist", "maxtuple", "maxdict", "maxset", "maxfrozenset", "maxdeque", "maxarray"):
    setattr(_REPR, _name, 4)


def shown(value: Any, limit: int = 80) -> str:
    """A short repr of a value read from the file: bounded in depth, width and length, never raising."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a hostile object may fail any repr; its type is enough
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"
