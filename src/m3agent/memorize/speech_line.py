"""The one format of a speech memory's text, written and read here.

Two writers put what someone said into memory: the perception writer (``At 0:05 <voice_3> says: "words"``,
followed by the on-screen captions that restate it) and the LoCoMo ingest (``<voice_1> said: words``, with a
shared image's caption in brackets). Every reader (consolidation's cues and checks, control's quotations) goes
through :func:`read_speech`, so the format can change in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from m3agent import tags
from m3agent.text import clock

CAPTIONED = " Captioned on screen: "
"""Between what was said and the on-screen lines that restate it."""
SPEECH = re.compile(rf"^(?:At [0-9:.]+ )?(?P<tag>{tags.pattern()}) (?:says|said): (?P<quote>.*)$", re.DOTALL)
_QUOTES = '"“”'


@dataclass(frozen=True, slots=True)
class SpeechLine:
    """What a speech memory says: who spoke (their tag) and the words; the on-screen lines that restate them
    apart (``captions``, empty when none were read)."""

    tag: str
    quote: str
    captions: tuple[str, ...] = ()


def quoted(tag: str, words: str) -> str:
    """``<voice_3> says: "words"``: what someone said, without a time (as consolidation's prompt shows it)."""
    return f'{tag} says: "{words}"'


def says_line(start_s: float, tag: str, words: str, captions: tuple[str, ...] = ()) -> str:
    """The perception writer's line: ``At 0:05 <voice_3> says: "words"`` and the captions restating it."""
    line = f"At {clock(start_s)} {quoted(tag, words)}"
    if captions:
        line += CAPTIONED + '"' + _BETWEEN.join(captions) + '".'
    return line


def said_line(tag: str, words: str) -> str:
    """A conversation turn's line (LoCoMo): ``<voice_1> said: words``."""
    return f"{tag} said: {words}"


def read_speech(text: str) -> SpeechLine | None:
    """The speaker's tag and words of a speech memory's ``text``; ``None`` for any other memory."""
    match = SPEECH.match(text)
    if match is None:
        return None
    said, _, shown = match.group("quote").partition(CAPTIONED)
    shown = shown.strip().removesuffix(".").strip()
    captions = tuple(c for c in shown[1:-1].split(_BETWEEN) if c.strip())
    return SpeechLine(match.group("tag"), said.strip().strip(_QUOTES), captions)


_BETWEEN = '"; "'
"""Between two captions of a line, as :func:`says_line` writes them."""
