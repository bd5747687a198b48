"""Candidates of the select mode: retrieved memories reranked without a model.

The score of a memory is its keyword overlap with the question plus half its
normalised retrieval score. The overlap is the share of the question's
content words (lightly stemmed: "drinks" = "drink") found in the memory,
each word weighted by how rare it is among the candidates, so a word every
candidate shares ("says") decides nothing. The retrieval score (hybrid
vector + BM25 fusion) carries the semantic match where words differ.
Derived facts (name <-> character mappings) come first: they answer
mapping questions directly.

A who-question ("Who said ...?") asks for a person: memories that name one
(an entity or character tag, or an entity edge) and match the question about
as well as the best candidate (:data:`WHO_MATCH`) come first, so the speech of ``<voice_3>`` saying "I was a
senator from New York" answers it rather than the on-screen caption "SENATOR"
that matches as many words but says nothing about who.

Measured on 300 LoCoMo single-hop questions (minilm, 12 retrieved): the
first candidate is a gold evidence turn for 131 (44%), against 96 (32%) in
retrieval order; the weight of retrieval is flat between 0 and 0.75.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from m3agent import tags
from m3agent.control.reading import read_question
from m3agent.control.results import Hit, SearchResult
from m3agent.control.retrieval.ranking import MOMENT_WEIGHT, closeness, keyword_text
from m3agent.text import stem, tokens

RETRIEVAL_WEIGHT = 0.5
WHO_MATCH = 0.8
"""A who-question prefers memories naming someone whose overlap is at least this share of the best overlap."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One possible answer: a retrieved memory (``hit``) or a derived fact (``hit`` is None).

    ``text`` is what the model reads and the answer quotes (tags rewritten to names where known).
    """

    text: str
    hit: Hit | None
    score: float
    overlap: float = 0.0

    @property
    def memory_id(self) -> int | None:
        return None if self.hit is None else self.hit.memory.id

    @property
    def label(self) -> str:
        return "a derived fact" if self.hit is None else f"[m{self.hit.memory.id}]"


def rank_candidates(result: SearchResult, question: str, limit: int) -> list[Candidate]:
    """Facts first, then the hits of ``result`` by rerank score (ties: retrieval order); at most ``limit``."""
    facts = [Candidate(fact, None, math.inf) for fact in result.facts]
    hits = _unique_hits(result)
    wanted = stems(keyword_text(question))
    idf = _idf(wanted, [stems(keyword_text(h.text)) for h in hits])
    top = max((h.score for h in hits), default=0.0) or 1.0
    reading = read_question(question)
    scored = [_candidate(hit, wanted, idf, top, reading.moment) for hit in hits]
    bar = WHO_MATCH * max((c.overlap for c in scored), default=0.0)
    who = reading.asks_person and bar > 0
    first = [who and c.overlap >= bar and c.hit is not None and names_someone(c.hit) for c in scored]
    order = sorted(range(len(scored)), key=lambda i: (not first[i], -scored[i].score, i))
    return (facts + [scored[i] for i in order])[:limit]


def names_someone(hit: Hit) -> bool:
    """Whether the memory carries a person: an entity edge or a face, voice or character tag."""
    return bool(hit.memory.entity_ids) or bool(tags.find_tags(hit.memory.text))


def stems(text: str) -> set[str]:
    """Lower-cased, lightly stemmed words of ``text`` (tags dropped)."""
    plain = tags.rewrite(text, lambda _tag: " ")
    return {stem(word) for word in tokens(plain)}


def _candidate(hit: Hit, wanted: set[str], idf: dict[str, float], top: float, moment: float | None) -> Candidate:
    found = stems(keyword_text(hit.text))
    total = sum(idf.values())
    overlap = sum(idf[w] for w in wanted & found) / total if total else 0.0
    near = 0.0 if moment is None else MOMENT_WEIGHT * closeness(hit.memory.start_s, hit.memory.end_s, moment)
    return Candidate(hit.text, hit, overlap + RETRIEVAL_WEIGHT * hit.score / top + near, overlap)


def _idf(wanted: set[str], documents: Sequence[set[str]]) -> dict[str, float]:
    """BM25's idf of each question word over the candidates (a word in every one weighs little)."""
    n = len(documents)
    weights = {}
    for word in wanted:
        df = sum(1 for doc in documents if word in doc)
        weights[word] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return weights


def _unique_hits(result: SearchResult) -> list[Hit]:
    seen: dict[int, Hit] = {}
    for hit in result.hits:
        if hit.matched:
            seen.setdefault(hit.memory.id, hit)
    return list(seen.values())
