"""The pre-check of consolidation: which sentences could carry a lasting fact about someone.

Consolidation asks a language model for names, roles, relations, likes, habits
and places, and keeps a fact only when a source sentence states it
(:mod:`.consolidate_facts`). Most of a video's memories cannot: who is on
screen, a shot, a sound, an object, a line of on-screen text (nobody's
statement), and speech that states nothing about anyone ("Why didn't you do
it?", "if you were an effective senator"). The pre-check asks the same
question of every sentence before any call, with the checks' own vocabulary,
so it is exact where the checks are strict: a speech sentence *may state a fact*
(:func:`may_state`) when

- it is in the first person and carries a kind's cue (:data:`KIND_CUES`: "I was
  a senator", "I love", "we go there every week", "my wife") or a named place
  ("I'm in DC"), or
- it speaks to someone by name ("Thanks, Jack", "Good morning, doctor Lee",
  "Hey Mel!"), or the speaker gives their own name ("I'm Ann").

Every fact the checks keep from speech rests on such a sentence (they drop
the rest), so a unit without one is recorded as consolidated with a note and
costs no model call, and the prompt shows only these sentences. A
description that names someone and is not one of the perception senses' fixed
forms (a multimodal writer's "<face_1> pours coffee") is always shown: no cheap
rule judges free text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.memorize.speech_line import read_speech
from m3agent.text import self_names

if TYPE_CHECKING:
    from m3agent.domain import Memory

SENSE_PROVENANCE = ("scene-senses/", )
"""Provenance of memories that are nobody's statement (on-screen text, objects, sounds, shots)."""
FIXED_FORMS = re.compile(rf"^{tags.pattern()} is on screen |^Shot |^On screen ")
"""The perception writer's presence and scene forms: who is seen where, never what they are."""

FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'll", "i'd", "me", "my", "mine", "myself", "we", "we're", "we've",
                          "our", "ours", "us"})
SECOND_PERSON = frozenset({"you", "your", "you're", "yours", "yourself"})
_NEGATION = r"(?:not|never|n't|don't|dont|didn't|didnt|doesn't|doesnt|no)"
_LIKE_VERB = (r"(?:\b(?:i|i've|we|we've|they|they've|you|you've|he|she)|<[a-z]+_\d+>)"
              r"(?:\s+(?!" + _NEGATION + r"\b)[a-z']+){0,2}?\s+"
              r"(?<!feel )(?<!feels )(?<!felt )(?<!look )(?<!looks )(?<!sound )(?<!sounds )(?<!seem )(?<!seems )"
              r"(?<!'d )(?<!would )like[sd]?")
""""Like" as a verb of liking: after its subject, with at most two words between ("I like", "we all really
like", "I did like") and none of them a negation ("I don't like"); never "feel like", "looks like" (a
comparison) or "I'd like" (a wish). Without a subject before it, "like" is a preposition or a filler ("how to
do like someone", "it's like"), which states no liking."""
_CUE_WORDS = {
    "role": r"\b(?:i am|i'm|i was|i've been|i have been|i work|i worked|i used to be|as an?|as the|my job|my role"
            r"|am an?|was an?|is an?|are an?|were an?|we were|we are|we're|were both|are both|became|become"
            r"|serve|served|serving)\b",
    "likes": rf"(?:{_LIKE_VERB}|\b(?:(?<!n't )(?<!not )(?<!never )(?:love|loves|loved|loving|enjoy|enjoys"
             r"|enjoyed|prefer|prefers|preferred)|favou?rite|(?:'m|am|are|'re|was|were|really|so|totally|big) into"
             r"|fan of|fond of|passion|passionate))\b",
    "habit": r"\b(?:always|usually|often|every|each|daily|weekly|never|whenever|tend to|used to|regularly)\b",
    "relation": r"\b(?:wife|husband|son|daughter|mom|mother|dad|father|brother|sister|friend|friends|boss"
                r"|partner|colleague|married|boyfriend|girlfriend|kid|kids|child|children|family|cousin|uncle"
                r"|aunt|neighbou?r|coach|student|teacher|mentor)\b",
}
KIND_CUES = {kind: re.compile(cue) for kind, cue in _CUE_WORDS.items()}
"""What a sentence stating a fact of each kind also says (matched on the lower-cased sentence): a role is
stated ("I was a senator", "as a nurse"), a liking is a verb of liking, a habit a word of frequency, a
relation a word of kinship."""
NAMED_PLACE = re.compile(r"\b(?:in|at|from|into|near|around)\s+(?:the\s+)?[A-Z][A-Za-z]+")
"""A named place after a preposition of where ("in DC", "from New Jersey")."""
SENTENCE = re.compile(r"(?<=[.!?…])\s+")
"""Where a quote splits into sentences (after end punctuation and the space that follows)."""
_LOWER_WORD = re.compile(r"[a-z0-9']+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_VOCATIVE = re.compile(r"^\W*[A-Z][a-z]+,")
_NOT_PROPER_TEXT = """I I'm I've I'll I'd Oh Yeah Yes No Okay OK Ok Well So And But Or Because If When
What Why How Who Where Thank Thanks Please Hey Hi Hello Dude Man Sir Mr Mrs Ms God Lord Um Uh Wow Right Sure
Like Just However Now Then Also Actually Anyway Anyways Still Besides Meanwhile Indeed Honestly Finally First
Second Third Next Last Look Listen Alright Sorry Fine Great Good Nice Cool Hmm Ah Huh Absolutely Exactly
Obviously Basically Seriously Frankly Unfortunately Fortunately Instead Otherwise Therefore Thus Yet Again
Anyhow Nevertheless Nonetheless Furthermore Moreover Afterwards Later Today Tonight Tomorrow Yesterday Sometimes
Maybe Perhaps Probably Certainly Definitely Sometime Once Meaning Plus Except Unless Although Though While"""
_NOT_PROPER = frozenset(_NOT_PROPER_TEXT.split())
"""Capitalised words that open clauses or address nobody in particular: no name (a speech's "However, the two
straits ..." read as someone addressed as "However" named the next speaker so in a generated episode)."""


def speech_quote(memory: Memory) -> str | None:
    """The quoted words of a speech memory (without the captions of the same words), or ``None`` for any other
    memory."""
    line = read_speech(memory.text)
    return line.quote if line is not None else None


def sentences(quote: str) -> list[str]:
    """The sentences of a quote, as written (empty ones dropped)."""
    return [s for s in SENTENCE.split(quote) if s.strip()]


def may_state(sentence: str) -> bool:
    """Whether a spoken ``sentence`` could state a fact the checks keep (see the module docstring)."""
    if addresses_someone(sentence) or self_names(sentence):
        return True
    lowered = sentence.lower()
    if not first_person(lowered):
        return False
    return any(cue.search(lowered) for cue in KIND_CUES.values()) or NAMED_PLACE.search(sentence) is not None


def first_person(lowered: str) -> bool:
    """Whether a lower-cased sentence speaks in the first person."""
    return bool(set(_LOWER_WORD.findall(lowered)) & FIRST_PERSON)


_TITLE = r"(?:(?i:doctor|dr|mr|mrs|ms|miss|professor|sir|madam|coach|officer|captain|aunt|uncle)\.?\s+)?"
_GREETING = re.compile(r"\b(?i:hey|hi|hello|thanks|thank you|morning|good morning|evening|good evening|bye|dear"
                       r"|welcome|congratulations|congrats|sorry|okay|ok|yeah|oh|listen|look),?\s+" + _TITLE
                       + r"(?P<name>[A-Z][a-z]+)")
_CLOSING = re.compile(r",\s+" + _TITLE + r"(?P<name>[A-Z][a-z]+)\W*$")


def addressed_names(sentence: str) -> list[str]:
    """The names ``sentence`` speaks to someone by ("Jack, what's ...", "Hey Mel!", "Thanks, Ann.", "..., Jon?",
    "Good morning, doctor Lee"): the one named is the person spoken to, likely the next to speak."""
    words = _WORD.findall(sentence)
    found = [words[0]] if words and _VOCATIVE.match(sentence) else []
    found += [m.group("name") for m in (_GREETING.search(sentence), _CLOSING.search(sentence)) if m]
    return list(dict.fromkeys(name for name in found if _is_proper(name)))


def addresses_someone(sentence: str) -> bool:
    """Whether ``sentence`` speaks to someone by name (:func:`addressed_names`)."""
    return bool(addressed_names(sentence))


def _is_proper(word: str) -> bool:
    return len(word) > 1 and word[0].isupper() and word[1:].islower() and word not in _NOT_PROPER


def stating_sentences(memory: Memory) -> list[str]:
    """The sentences of ``memory`` that could state a fact: a speech memory's :func:`may_state` ones, a
    readable description whole, nothing of anything else."""
    if not readable(memory):
        return []
    quote = speech_quote(memory)
    return [memory.text] if quote is None else [s for s in sentences(quote) if may_state(s)]


def fact_bearing(memory: Memory) -> bool:
    """Whether ``memory`` could carry a lasting fact: a description it reads, or speech with a sentence that
    may state one."""
    return bool(stating_sentences(memory))


def worth_asking(memories: Iterable[Memory]) -> bool:
    """Whether any of ``memories`` is fact-bearing: a unit without one needs no model call."""
    return any(fact_bearing(m) for m in memories)


def readable(memory: Memory) -> bool:
    """Whether consolidation shows ``memory`` at all: speech and descriptions, not the senses' fixed forms."""
    if memory.provenance.startswith(SENSE_PROVENANCE):
        return False
    return speech_quote(memory) is not None or (bool(memory.entity_ids) and not FIXED_FORMS.match(memory.text))
