"""Questions for a generated episode, by template, and the kept split between dev and test.

Phrasings live in ``bench/data/episode_templates_v1.json``; each belongs to ``dev`` or ``test``, and so does each
seed (the test seeds are a fixed list; any other seed is dev). A dev episode is asked only dev phrasings, a test
episode only test phrasings, so answering tuned on dev meets new wording as well as new episodes on test.

A third wording, ``fresh``, is a later hand's phrasings of the same kinds for dev seeds: the same facts as the dev
wording (the draw does not depend on the wording), asked in words that answering was not tuned to. Its gap to the
dev wording measures how far answering leans on the dev phrasings, on episodes that may be read question by
question; once worked on, fresh phrasings join dev and a new hand writes the next ones.
The questions are :class:`~m3agent.bench.episodes.people_eval.EvalQuestion` values: ``bench episode``'s scoring applies.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from m3agent.bench.episodes.catalogue import Catalogue
from m3agent.bench.episodes.facts import Fact, facts
from m3agent.bench.episodes.people_eval import TYPES, EvalQuestion, EvalSet
from m3agent.bench.episodes.seeds import Episode, generate
from m3agent.errors import BenchmarkError

DEFAULT_TEMPLATES = "episode_templates_v1"
Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")
Wording = Literal["dev", "test", "fresh"]
WORDINGS: tuple[Wording, ...] = ("dev", "test", "fresh")


@dataclass(frozen=True, slots=True)
class Phrasing:
    id: str
    kind: str
    split: Wording
    text: str


@dataclass(frozen=True, slots=True)
class Template:
    """A kind of fact: its question type, plan operations, gold answer text(s) and phrasings."""

    kind: str
    type: str
    asks: tuple[str, ...]
    answers: dict[str, str]
    """``"yes"``/``"no"`` for a yes-no kind, ``""`` for the only answer."""
    phrasings: tuple[Phrasing, ...]


@dataclass(frozen=True, slots=True)
class Templates:
    name: str
    kinds: dict[str, Template]
    seeds: dict[Split, tuple[int, ...]]
    """The default seeds per split; the test list is also the definition of a test seed."""
    per_type: int

    def split_of(self, seed: int) -> Split:
        return "test" if seed in self.seeds["test"] else "dev"

    def phrasings(self, wording: Wording) -> tuple[Phrasing, ...]:
        return tuple(p for t in self.kinds.values() for p in t.phrasings if p.split == wording)


def load_templates(name: str = DEFAULT_TEMPLATES) -> Templates:
    """The packaged templates, checked: known types, every wording phrased for every kind, disjoint seeds."""
    resource = resources.files("m3agent") / "bench" / "data" / f"{name}.json"
    if not resource.is_file():
        raise BenchmarkError(f"no question templates {name!r}", hint=f"the packaged ones are {DEFAULT_TEMPLATES!r}")
    raw = json.loads(resource.read_text(encoding="utf-8"))
    kinds = {kind: _template(kind, spec) for kind, spec in raw["kinds"].items()}
    seeds: dict[Split, tuple[int, ...]] = {s: tuple(raw["splits"][s]["seeds"]) for s in SPLITS}
    if set(seeds["dev"]) & set(seeds["test"]):
        raise BenchmarkError("a seed is listed in both the dev and the test split")
    return Templates(raw["name"], kinds, seeds, int(raw["questions_per_type"]))


def _template(kind: str, spec: dict[str, Any]) -> Template:
    answer = spec["answer"]
    phrasings = tuple(Phrasing(f"{kind}.{i}", kind, p["split"], p["text"]) for i, p in enumerate(spec["phrasings"]))
    template = Template(kind, spec["type"], tuple(spec["ask"]), answer if isinstance(answer, dict) else {"": answer},
                        phrasings)
    if template.type not in TYPES or {p.split for p in phrasings} != set(WORDINGS):
        raise BenchmarkError(f"template {kind!r}: unknown type or not phrased in every wording ({', '.join(WORDINGS)})")
    return template


def episode_set(catalogue: Catalogue, templates: Templates, seed: int, minutes: float,
                split: Split | None = None, wording: Wording | None = None) -> tuple[Episode, EvalSet]:
    """The episode of ``seed`` and its questions in ``split``'s phrasings (a seed of the other split is refused),
    or in the ``fresh`` wording for a dev seed (a test seed takes only test phrasings)."""
    own = templates.split_of(seed)
    if split is not None and split != own:
        raise BenchmarkError(f"seed {seed} belongs to the {own} split, not {split}",
                             hint=f"test seeds: {', '.join(map(str, templates.seeds['test']))}")
    words = wording or own
    if (own == "test") != (words == "test"):
        raise BenchmarkError(f"seed {seed} of the {own} split cannot be asked in the {words} wording",
                             hint="test seeds take test phrasings; dev seeds take dev or fresh ones")
    episode = generate(catalogue, seed, minutes)
    questions = ask(episode, templates, words)
    return episode, EvalSet(episode.name, episode.eval_parts(), questions)


def ask(episode: Episode, templates: Templates, wording: Wording) -> tuple[EvalQuestion, ...]:
    """``templates.per_type`` questions of every type (fewer when the episode lacks facts; other types then
    give more), each fact once, kinds taken in turn, phrasings drawn from ``wording``'s. The facts and their order
    depend on the seed's split only, so a dev seed asks the same facts in the dev and the fresh wording."""
    split = "test" if wording == "test" else "dev"
    rng = random.Random(f"{episode.seed}/{split}/questions")
    by_type: dict[str, list[Fact]] = {t: [] for t in TYPES}
    for fact in facts(episode, rng):
        by_type[templates.kinds[fact.kind].type].append(fact)
    picked: list[Fact] = []
    for t in TYPES:
        picked += _take(by_type[t], templates.per_type, rng)
    wanted = templates.per_type * len(TYPES)
    rest = [f for t in TYPES for f in by_type[t] if f not in picked]
    picked += rng.sample(rest, min(len(rest), wanted - len(picked)))
    return tuple(_question(f, templates.kinds[f.kind], wording, rng, i) for i, f in enumerate(picked, 1))


def _take(pool: list[Fact], n: int, rng: random.Random) -> list[Fact]:
    """``n`` facts of distinct keys, one kind after another so no kind crowds out the rest."""
    by_kind: dict[str, list[Fact]] = {}
    for fact in pool:
        by_kind.setdefault(fact.kind, []).append(fact)
    for group in by_kind.values():
        rng.shuffle(group)
    kinds = sorted(by_kind)
    rng.shuffle(kinds)
    out: list[Fact] = []
    keys: set[str] = set()
    while len(out) < n and any(by_kind.values()):
        for kind in kinds:
            group = by_kind[kind]
            while group and group[-1].key in keys:
                group.pop()
            if group and len(out) < n:
                fact = group.pop()
                out.append(fact)
                keys.add(fact.key)
    return out


def _question(fact: Fact, template: Template, wording: Wording, rng: random.Random, number: int) -> EvalQuestion:
    phrasing = rng.choice([p for p in template.phrasings if p.split == wording])
    answer = template.answers[fact.answer or ""]
    return EvalQuestion(f"{template.type[0].upper()}{str(number).zfill(2)}-{phrasing.id}", template.type,
                        phrasing.text.format(**fact.slots), answer.format(**fact.slots), fact.evidence,
                        fact.keywords, fact.polarity, fact.when, template.asks, fact.rivals)
