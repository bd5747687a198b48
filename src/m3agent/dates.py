"""Calendar days of dated memories, and what a speaker meant by "yesterday" or "last month" on such a day.

A conversation log dates each session ("1:56 pm on 8 May, 2023"); what is said in it is dated relative to that
day ("I went to a support group yesterday"). Asked when that happened, the right answer is the day meant
(7 May, 2023), not the session's day and not the word "yesterday". :func:`resolve_answer` rewrites an answer to
a when-question accordingly: a relative phrase in the answer is resolved against the day of the memory it rests
on, and an answer that is just that day becomes the day the memory's one relative phrase points to.

Weeks and weekends stay relative to the day ("the week before 8 May, 2023"): which dates a speaker's "last week"
covers is not known. Months and years are named ("April 2023", "2022").
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "couple of": 2}
_COUNT = "|".join([r"\d{1,2}", *sorted(_COUNTS, key=len, reverse=True), "a few", "few"])  # longest first
_DAY = re.compile(r"(?:\d{1,2}:\d\d\s*[ap]m\s+on\s+)?(\d{1,2})\s+(" + "|".join(MONTHS) + r"),?\s+(\d{4})", re.I)
_RELATIVE = re.compile(
    r"\b(?:(yesterday|last night|today|tonight|this (?:morning|afternoon|evening)|tomorrow)"
    r"|(last|this|next) (week|weekend|month|year|" + "|".join(WEEKDAYS) + r")"
    r"|(" + _COUNT + r") (day|week|month|year)s? ago)\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class RelativeDate:
    """A phrase of a text dated relative to the day it was said, and the date it means, written out."""

    phrase: str
    meant: str


def parse_day(text: str) -> dt.date | None:
    """The day of ``1:56 pm on 8 May, 2023`` or ``8 May, 2023`` (the first such date in ``text``); None without one."""
    found = _DAY.search(text)
    if found is None:
        return None
    day, month, year = found.groups()
    try:
        return dt.date(int(year), MONTHS.index(month.capitalize()) + 1, int(day))
    except ValueError:
        return None


def write_day(day: dt.date) -> str:
    """``8 May, 2023``: the form dated memories show."""
    return f"{day.day} {MONTHS[day.month - 1]}, {day.year}"


def relative_dates(text: str, said_on: dt.date) -> list[RelativeDate]:
    """The phrases of ``text`` dated relative to ``said_on``, each with the date it means."""
    out = []
    for found in _RELATIVE.finditer(text):
        meant = _meaning(found, said_on)
        if meant is not None:
            out.append(RelativeDate(found.group(0), meant))
    return out


def resolve_answer(answer: str, memory_text: str, said_on: dt.date) -> str:
    """``answer`` to a when-question, resting on ``memory_text`` said on ``said_on``, with the dates it means.

    Relative phrases in the answer are replaced by their dates; an answer that is only ``said_on`` becomes the date
    of the memory's relative phrase when the memory holds exactly one; any other answer is returned as it is.
    """
    own = relative_dates(answer, said_on)
    if own:
        for found in own:
            answer = answer.replace(found.phrase, found.meant, 1)
        return answer
    if parse_day(answer) == said_on and _only_date(answer):
        meant = {found.meant for found in relative_dates(memory_text, said_on)}
        if len(meant) == 1:
            return meant.pop()
    return answer


def _only_date(answer: str) -> bool:
    """Whether ``answer`` holds nothing but a day (``8 May, 2023``, ``on 8 May 2023.``)."""
    rest = _DAY.sub("", answer, count=1)
    return not rest.strip(" .,").lower().removeprefix("on").strip(" .,")


def _meaning(found: re.Match[str], day: dt.date) -> str | None:
    single, which, unit, count, counted = found.groups()
    if single is not None:
        return write_day(day + dt.timedelta(days=_single_offset(single.lower())))
    if which is not None:
        return _named(which.lower(), unit.lower(), day)
    return _ago(count.lower(), counted.lower(), day)


def _single_offset(word: str) -> int:
    return {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(word, 0)


def _named(which: str, unit: str, day: dt.date) -> str | None:
    """``last / this / next`` + week, weekend, month, year or a weekday (``unit`` lower-cased)."""
    side = {"last": "before", "next": "after", "this": "of"}[which]
    if unit in ("week", "weekend"):
        return f"the {unit} {side} {write_day(day)}"
    if unit == "month":
        return _month(day, {"last": -1, "this": 0, "next": 1}[which])
    if unit == "year":
        return str(day.year + {"last": -1, "this": 0, "next": 1}[which])
    if which == "this":
        return None
    return f"the {unit.capitalize()} {side} {write_day(day)}"


def _ago(count: str, unit: str, day: dt.date) -> str:
    n = _COUNTS.get(count) or (int(count) if count.isdigit() else None)
    if n is None:  # "a few": no single date
        return f"a few {unit}s before {write_day(day)}"
    if unit == "day":
        return write_day(day - dt.timedelta(days=n))
    if unit == "week":
        return f"{n} week{'s' if n > 1 else ''} before {write_day(day)}"
    if unit == "month":
        return _month(day, -n)
    return str(day.year - n)


def _month(day: dt.date, shift: int) -> str:
    index = day.year * 12 + day.month - 1 + shift
    return f"{MONTHS[index % 12]} {index // 12}"
