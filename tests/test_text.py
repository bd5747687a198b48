"""The shared text helpers: clock, stopwords, stem, name extraction."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m3agent import tags
from m3agent.control.retrieval.query import extract_time_range
from m3agent.text import STOPWORDS, clock, clock_seconds, may_state_a_name, self_names, stated_names, stem


def test_clock_writes_minutes_without_padding_and_hours_from_an_hour_on() -> None:
    assert clock(0) == "0:00" and clock(65) == "1:05" and clock(75.9) == "1:15"
    assert clock(3725) == "1:02:05" and clock(-3) == "0:00"


@given(st.integers(0, 10 * 3600))
def test_clock_seconds_reads_what_clock_writes(seconds: int) -> None:
    assert clock_seconds(clock(seconds)) == seconds


def test_clock_seconds_takes_fractions_and_rejects_other_text() -> None:
    assert clock_seconds("1:32.5") == 92.5 and clock_seconds(" 01:05 ") == 65.0
    for bad in ("", "5", "1:5", "a:05", "1:05 pm"):
        with pytest.raises(ValueError, match="not a clock time"):
            clock_seconds(bad)


def test_question_time_phrases_read_the_memory_clock_format() -> None:
    """A time copied from a memory ("At 1:05 ...", "1:02:05") restricts a question to that time."""
    assert extract_time_range("who spoke at 1:05?")[1:] == (35.0, 95.0)
    assert extract_time_range("from 1:02:05 to 1:03:00 who left")[1:] == (3725.0, 3780.0)
    assert extract_time_range("at 03:10")[1:] == (160.0, 220.0)  # padded minutes still read


def test_stem_matches_word_forms() -> None:
    assert {stem(w) for w in ("drinks", "drinking", "drinked", "Drink")} == {"drink"}
    assert stem("cities") == "city" and stem("glass") == "glass" and stem("bus") == "bus"
    assert stem("Ann's") == "ann" and stem("likes") == stem("like")
    assert stem("<face_3>") == "<face_3>"  # tags are not words


def test_stopwords_are_lower_case_function_words() -> None:
    assert {"the", "a", "is", "what", "with"} <= STOPWORDS
    assert not STOPWORDS & {"not", "no", "never", "coffee", "name"}  # negators and content words stay
    assert all(w == w.lower() for w in STOPWORDS)


def test_self_names_reject_common_words() -> None:
    assert self_names("I'm Sure it works. I am Going home. This is Bob.") == ["Bob"]
    assert self_names("Hi, my name is Ann Lee and I bake.") == ["Ann Lee"]
    assert self_names("My name is Alice") == ["Alice"] and self_names("call me Ishmael") == ["Ishmael"]
    assert self_names("my name is not important") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<face_3>'s name is Ann.", [("face", 3, "Ann")]),
        ("<voice_7>’s full name is Ann Lee.", [("voice", 7, "Ann Lee")]),
        ("The name of <character_2> is \"Lily\".", [("character", 2, "Lily")]),
        ("<voice_7> is called Bob and <face_1> goes by Al.", [("voice", 7, "Bob"), ("face", 1, "Al")]),
        ("<face_4> introduces herself as Mia.", [("face", 4, "Mia")]),
        ("<face_4>'s name is not known.", []),
        ("<face_4> is called The Boss.", []),  # a capitalised common word is no name
        ("face_4's name is Ann.", []),  # only canonical tags state names
    ],
)
def test_stated_names(text: str, expected: list[tuple[str, int, str]]) -> None:
    assert [(t.kind, t.id, n) for t, n in stated_names(text)] == expected
    assert may_state_a_name(text) or not expected


@pytest.mark.parametrize("verb", ["is named", "was called", "gets addressed as", "is referred to as", "got known as",
                                  "goes by", "answers to the name", "introduces themself as", ", named"])
def test_the_quick_name_test_never_hides_a_statement(verb: str, data_dir: Path) -> None:
    """Every phrasing the patterns know passes the cheap test, and so does every LoCoMo turn that states one."""
    assert stated_names(f"<face_2> {verb} Ann.".replace(" ,", ",")) and may_state_a_name(f"<face_2> {verb} Ann.")
    turns = [t["text"] for s in json.loads((data_dir / "locomo" / "locomo10.json").read_text())
             for k, v in s["conversation"].items() if k.startswith("session_") and isinstance(v, list) for t in v]
    for text in turns:
        tagged = re.sub(r"\b(I|She|He)\b", "<face_1>", text)
        assert may_state_a_name(tagged) or not stated_names(tagged)


def test_stated_names_read_the_canonical_tag() -> None:
    [(tag, name)] = stated_names("<character_12>'s name is Ann.")
    assert tag == tags.Tag(tags.TagKind.CHARACTER, 12) and name == "Ann"


def test_a_title_is_not_a_name() -> None:
    assert stated_names("<face_2>'s name is Mr. President.") == []
    assert stated_names("<face_2>'s name is Senator") == []
    assert self_names("I'm President of the club") == []
    assert [n for _, n in stated_names("<face_2>'s name is Ann Lee.")] == ["Ann Lee"]


def test_stem_drops_the_consonant_a_suffix_doubled() -> None:
    assert {stem(w) for w in ("rap", "raps", "rapping", "rapped")} == {"rap"}
    assert stem("stopped") == stem("stop") and stem("planning") == stem("plan") and stem("jogging") == "jog"
    assert [stem(w) for w in ("calling", "passed", "buzzing", "stuffed", "added", "seeing")] == \
        ["call", "pass", "buzz", "stuff", "add", "see"]  # the word's own double letters stay
