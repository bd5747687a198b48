"""Text from users and stores made safe to show in a terminal.

Stored names, memory texts, questions and model replies are data, never
formatting: :func:`printable` shows every control character, terminal escape
(ESC, CSI, OSC ...) and bidirectional override as a visible ``\\xNN`` /
``\\uNNNN`` escape (newlines and tabs stay), and :func:`literal` /
:func:`markup_literal` keep Rich from reading ``[...]`` as markup, so a stored
name cannot restyle the output, add links, clear the screen or reorder text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

# C0 controls but tab and newline, DEL, C1 controls (0x9b is an 8-bit CSI), and the
# invisible direction marks and overrides that can reorder what a line appears to say.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: object) -> str:
    """``str(value)`` with control characters and escapes replaced by visible ``\\xNN`` / ``\\uNNNN``."""
    return _UNSAFE.sub(_visible, str(value))


def markup_literal(value: object) -> str:
    """:func:`printable` text escaped for a Rich markup string: shown exactly as stored."""
    from rich.markup import escape

    return escape(printable(value))


def literal(value: object, style: str = "") -> Text:
    """A Rich ``Text`` of :func:`printable` text (``Text`` is never parsed as markup)."""
    from rich.text import Text

    return Text(printable(value), style=style)
