"""Questions that pin on one person what only other people's memories say.

"What did Caroline realize after her charity race?" when only Melanie ever spoke of a charity race: the
search, restricted to Caroline's memories, still returns some of hers, and a small model answers from
them. A question that names exactly one person and holds at least :data:`MIN_FOREIGN_WORDS` rare words
(found in at most :data:`MAX_RARE_HITS` memories the question may see) none of which occurs in that
person's memories is about something the memory does not attribute to them: the answer is an abstention.

Measured on LoCoMo with the conversations' own turns (bench/locomo_answer_modes.py, docs/benchmarks.md): two such
words fire on 15% of the adversarial questions (which swap the speaker) and on 1.8% of the answerable
ones; one word would fire on 40% and 15%.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from m3agent.control.retrieval.query import Intent, parse_query
from m3agent.control.retrieval.ranking import keyword_text
from m3agent.text import tokens

if TYPE_CHECKING:
    from m3agent.control.retrieval.search import MemorySearcher

MAX_RARE_HITS = 8
"""A word in more memories than this is common talk, not a detail of one event."""
MIN_FOREIGN_WORDS = 2
MIN_WORD_CHARS = 3


def foreign_words(searcher: MemorySearcher, question: str) -> tuple[str, ...]:
    """The rare words of ``question`` that only memories of people other than the one it names hold;
    empty unless the question names exactly one person and at least :data:`MIN_FOREIGN_WORDS` are found."""
    parsed = parse_query(question, searcher.index, None)
    if parsed.intent is not Intent.SEARCH or len(parsed.characters) != 1 or not parsed.entity_ids:
        return ()
    everyone = searcher.base_filter()
    theirs = replace(everyone, entity_ids=parsed.entity_ids)
    found = []
    for word in _words(keyword_text(parsed.text, drop=parsed.names)):
        hits = [h for h in searcher.store.keyword_search(word, MAX_RARE_HITS + 1, everyone)
                if searcher.visible(h.memory)]
        if not hits or len(hits) > MAX_RARE_HITS:
            continue
        if not any(searcher.visible(h.memory) for h in searcher.store.keyword_search(word, 3, theirs)):
            found.append(word)
    return tuple(found) if len(found) >= MIN_FOREIGN_WORDS else ()


def _words(text: str) -> list[str]:
    return list(dict.fromkeys(w.lower() for w in tokens(text) if w[0].isalpha() and len(w) >= MIN_WORD_CHARS))
