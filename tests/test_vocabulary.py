"""Tags and text helpers have one owner each: ``m3agent.tags`` and ``m3agent.text``.

Grep-based guards over the sources (package and bench scripts), so a
hand-built tag, a private tag regex or a second copy of a helper cannot
come back unnoticed. Each guard is first shown to catch the old forms.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "m3agent"
OWNERS = {PACKAGE / "tags.py", PACKAGE / "text.py"}

GUARDS = {
    "hand-built tag (use tags.face/voice/character/format_tag)": re.compile(
        r"(?:face|voice|character)_\{|<\{[^}\n]*\}_\{"
    ),
    "tag regex (use tags.pattern/parse/tokenize/canonical_spelling)": re.compile(
        r"face\|voice\|character|(?:face|voice|character)_(?:\(|\\d)"
    ),
    "hand-formatted clock (use text.clock)": re.compile(r":02d\}"),
    "clock regex (use text.CLOCK/clock_seconds)": re.compile(r"\\d\{1,2\}\)?:\(?\\d\{2\}"),
    "name-extraction regex (use text.self_names/stated_names/NAMED_AS)": re.compile(
        r"my name is\||(?:named|called)\|(?:named|called)"
    ),
    "stopword list (use text.STOPWORDS)": re.compile(r"^\s*_?[A-Z_]*(?:STOP|FILLER)[A-Z_]*\s*=", re.MULTILINE),
}
# The forms these guards replaced, each of which must be caught.
OLD_FORMS = [
    'text = f"<face_{entity}> is on screen"',
    'tags = " and ".join(f"<{present[e]}_{e}>" for e in members)',
    'members = mappings.get(f"character_{tag.id}", ())',
    '_TAG = r"<(?:face|voice|character)_\\d+>"',
    '_TAG = r"<character_(?P<id>\\d+)>"',
    'r"\\bname (?:of|for) <?character_(\\d+)>?"',
    'return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"',
    '_CLOCK = r"(\\d{1,2}):(\\d{2})(?::(\\d{2}))?"',
    '_CLOCK = r"(?:(\\d+):)?(\\d{1,2}):(\\d{2}(?:\\.\\d+)?)"',
    'r"\\b(?i:my name is|my name\'s|i am|i\'m|this is|call me)\\s+"',
    '_TAG + r",? (?:is|was) (?:named|called|known as) " + _NAME',
    '_STOPWORDS = frozenset(_STOPWORD_TEXT.split())',
    '_STOP = {"the", "a", "an"}',
    '_FILLER = {"do", "does", "did"}',
]
# Exactly one module-level definition each, in its owner.
HELPERS = {
    "tags.py": ("format_tag", "parse", "tokenize", "pattern", "canonical_spelling"),
    "text.py": ("clock", "clock_seconds", "stem", "self_names", "stated_names"),
}


def _sources() -> list[Path]:
    return sorted([*PACKAGE.rglob("*.py"), *(REPO / "bench").rglob("*.py")])


@pytest.mark.parametrize("old", OLD_FORMS)
def test_the_guards_catch_the_old_forms(old: str) -> None:
    assert any(guard.search(old) for guard in GUARDS.values()), old


def test_no_tag_or_text_helper_is_built_outside_its_owner() -> None:
    found = []
    for path in _sources():
        if path in OWNERS:
            continue
        text = path.read_text(encoding="utf-8")
        for what, guard in GUARDS.items():
            for match in guard.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("owner", "name"), [(o, n) for o, names in HELPERS.items() for n in names])
def test_each_helper_is_defined_once_in_its_owner(owner: str, name: str) -> None:
    definition = re.compile(rf"^def _?{name}\(", re.MULTILINE)
    places = [p.relative_to(REPO).as_posix() for p in _sources() for _ in definition.finditer(p.read_text("utf-8"))]
    assert places == [f"src/m3agent/{owner}"]
