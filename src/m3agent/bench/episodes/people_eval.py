"""The people-and-order evaluation set: an episode of real media parts and questions about who, when and in what order.

The set (``bench/data/<name>.json``) lists the parts of the episode (a video file, or a still picture or a dark
screen under an audio file, all under ``../shared/media``) and questions whose times are written against the parts
(``{mid:photo}``, ``{debate+6}``), so the questions stay right whatever the parts' exact lengths. Scoring is
deterministic (keyword groups, a yes/no polarity, a time inside a part) and, when a judge model is given, judged
as well; the evidence hit rate asks whether the answer cited a memory inside a gold part.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from m3agent.control.replies import Ask
from m3agent.errors import BenchmarkError
from m3agent.text import CLOCK, clock, clock_seconds

if TYPE_CHECKING:
    from m3agent.bench.episodes.build import Still

DEFAULT_SET = "episode_people_v1"
TYPES = ("speech", "identity", "temporal", "crossmodal", "counting", "description")
WHEN_SLACK_S = 2.0  # a time in an answer counts for a part when it falls within this of the part
_FIELD = re.compile(r"\{(?:(?P<edge>start|end|mid):(?P<part>\w+)|(?P<base>\w+)\+(?P<offset>\d+(?:\.\d+)?))\}")
_INTERNAL_ID = re.compile(r"\bCLIP_\d+\b|\[m\d+\]|<(?:face|voice)_\d+>", re.IGNORECASE)
_YES, _NO = frozenset({"yes"}), frozenset({"no", "not", "never", "different"})


@dataclass(frozen=True, slots=True)
class EvalPart:
    """One part of the episode: a ``video`` file, or a still ``image`` (None: a dark screen) under ``audio``."""

    id: str
    video: str | None = None
    image: str | None = None
    audio: str | None = None
    offset_s: float = 0.0
    seconds: float | None = None
    people: str = ""

    def source(self, media: Path) -> Path | Still:
        """The episode builder's input for this part, with paths under ``media``."""
        from m3agent.bench.episodes.build import Still

        if self.video is not None:
            return media / self.video
        if self.audio is None:
            raise BenchmarkError(f"part {self.id!r} has neither a video nor an audio file")
        image = media / self.image if self.image is not None else None
        return Still(image, media / self.audio, self.offset_s, self.seconds)

    def files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.video, self.image, self.audio) if f is not None)


@dataclass(frozen=True, slots=True)
class EvalQuestion:
    """A question with its gold answer; what a right answer must hold (``keywords`` groups: one word of each group;
    ``polarity``: yes or no; ``when``: a time inside each named part) and the parts its evidence lies in."""

    id: str
    type: str
    question: str
    answer: str
    evidence: tuple[str, ...]
    keywords: tuple[tuple[str, ...], ...] = ()
    polarity: str | None = None
    when: tuple[str, ...] = ()
    asks: tuple[str, ...] = ()
    """The query-plan operations that read the question right (plan accuracy; :mod:`m3agent.control.people.plan`)."""
    rivals: tuple[str, ...] = ()
    """Words of the other answers the question offers ("left or right?"): an answer naming several is taken at the
    one it names first (:func:`names_gold_first`), so naming everyone is no answer."""


@dataclass(frozen=True, slots=True)
class EvalSet:
    name: str
    parts: tuple[EvalPart, ...]
    questions: tuple[EvalQuestion, ...]


Timeline = dict[str, tuple[float, float]]
"""Part id -> (start, end) in the built episode, in seconds."""


def load_eval_set(name: str = DEFAULT_SET) -> EvalSet:
    """The packaged set ``name`` (or a JSON file path), checked: every time field and evidence names a part."""
    path = Path(name)
    if path.suffix == ".json" and path.is_file():
        raw = json.loads(path.read_text(encoding="utf-8"))
    else:
        resource = resources.files("m3agent") / "bench" / "data" / f"{name}.json"
        if not resource.is_file():
            raise BenchmarkError(f"no evaluation set {name!r}", hint=f"the packaged set is {DEFAULT_SET!r}")
        raw = json.loads(resource.read_text(encoding="utf-8"))
    parts = tuple(EvalPart(**p) for p in raw["parts"])
    questions = tuple(_question(q) for q in raw["questions"])
    _check(parts, questions)
    return EvalSet(raw["name"], parts, questions)


def _question(raw: dict[str, Any]) -> EvalQuestion:
    return EvalQuestion(raw["id"], raw["type"], raw["question"], raw["answer"], tuple(raw["evidence"]),
                        tuple(tuple(group) for group in raw.get("keywords", ())), raw.get("polarity"),
                        tuple(raw.get("when", ())), tuple(raw.get("ask", ())), tuple(raw.get("rivals", ())))


def _check(parts: tuple[EvalPart, ...], questions: tuple[EvalQuestion, ...]) -> None:
    ids = {p.id for p in parts}
    for q in questions:
        named = set(q.evidence) | set(q.when)
        named |= {m["part"] or m["base"] for text in (q.question, q.answer) for m in _FIELD.finditer(text)}
        if named - ids or q.type not in TYPES:
            raise BenchmarkError(f"question {q.id} names unknown parts {sorted(named - ids)} or type {q.type!r}")
        if unknown := set(q.asks) - set(get_args(Ask)):
            raise BenchmarkError(f"question {q.id} names unknown plan operations {sorted(unknown)}")
        if not (q.keywords or q.polarity or q.when):
            raise BenchmarkError(f"question {q.id} has nothing to score (keywords, polarity or when)")


def timeline_of(parts: tuple[EvalPart, ...], built: list[dict[str, Any]]) -> Timeline:
    """Part ids against the builder's timeline (one entry per part, in order)."""
    if len(built) != len(parts):
        raise BenchmarkError(f"the episode has {len(built)} parts, the set {len(parts)}: rebuild the episode")
    return {p.id: (float(b["start_s"]), float(b["end_s"])) for p, b in zip(parts, built, strict=True)}


def render(text: str, timeline: Timeline) -> str:
    """``text`` with its time fields written as clock times of the episode."""
    def field(match: re.Match[str]) -> str:
        if match["edge"]:
            start, end = timeline[match["part"]]
            return clock({"start": start, "end": end, "mid": (start + end) / 2}[match["edge"]])
        return clock(timeline[match["base"]][0] + float(match["offset"]))

    return _FIELD.sub(field, text)


def keyword_correct(q: EvalQuestion, answer: str, timeline: Timeline) -> bool:
    """Whether ``answer`` holds one word of each keyword group, names its own answer before any rival's
    (:func:`names_gold_first`), and holds the gold polarity and a time in each ``when`` part."""
    text = answer.lower()
    if any(not any(re.search(rf"\b{re.escape(w.lower())}\b", text) for w in group) for group in q.keywords):
        return False
    if q.rivals and not names_gold_first(q, text):
        return False
    if q.polarity is not None and polarity(answer) != q.polarity:
        return False
    times = [clock_seconds(t) for t in re.findall(CLOCK, answer)]
    return all(any(timeline[p][0] - WHEN_SLACK_S <= t <= timeline[p][1] + WHEN_SLACK_S for t in times)
               for p in q.when)


def names_gold_first(q: EvalQuestion, answer: str) -> bool:
    """Whether, of the words that tell ``q``'s answer from its ``rivals``, ``answer`` names one of its own first:
    "the man on the left ... rather than the woman on the right" answers "left", and an answer listing both sides
    answers whichever it lists first. Words the gold and a rival share ("man" for two men) tell nothing."""
    named = {w.lower() for group in q.keywords for w in group}
    own, rivals = named - {w.lower() for w in q.rivals}, {w.lower() for w in q.rivals} - named
    text = answer.lower()
    found = [(m.start(), w in own) for w in own | rivals for m in re.finditer(rf"\b{re.escape(w)}\b", text)]
    return bool(found) and min(found)[1]


def polarity(answer: str) -> str | None:
    """``yes`` or ``no`` by the first word of an answer that decides it (``not``, ``never``, ``different``: no);
    None for an abstention ("The memory does not say." is no answer, not a no)."""
    from m3agent.control.modes.grounded import is_abstention

    if is_abstention(answer) or is_abstention(answer.split(".")[0]):
        return None
    for word in re.findall(r"[a-z]+", answer.lower()):
        if word in _YES:
            return "yes"
        if word in _NO:
            return "no"
    return None


def evidence_hit(q: EvalQuestion, cited: list[tuple[float, float]], timeline: Timeline) -> bool:
    """Whether any cited span overlaps a gold evidence part."""
    return any(start < timeline[p][1] and end > timeline[p][0] for start, end in cited for p in q.evidence)


def internal_ids(answer: str) -> list[str]:
    """The internal ids an answer leaks (clip ids, memory numbers, raw face/voice tags)."""
    return _INTERNAL_ID.findall(answer)
