"""Hybrid ranking of memories: query vectors (with alias expansion) + BM25, fused by RRF.

Alias expansion is deterministic: each ``<character_k>`` (or a known name)
in the query is replaced by each of the character's ``<face_i>``/``<voice_j>``
tags, the variants enumerated in order and capped; a memory's similarity is
its best cosine over the variants. Reciprocal rank fusion
(``sum weight / (rrf_k + rank)``) combines the vector and keyword rankings
without calibrating their score scales against each other; ``rrf_k`` 4 and
a keyword weight of 0.7 were chosen on half of LoCoMo (docs/benchmarks.md,
LoCoMo retrieval: levers).

A search restricted to named people asks the vector index in their own words
(:func:`in_own_words`: "What did Caroline paint for her mother?" as "What did I
paint for my mother?"), since what a person says is stored as their quoted,
first-person speech, and also without the names (:func:`without_names`), the
form of what is said about them.

The fused ranking is then read with each clip's context (:func:`with_clip_context`):
a memory beside a strong hit of its own clip (a conversation session, a 30-second
clip) moves up.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.control.people.characters import CharacterIndex
from m3agent.domain import Memory, SearchFilter
from m3agent.text import STOPWORDS, tokens, whole_words

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.store.protocol import MemoryStore

MOMENT_WEIGHT = 0.5
"""A question about one instant ("what is the talk about at 1:20?") adds up to this for a memory at that instant:
its words may share nothing with the memory's, and the time range of the search (a minute around it) holds
memories of other scenes."""
MOMENT_NEAR_S = 2.0
"""A memory this close to the instant is at it (speech and shot bounds are known to about a second)."""
MOMENT_FADE_S = 6.0
"""Farther than this from the instant, a memory gains nothing."""
MAX_VARIANTS = 8
RRF_K = 4
"""Small: the first few ranks of either list dominate (60, the usual constant, flattened them; 10 gave 2.5 points
less LoCoMo recall@5 once restricted searches asked in the person's own words)."""
KEYWORD_WEIGHT = 0.7
"""BM25's share against the vector ranking's 1.0 in the fusion."""
CLIP_CONTEXT_WEIGHT = 0.3
"""A memory gains this share of the best fused score among the other memories of its clip near the top."""
CLIP_CONTEXT_WINDOW = 10
"""How many of the first fused results lend their score to the rest of their clip."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """A memory with its fused score and best vector similarity (``None``: keyword only)."""

    memory: Memory
    score: float
    similarity: float | None
    keyword: bool


def alias_variants(text: str, index: CharacterIndex, names: Sequence[str] = ()) -> list[str]:
    """Query texts with character tags and names replaced by the characters' entity tags."""
    slots = _alias_slots(text, index, names)
    if not slots:
        return [text]
    variants = []
    for combo in itertools.islice(itertools.product(*(alts for _, alts in slots)), MAX_VARIANTS):
        variant = text
        for (replace_first, _), alias in zip(slots, combo, strict=True):
            variant = replace_first(variant, alias)
        variants.append(variant)
    return variants


_Slot = tuple[Callable[[str, str], str], tuple[str, ...]]  # (replace the first occurrence by, aliases)


def _alias_slots(text: str, index: CharacterIndex, names: Sequence[str]) -> list[_Slot]:
    slots: list[_Slot] = []
    for tag in dict.fromkeys(tags.find_tags(text)):
        cid = index.character_of_tag(tag)
        aliases = _entity_tags(index, cid) if tag.kind == tags.TagKind.CHARACTER and cid is not None else ()
        if aliases:
            slots.append((_tag_replacer(tag), aliases))
    for name in names:
        aliases = tuple(a for cid in index.characters_named(name) for a in _entity_tags(index, cid))
        if aliases:
            slots.append((_name_replacer(name), aliases))
    return slots


def _tag_replacer(tag: tags.Tag) -> Callable[[str, str], str]:
    return lambda text, alias: tags.replace_first(text, tag, alias)


def _name_replacer(name: str) -> Callable[[str, str], str]:
    pattern = whole_words(name)
    return lambda text, alias: pattern.sub(alias, text, count=1)


def _entity_tags(index: CharacterIndex, character: int | None) -> tuple[str, ...]:
    if character is None:
        return ()
    entity_ids = index.entities_of.get(character, ())
    return tuple(index.entity_tags[eid] for eid in entity_ids if eid in index.entity_tags)


def without_names(text: str, names: Sequence[str] = ()) -> str:
    """``text`` with its tags and the ``names`` (whole words, any case, with a possessive ``'s``) removed."""
    plain = tags.rewrite(text, lambda _tag: " ")
    for name in names:
        plain = whole_words(name, possessive=True).sub(" ", plain)
    return " ".join(plain.split())


_OWN = tuple((whole_words(pronoun), own) for pronoun, own in (
    ("his", "my"), ("her", "my"), ("he", "I"), ("she", "I"), ("himself", "myself"), ("herself", "myself"),
    ("him", "me")))
"""Third-person pronouns as the one person asked about would say them ("her" read as "my": "her mother", the
common case in questions, over "ask her")."""


def _possessive_then_plain(text: str, mention: str, own: str, subject: str) -> str:
    """``text`` with ``mention``'s possessive (``Caroline's``) as ``own`` and the bare mention as ``subject``."""
    def swap(match: re.Match[str]) -> str:
        return own if match.group(0)[-2:].lower() in ("'s", "’s") and len(match.group(0)) > len(mention) else subject

    return whole_words(mention, possessive=True).sub(swap, text)


def in_own_words(text: str, names: Sequence[str]) -> str:
    """``text`` as the person it names would ask it: the first person named (a name or a tag) as "I"
    ("Caroline's" as "my"), a second as "you" ("your"), any further one removed; when one person is named,
    "he"/"she"/"his"/"her" in the first person too.

    Measured on LoCoMo (conversations 0-4 to choose, 5-9 held out): recall@10 of restricted searches +0.6
    points over the names removed, +0.8 held out; the pronouns add @5 and @20 (docs/benchmarks.md).
    """
    seen: dict[str, str] = {}

    def placeholder(tag: tags.Tag) -> str:
        return seen.setdefault(str(tag), f"zzperson{len(seen)}zz")

    plain = tags.rewrite(text, placeholder)
    mentions = [*seen.values(), *names]
    found = sorted((m.start(), mention) for mention in mentions if (m := whole_words(mention).search(plain)))
    for position, (_, mention) in enumerate(found):
        own, subject = ("my", "I") if position == 0 else ("your", "you") if position == 1 else (" ", " ")
        plain = _possessive_then_plain(plain, mention, own, subject)
    if len(found) == 1:
        for pronoun, own in _OWN:
            plain = pronoun.sub(own, plain)
    return " ".join(plain.split())


def keyword_text(text: str, drop: Sequence[str] = ()) -> str:
    """Plain content words of ``text`` for BM25: tags, punctuation, stopwords and ``drop`` words removed."""
    plain = tags.rewrite(text, lambda _tag: " ")
    dropped = STOPWORDS | {w.lower() for phrase in drop for w in phrase.split()}
    words = [w for w in tokens(plain) if w.lower() not in dropped]
    return " ".join(words)


def hybrid_rank(
    store: MemoryStore,
    embedder: Embedder,
    queries: Sequence[str],
    keywords: str,
    flt: SearchFilter,
    *,
    pool: int = 60,
    rrf_k: int = RRF_K,
) -> list[Ranked]:
    """Fuse vector ranking over ``queries`` and BM25 over ``keywords``; best first."""
    vectors = embedder.embed(list(queries))
    # each memory scored by its best cosine over the query texts, in one pass over the rows
    by_vector = [(s.memory, s.score) for s in store.vector_search_best(list(vectors), pool, flt)]
    by_keyword = [s.memory for s in store.keyword_search(keywords, pool, flt)] if keywords else []
    return _fuse(by_vector, by_keyword, rrf_k)


def _fuse(by_vector: list[tuple[Memory, float]], by_keyword: list[Memory], rrf_k: int) -> list[Ranked]:
    """One ranking from both: each list adds its weight over ``rrf_k`` + rank; ties by memory id."""
    scores: dict[int, float] = {}
    memories: dict[int, Memory] = {}
    similarity: dict[int, float] = {}
    for rank, (memory, sim) in enumerate(by_vector):
        scores[memory.id] = scores.get(memory.id, 0.0) + 1.0 / (rrf_k + rank + 1)
        memories[memory.id] = memory
        similarity[memory.id] = sim
    keyword_ids = set()
    for rank, memory in enumerate(by_keyword):
        scores[memory.id] = scores.get(memory.id, 0.0) + KEYWORD_WEIGHT / (rrf_k + rank + 1)
        memories.setdefault(memory.id, memory)
        keyword_ids.add(memory.id)
    order = sorted(scores, key=lambda mid: (-scores[mid], mid))
    return [Ranked(memories[m], scores[m], similarity.get(m), m in keyword_ids) for m in order]


def with_clip_context(ranked: list[Ranked], weight: float = CLIP_CONTEXT_WEIGHT,
                      window: int = CLIP_CONTEXT_WINDOW) -> list[Ranked]:
    """``ranked`` re-scored with its clips' context, best first: each memory gains ``weight`` x the best score
    among the *other* memories of its clip in the first ``window``.

    What answers a question tends to sit together (the turns of one conversation session, the lines of one
    30-second clip): a memory beside a strong hit is likelier to matter than its own words show. Measured on
    LoCoMo (chosen on conversations 0-4, 5-9 held out): recall@10 +2.0 points chosen, +2.9 held out; summing the
    clip's scores instead of taking the best, or larger weights, let one clip crowd the first ranks."""
    if weight <= 0 or not ranked:
        return ranked
    best: dict[tuple[str, int], list[Ranked]] = {}
    for item in ranked[:window]:  # best first: a clip's first entry is its best, the second its runner-up
        found = best.setdefault((item.memory.video_id, item.memory.clip_index), [])
        if len(found) < 2:
            found.append(item)
    rescored = []
    for item in ranked:
        lenders = [r for r in best.get((item.memory.video_id, item.memory.clip_index), ()) if r is not item]
        bonus = weight * lenders[0].score if lenders else 0.0
        rescored.append(replace(item, score=item.score + bonus) if bonus else item)
    return sorted(rescored, key=lambda r: (-r.score, r.memory.id))


def closeness(start_s: float, end_s: float, moment: float) -> float:
    """1 for an interval within :data:`MOMENT_NEAR_S` of ``moment``, falling linearly to 0 at
    :data:`MOMENT_FADE_S` beyond that."""
    distance = max(0.0, start_s - moment, moment - end_s) - MOMENT_NEAR_S
    return 1.0 if distance <= 0 else max(0.0, 1.0 - distance / MOMENT_FADE_S)
