"""The cheap pre-check of consolidation: which episodic memories could carry a lasting fact about someone.

Consolidation asks a language model for names, roles, relations, likes, habits
and places. Most of a video's memories cannot hold one: who is on screen, a
shot, a sound, an object, a line of on-screen text (nobody's statement), and
speech without a cue ("Why didn't you do it?"). A unit of clips whose memories
hold no cue is recorded as consolidated with a note and costs no model call;
in the others only speech and descriptions are shown, so each call reads
fewer tokens.

A memory is *fact-bearing* when it is

- speech (``<tag> says: "..."``) with a cue: a first-person statement of being,
  doing, liking or planning ("I was a senator", "I'm in DC", "I love", "I'll"),
  "my ..." (my name, my wife, my job), a word of liking, kinship or habit ("favorite",
  "wife", "friend", "every morning"), or a proper noun: inside a sentence, or
  opening it before a comma (a name someone is called or a place: "Thanks, Jack",
  "Ann, your tea", "in New Jersey"); or
- a description that names someone and is not one of the perception senses'
  fixed forms (a multimodal writer's "<face_1> pours coffee"): it is kept, as
  no cheap rule judges free text.

The check is deliberately generous (a cue is a reason to ask, not a fact):
a missed cue loses a fact for good, an extra one only costs a call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from m3agent import tags

if TYPE_CHECKING:
    from m3agent.domain import Memory

SPEECH = re.compile(rf"^(?:At [0-9:.]+ )?(?P<tag>{tags.pattern()}) (?:says|said): (?P<quote>.*)$", re.DOTALL)
"""A speech memory: the perception writer's ``At 0:05 <voice_3> says: "..."`` (and LoCoMo's ``said:``)."""
SENSE_PROVENANCE = ("scene-senses/", )
"""Provenance of memories that are nobody's statement (on-screen text, objects, sounds, shots)."""
FIXED_FORMS = re.compile(rf"^{tags.pattern()} is on screen |^Shot |^On screen ")
"""The perception writer's presence and scene forms: who is seen where, never what they are."""

_FIRST_PERSON = (r"\b(?:i|we)(?:'m| am| was| were|'ve been| have been| had been|'d been| used to| work| worked"
                 r"| live| lived| grew up| come from| came from| moved| love| loved| like| liked| hate| enjoy"
                 r"| enjoyed| prefer| play| played| teach| study| studied| will|'ll| plan| want| wanna| hope"
                 r"| run| ran| own| started| became| got| met| married| have| had| always| never| usually)\b")
_MY = r"\b(?:my|mine|myself|call me)\b"
_WORDS = (r"\b(?:name|names|named|favou?rite|love|loves|hate|hates|prefer|prefers|wife|husband|son|daughter"
          r"|mom|mother|dad|father|brother|sister|friend|friends|boss|partner|boyfriend|girlfriend|kids"
          r"|children|family|job|work|works|lives|born|birthday|hometown|always|usually|often|every day"
          r"|every morning|every night|every week|each day)\b")
CUE = re.compile("|".join((_FIRST_PERSON, _MY, _WORDS)), re.IGNORECASE)
_SENTENCES = re.compile(r"[.!?…]+\s*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_VOCATIVE = re.compile(r"^\W*[A-Z][a-z]+,")
_NOT_PROPER_TEXT = """I I'm I've I'll I'd Oh Yeah Yes No Okay OK Ok Well So And But Or Because If When
What Why How Who Where Thank Thanks Please Hey Hi Hello Dude Man Sir Mr Mrs Ms God Lord Um Uh Wow Right Sure
Like Just"""
_NOT_PROPER = frozenset(_NOT_PROPER_TEXT.split())
"""Capitalised words that open clauses or address nobody in particular: no name."""


def speech_quote(memory: Memory) -> str | None:
    """The quoted words of a speech memory, or ``None`` for any other memory."""
    match = SPEECH.match(memory.text)
    return match.group("quote").strip().strip('"“”') if match else None


def fact_bearing(memory: Memory) -> bool:
    """Whether ``memory`` could carry a lasting fact (see the module docstring): a description it reads, or
    speech with a cue."""
    if not readable(memory):
        return False
    quote = speech_quote(memory)
    return quote is None or bool(CUE.search(quote)) or _has_proper_noun(quote)


def _has_proper_noun(quote: str) -> bool:
    """A capitalised word that does not open a sentence (ASR capitalises names and places)."""
    for sentence in _SENTENCES.split(quote):
        words = _WORD.findall(sentence)
        if words and _VOCATIVE.match(sentence) and _is_proper(words[0]):  # "Ann, your tea is here"
            return True
        if any(_is_proper(w) for w in words[1:]):  # the first word of a sentence is capitalised anyway
            return True
    return False


def _is_proper(word: str) -> bool:
    return len(word) > 1 and word[0].isupper() and word[1:].islower() and word not in _NOT_PROPER


def worth_asking(memories: Iterable[Memory]) -> bool:
    """Whether any of ``memories`` is fact-bearing: a unit without one needs no model call."""
    return any(fact_bearing(m) for m in memories)


def readable(memory: Memory) -> bool:
    """Whether consolidation shows ``memory`` at all: speech and descriptions, not the senses' fixed forms."""
    if memory.provenance.startswith(SENSE_PROVENANCE):
        return False
    return speech_quote(memory) is not None or (bool(memory.entity_ids) and not FIXED_FORMS.match(memory.text))
