"""One reading of the question: built once, read by every module of control instead of the question's text.

:func:`read_question` turns a question into a frozen :class:`QuestionReading`: what it asks (who / what / when /
where / how many / yes-no / which), the clock times it names, its quotations, the scene it points at (the first
or the last), whether it bounds itself by "so far" or asks about order, the time of an appearance it counts ("the
second time") and what the person it describes wears (glasses, the colour of their clothes). The model's plan
(:mod:`m3agent.control.people.plan`) is checked against this value, the graph's facts
(:mod:`m3agent.control.people.graph_facts`) are anchored by it and the reranker and the answerer read
who-questions from it: one definition of each reading, not one per module.

The reading is lexical and deliberately small: words are matched as whole tokens against the phrase tables
below (data, one table per meaning, each covered by the table-driven tests in ``tests/test_control_reading.py``),
never by patterns written for one question. Clock times and quotations are the only patterns it reads.
"""

from __future__ import annotations

import enum
import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from m3agent.graph.fits import clothes_named
from m3agent.graph.references import Place, Wears
from m3agent.graph.scenes import names_scene, person_kind, shown_by
from m3agent.text import STOPWORDS, clock_seconds, clock_times, words


class Asks(enum.StrEnum):
    """The kind of answer a question asks for, from its first question word."""

    WHO = "who"
    WHAT = "what"
    WHICH = "which"
    WHEN = "when"
    WHERE = "where"
    HOW_MANY = "how_many"
    YES_NO = "yes_no"
    WHY = "why"
    """A reason ("why does she say she could not?"): answered from what was said and done, never the words alone."""
    OTHER = "other"


class Scene(enum.StrEnum):
    """A scene the question names by its place in the video."""

    ANY = "any"
    FIRST = "first"
    LAST = "last"


Phrase = tuple[str, ...]

_ASKS: tuple[tuple[Phrase, Asks], ...] = (
    (("how", "many"), Asks.HOW_MANY), (("how", "often"), Asks.HOW_MANY), (("how", "much"), Asks.HOW_MANY),
    (("how",), Asks.OTHER),
    (("what", "time"), Asks.WHEN), (("who",), Asks.WHO), (("whom",), Asks.WHO), (("whose",), Asks.WHO),
    (("when",), Asks.WHEN), (("where",), Asks.WHERE), (("which",), Asks.WHICH), (("what",), Asks.WHAT),
    (("why",), Asks.WHY), (("whether",), Asks.YES_NO),
)  # fmt: skip
"""Question words, longest first at each start; the first one in the question decides ("whether" opens an
embedded yes-or-no question: "I wonder whether she spoke"; "why does she ..." asks for a reason, not yes or
no)."""
_ASKING_IF = frozenset({"wonder", "wondering", "know", "out", "check", "checking", "see", "ask", "asking", "sure",
                        "confirm", "remember", "recall", "tell", "me", "us", "curious", "unsure", "doubt"})
"""Words after which "if" opens an embedded yes-or-no question, as "whether" does ("I'm trying to figure out if she
spoke", "let me know if", "not sure if"); elsewhere "if" is a condition ("if so, when?") and decides nothing."""
_COUNTING: tuple[Phrase, ...] = (("number", "of"), ("count", "the"), ("count", "how"), ("count", "of"),
                                  ("head", "count"), ("headcount",), ("tally", "up"), ("tally", "the"))
"""Words that ask for a count as "how many" does ("the number of times the screen went dark", "count the people
at 0:40", "what's the head count at 1:05?"); not question words, so not words of asking elsewhere ("the photo of a
couple")."""
_REQUESTS = frozenset({"tell", "give", "describe", "say", "show", "remind", "let", "know", "remember", "recall",
                       "explain", "list", "name", "summarise", "summarize", "help", "quote", "repeat", "finish",
                       "complete", "transcribe"})
"""Verbs that turn "could you ... me" into a request whose embedded question is the one asked ("Could you tell me
what the video ends on?" asks what, not yes or no)."""
_PLACE_WORDS: dict[str, Place] = {"left": "left", "right": "right", "centre": "centre", "center": "centre",
                                   "middle": "centre", "foreground": "foreground", "background": "background"}
_PLACE_NOUNS = frozenset({"person", "one", "man", "woman", "guy", "lady", "side", "half", "speaker", "figure",
                          "part", "hand", "individual", "people", "panel", "participant"})
"""Words after a place word that make it a place in the picture ("the right person", "the left side")."""


def _placing(tokens: Phrase, at: int) -> bool:
    """Whether the place word at ``at`` places someone in the picture: after "on / to / at / in the" ("on the
    right"), or before a word for a person or a part of the frame ("the left one", "right-hand side"); "foreground"
    and "background" always do."""
    word, after = tokens[at], tokens[at + 1: at + 4]
    if after[:1] == ("of",) and _IN_TIME & set(after):  # "the middle of the video": a time
        return False
    if word in ("foreground", "background"):
        return True
    before = tokens[max(0, at - 2): at]
    offered = (after[:1] in (("or",), ("and",)) and any(w in _PLACE_WORDS for w in after[1:])) \
        or (at > 1 and tokens[at - 1] in ("or", "and") and tokens[at - 2] in _PLACE_WORDS) \
        or (at > 2 and tokens[at - 2: at] in (("or", "the"), ("and", "the")) and tokens[at - 3] in _PLACE_WORDS)
    return offered or before in (("on", "the"), ("to", "the"), ("at", "the"), ("in", "the")) \
        or (before[-1:] == ("the",) and after[:1] != () and after[0] in _PLACE_NOUNS) or after[:1] == ("side",)


_IN_TIME = frozenset({"video", "clip", "recording", "footage", "episode", "talk", "conversation", "speech"})


_POLITE = frozenset({"please", "kindly", "just", "possibly"})
"""Words of politeness, which ask nothing ("could you please give me ...", "can you just tell me ...")."""
_ASKING_VERBS = _REQUESTS | {"read"}
"""Verbs that make "could you ..." a request: the requests and "read" ("can you read back the line at 1:05?"), which
stays a word of what is asked about elsewhere ("what books has she read?")."""
_GUIDING = frozenset({"walk", "run", "take", "talk", "go"})
"""Verbs of a request with "me through" ("can you walk me through what's shown at 0:44?"), asking what it embeds;
without it they ask yes or no ("can you walk?")."""
_AUXILIARIES = frozenset({"is", "are", "was", "were", "am", "do", "does", "did", "has", "have", "had", "can", "could",
                          "will", "would", "should", "shall", "may", "might", "must"})
"""A question opening with one of these asks yes or no, whatever question word follows."""
_SUBJECTS = frozenset({"it", "there", "the", "this", "that", "these", "those", "he", "she", "they", "we", "i", "a",
                       "an", "any", "anyone", "anybody", "someone", "somebody", "his", "her", "their", "you"})
"""Words that open the subject after an auxiliary: "hey, at 0:26, is it the man who's talking?" turns into a yes/no
question where "is it" stands, before its "who" (a relative word there, not a question word)."""
_NOT_DESCRIBING = STOPWORDS | {"i", "we", "you"}
"""Words that cannot open a description: a stopword or the one asking ("I'm at 1:33 - have I seen the debate?")."""
_PERSON_WORDS = frozenset({"who", "whom", "whose"})
_SCENE_NOUNS = ("scene", "shot", "part", "clip", "segment", "section", "sequence", "frame", "frames", "moment",
                "bit")
"""What a part of the video is called when it is named by its place ("the opening clip", "the final shot")."""
_THING_SHOWN = ("shown", "seen", "on", "in", "you", "we", "visible", "displayed")
"""Words after "the first / last thing" that make it a thing shown ("the last thing shown", "the first thing you
see"), not a thing said ("the last thing said")."""
_FIRST_WORDS = ("first", "opening", "very first", "initial", "starting")
_LAST_WORDS = ("last", "final", "closing", "ending", "very last", "concluding")
_FIRST_SCENE: tuple[Phrase, ...] = tuple(
    tuple(f"{word} {noun}".split()) for word in _FIRST_WORDS for noun in _SCENE_NOUNS) + tuple(
    tuple(f"{word} thing {shown}".split()) for word in _FIRST_WORDS for shown in _THING_SHOWN) + tuple(
    tuple(p.split()) for p in ("at the start", "at the very start", "at the beginning", "at the very beginning",
                               "video open", "video opens", "video begin", "video begins", "video start",
                               "video starts", "beginning of the video", "start of the video",
                               "opening of the video", "beginning of the clip", "start of the clip",
                               "opens the video", "begins the video", "starts the video", "opens the clip",
                               "begins the clip", "starts the clip"))
_LAST_SCENE: tuple[Phrase, ...] = tuple(
    tuple(f"{word} {noun}".split()) for word in _LAST_WORDS for noun in _SCENE_NOUNS) + tuple(
    tuple(f"{word} thing {shown}".split()) for word in _LAST_WORDS for shown in _THING_SHOWN) + tuple(
    tuple(p.split()) for p in ("at the end", "at the very end", "video end", "video ends", "video finish",
                               "video finishes", "video close", "video closes", "video wrap", "video wraps",
                               "end of the video", "ending of the video", "close of the video", "end of the clip",
                               "ending of the clip", "closes the video", "ends the video", "finishes the video",
                               "closes the clip", "ends the clip", "finishes the clip", "to a close", "to an end"))
"""The first or the last scene, named by an ordinal word and a word for a part of the video ("the last thing
shown"), or by the video's start or end ("as the video draws to a close")."""
_RECORDING = frozenset({"video", "clip", "footage", "film", "recording", "it"})
"""What a question calls the whole recording when it says it starts or ends ("when the footage starts rolling",
"right before it ends")."""
_STARTS = frozenset({"open", "opens", "opened", "begin", "begins", "began", "start", "starts", "started", "kick",
                     "kicks", "kicked"})
_ENDS = frozenset({"end", "ends", "ended", "finish", "finishes", "finished", "close", "closes", "closed", "wrap",
                   "wraps", "wrapped", "stop", "stops", "stopped"})
_SO_FAR: tuple[Phrase, ...] = (("so", "far"), ("up", "to"), ("until",), ("till",), ("as", "of"),
                                *(("from", "the", start, "to") for start in ("start", "beginning", "outset")))
"""Bounds that count from the start up to a time ("how many people so far at 1:20", "up to 0:38", "as of 2:00",
"from the start to 1:05")."""
_BY_WHEN: tuple[Phrase, ...] = tuple(("by", *p.split()) for p in ("the time", "this point", "that point", "then",
                                                                    "now"))
"""Bounds by a "by" with no clock time after it ("by the time the video reaches 1:34", "by this point"); "by" before
anything else names who does something ("spoken by the woman in the photo")."""
_ANY_TIME: tuple[Phrase, ...] = tuple(tuple(p.split()) for p in ("at all", "at any point", "at any time",
                                                                    "at some point", "at any stage", "at any moment"))
"""Words that leave the time open up to a bound ("has it appeared at any point up to 1:17?")."""
_IF_EVER: Phrase = ("if", "ever")
"""A "when" that allows never ("when, if ever, is she seen again?"): it asks whether, then when."""
_IF_SO_WHAT: Phrase = ("if", "so", "what")
"""A yes/no question that goes on to ask what ("was the talk about anything in particular? if so, what?")."""
_BOUND_WORDS = frozenset({w for phrase in (*_SO_FAR, *_BY_WHEN) for w in phrase}
                         | {"mark", "point", "reach", "reaches", "reached", "yet", "already", "been"})
"""The words of a so-far bound ("by the 0:44 mark"), none of what the question describes."""
_LEADING_UP: tuple[Phrase, ...] = (
    *((verb, "up", "to") for verb in ("lead", "leads", "leading", "led", "run", "runs", "running", "ran")),
    *((verb, "into") for verb in ("lead", "leads", "leading", "led")),
    ("ahead", "of"))
"""What comes just before ("the segment leading up to the one at 0:57", "the scene that leads into the one at 1:05",
"the scene just ahead of the one at 1:53"): an order looking back, not a bound."""
_GOING_ON: tuple[Phrase, ...] = (
    *((verb, "to") for verb in ("cut", "cuts", "switch", "switches", "transition", "transitions")),
    *((verb, "on", "to") for verb in ("move", "moves", "go", "goes")))
"""What comes next ("what does the video cut to at the end of the segment at 0:45?", "what it moves on to"): an
order looking forward."""
_ENDED = frozenset({"over", "ends", "ended", "finishes", "finished", "done", "wraps", "closes", "closed", "stops",
                    "stopped"})
"""Words that say a part is over, which a "once" before them turns into what comes after it ("once the segment at
0:45 is over"); "once" with no such word is a count ("shown once")."""
_ORDER_WORDS = frozenset({"after", "before", "next", "previous", "then", "follow", "follows", "following", "followed",
                          "precede", "precedes", "preceding", "preceded", "prior"})
_LATER = frozenset({"after", "later", "next", "following", "follow", "follows", "followed", "afterwards", "afterward",
                    "further", "subsequently", "thereafter"})
_EARLIER = frozenset({"before", "earlier", "first", "precede", "precedes", "preceding", "preceded", "prior",
                      "previous"})
"""Which way a yes/no order question asks: "is A shown after B?" against "does A come before / earlier than B?"."""
_ORDER_POINTS = ("time", "point", "stage", "moment")
_ORDER_JOINTS: tuple[Phrase, ...] = (
    *(tuple(p.split()) for p in ("before or after", "after or before", "prior to")),
    *(tuple(f"at {article} {word} {point} than".split()) for article, word in (("an", "earlier"), ("a", "later"))
      for point in _ORDER_POINTS),
    *(tuple(f"{word} {point} than".split()) for word in ("earlier", "later") for point in _ORDER_POINTS),
    *(tuple(f"{word} {filler} than".split()) for word in ("earlier", "later")
      for filler in ("in the video", "in the clip", "on", "on in the video")),
    *(tuple(p.split()) for p in ("earlier than", "later than", "ahead of", "preceded by", "followed by", "before",
                                 "after")))
"""Words that set two things in order ("is A shown before B?", "A prior to B?", "does A appear at an earlier point
than B?", "does A come earlier in the video than B?", "is A preceded by B?"), longest first."""
_ORDER_VERBS: tuple[Phrase, ...] = (("precedes",), ("precede",), ("follows",), ("follow",))
"""Verbs that set two described things in order ("tell me whether A precedes B"); next to a clock time or a
quotation they step from a moment ("the segment that follows the one at 1:05"), which is no pair."""
_PASSIVE_ORDER: tuple[tuple[Phrase, str], ...] = ((("preceded", "by"), "after"), (("followed", "by"), "before"))
"""Order in the passive, which names the later thing first: "is A preceded by B?" asks whether A comes after B,
"is A followed by B?" whether it comes before."""
_ALTERNATIVES: tuple[Phrase, ...] = tuple(tuple(p.split()) for p in (
    "or is it the other way around", "or is it the other way round", "or the other way around",
    "or the other way round", "or is it the reverse", "or the reverse", "or vice versa", "or not", "yes or no"))
"""Words that offer the other answer ("does A come after B, or is it the other way around?"): of asking, not of
what the question sets in order."""
_CLAUSE_MARKS = (":", ";", " - ", "–", "—", "?", "!", ". ")
"""Marks that end a clause ("I can't recall the order - did the video show A before B?")."""
_SHOWING = frozenset({"video", "clip", "footage", "show", "shows", "showed", "shown", "see", "seen", "saw", "appear",
                      "appears", "appeared", "come", "comes", "came", "order", "check", "sequence"})
"""Words of showing and of asking the order, not of what is shown (:attr:`QuestionReading.order_pair`)."""
_AGAIN = frozenset({"again", "back", "return", "returns", "returned", "reappear", "reappears", "reappeared",
                    "recur", "recurs", "recurring", "another", "anymore", "still"})
"""Words asking whether someone is seen or heard once more ("does she come back?", "seen again later?")."""
_READ_BACK: tuple[Phrase, ...] = tuple((verb, "back") for verb in ("read", "play", "say", "repeat", "quote"))
"""A "back" of repeating words, not of returning ("can you read back the line at 1:05?")."""
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
_EYEWEAR = frozenset({"glasses", "eyeglasses", "spectacles"})
_DISTINCT = frozenset({"different", "distinct", "unique", "repeats"})  # "not counting repeats": each one once
_CHARACTER_OF: tuple[Phrase, ...] = (("which", "character"), ("what", "character"), ("character", "id"),
                                     ("character", "tag"), ("character", "number"), ("which", "face", "is"),
                                     ("which", "voice", "is"), ("which", "person", "is"))
"""Questions asking for the character behind a name or a description ("which character is Alice?")."""
_WORDS_SAID = frozenset({"said", "say", "says", "saying", "spoken", "speaks", "words", "line", "lines", "sentence",
                        "sentences", "utter", "utters", "uttered", "uttering", "quote", "verbatim", "exact"})
"""Words asking for what was said word for word ("what is said at 1:20", "the line at 0:40"), not for its gist."""
_GIST = frozenset({"about", "topic", "topics", "subject", "discuss", "discussed", "discussing", "discussion",
                   "summarise", "summarize", "summary", "gist", "theme", "themes", "cover", "covers", "covered",
                   "concerning", "regarding", "concern", "concerns", "concerned", "focus", "focuses", "focused",
                   "focusing", "issue", "issues", "message", "substance", "centered", "centred", "revolve",
                   "revolves", "paraphrase"})
"""Words asking what speech is about: a summary, not the words."""
_GIST_FRAMING = frozenset({"main", "mainly", "overall", "general", "generally", "broad", "broadly", "rough", "roughly",
                          "brief", "briefly", "basically", "essentially", "mostly", "idea", "point", "nutshell",
                          "particular", "specific"})
"""Words of how a summary is asked ("the main idea", "roughly", "in a nutshell"): words of asking, so not what a
description is about; not gist words alone ("at this point", "any idea who speaks?")."""
_TALK = frozenset({"talk", "talks", "talked", "talking", "speech", "speeches", "conversation", "discussion", "discuss",
                   "discussed", "discussing", "speaker", "speakers", "speaking", "say", "says", "saying", "said",
                   "chat", "chatting", "dialogue", "interview", "lecture", "monologue", "remarks", "spoken",
                   "narration", "narrator", "narrating", "audio"})
"""Words naming speech, so that a gist question is about what is said ("what is the talk about at 1:20?"), not
about what is shown."""
_GIST_PHRASES: tuple[Phrase, ...] = (
    *((verb, "up") for verb in ("sum", "sums", "summed", "summing")),
    *(("main", noun) for noun in ("idea", "point", "thing")), ("general", "idea"), ("rough", "idea"),
    ("overall", "point"), ("the", "point", "of"), ("deal", "with"), ("deals", "with"), ("dealing", "with"))
"""Phrases asking what speech is about whose words alone do not ("sum up the talking in the interview", "the main
idea of the talk", "the point of the remarks", "what do the words deal with?")."""
_TALK_PHRASES: tuple[Phrase, ...] = (("on", "about"),)
"""Phrases naming speech whose words alone do not ("what is he going on about?", "what are they on about?")."""
_VOICE = frozenset({"voice", "voices", "spoken", "heard", "words"})
"""Words of what is heard: with a person described, whether that person is the one heard ("are the words heard at
1:00 spoken by the woman in the photo?", "are the words coming from her?")."""
_HEARD = frozenset({"hear", "hearing", "listen", "listening", "line", "lines", "debate", "debates", "address",
                    "announcement", "sermon", "podcast", "broadcast", "performance", "song", "rap", "meeting",
                    "presentation"})
"""Words of hearing, or of events made of speech, which beside :data:`_VOICE` and :data:`_TALK` say that a gist
question is about what is heard ("the topic of what we hear at 1:05", "what topic does the debate cover?"); not
words of asking, so a description keeps them ("the split-screen debate")."""
_SEEING = frozenset({"see", "sees", "seen", "saw", "visible", "appear", "appears", "appeared", "show", "shows",
                     "shown", "camera", "screen"})
"""Words of being seen ("anyone you see", "does she appear", "on camera")."""
_ANY_ONE = frozenset({"anyone", "anybody", "someone", "somebody", "ever", "anywhere", "somewhere", "among"})
"""Words that leave who or when open ("is the speaker anyone we see?", "ever on camera", "anywhere in the video",
"among the people who appear")."""
_ON_SCREEN = frozenset({"on", "screen", "shown", "showing", "visible", "see", "seen", "happening", "happens",
                        "going", "picture", "frame", "display", "displayed", "view"})
"""Words asking what the picture holds ("what's on screen at 0:51?", "what is shown at 1:20?", "what do we see?")."""
_CONTINUES = frozenset({"end", "ends", "ending", "finish", "finishes", "complete", "completes", "rest", "continue",
                        "continues", "continuing", "wrap", "wraps", "conclude", "concludes"})
"""Words asking how a quoted line goes on ("how does the sentence end?", "finish the line")."""
_REMAINING = frozenset({"remaining", "remainder"})
"""Words asking for the rest of a quoted line as :data:`_CONTINUES` do ("what are the remaining words?"), but also
words of what a question is about ("the remaining money"), so not words of asking."""
_SEXES = {"male": "man", "female": "woman"}
"""Words of the two sexes beside the kinds of people (:func:`~m3agent.graph.scenes.person_kind`), for a question
that offers both ("a man or a woman?", "male or female?", "a man's or a woman's?")."""
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')
_FORM_WORDS = frozenset(w for phrase, _ in _ASKS for w in phrase) | _AUXILIARIES | _REQUESTS | _WORDS_SAID | _GIST \
    | _TALK | _CONTINUES | _GIST_FRAMING | _POLITE \
    | frozenset({"hear", "heard", "hearing", "me", "us", "we", "you", "get", "gets", "goes", "go", "going", "being",
                 "there", "content", "course", "recall", "during", "over", "throughout", "while", "whilst", "hey",
                 "so", "made", "delivered", "accompanying"})
"""Words of how a question asks, not of what it asks about (:attr:`QuestionReading.description`)."""
_NAMING_FORM_WORDS = _FORM_WORDS - _TALK
"""The words of asking left out of the two things an order question names: a word for speech there names the
scene ("the split-screen TV interview", "the woman with glasses talking indoors")."""


@dataclass(frozen=True, slots=True)
class QuestionReading:
    """What a question says about its answer, read once (see the module docstring).

    ``words`` are the lower-cased tokens; ``times`` the clock times in seconds in the order written; ``quotes``
    the text inside double quotation marks; ``occurrence`` which appearance the question counts (1: the first or
    unsaid, -1: the last); ``wears`` ``"glasses"`` or ``"any"``; ``dressed`` the colour of the clothes the person
    it describes wears ("a dark suit": ``"dark"``; ``"any"`` unsaid).
    """

    text: str
    words: tuple[str, ...]
    asks: Asks
    times: tuple[float, ...]
    quotes: tuple[str, ...]
    scene: Scene
    so_far: bool
    order: bool
    occurrence: int
    wears: Wears
    asks_character: bool
    distinct: bool
    """It counts different ones ("how many different photos"), not times shown."""
    dressed: str = "any"

    @property
    def asks_person(self) -> bool:
        """Whether a person is asked for anywhere in the question ("who", "whom", "whose")."""
        return any(w in _PERSON_WORDS for w in _uncontracted(list(self.words)))

    @property
    def moment(self) -> float | None:
        """The one instant the question asks about ("at 1:20", "around 0:40"): a single clock time that bounds
        nothing ("so far") and is not the neighbour of what is asked ("right before 1:20"); else None."""
        return self.times[0] if len(self.times) == 1 and not self.so_far and not self.order else None

    @property
    def asks_words(self) -> bool:
        """Whether the question asks for the words said (a line, what someone says), not their gist, a speaker or
        what follows a quotation."""
        which_said = self.asks is Asks.WHICH and _after(self.words, "which") in _WORDS_SAID  # "which line is heard"
        return (self.asks in (Asks.WHAT, Asks.OTHER) or which_said) and not self.quotes \
            and bool(_WORDS_SAID & set(self.words)) and not _GIST & set(self.words)

    @property
    def names_talk(self) -> bool:
        """Whether the question speaks of talking or a speaker ("is she the one doing the talking?", "what are they
        going on about?")."""
        return bool(_TALK & set(self.words)) or _has_any(self.words, _TALK_PHRASES)

    @property
    def places(self) -> frozenset[Place]:
        """The places in the picture the question puts someone at ("the person on the right", "the left one", "in
        the background"; "left or right?" names two); "right" of time ("right after") or of being correct is none."""
        return frozenset(_PLACE_WORDS[w] for i, w in enumerate(self.words)
                         if w in _PLACE_WORDS and _placing(self.words, i))

    @property
    def place(self) -> Place | None:
        """The one place of :attr:`places`, or None when the question names none or several."""
        return next(iter(self.places)) if len(self.places) == 1 else None

    @property
    def offers_places(self) -> bool:
        """Whether the question offers two or more places to choose from ("the left panel or the right panel?")."""
        return len(self.places) > 1

    @property
    def names_voice(self) -> bool:
        """Whether the question speaks of talking or of a voice ("is the voice we hear coming from her?")."""
        return self.names_talk or bool(_VOICE & set(self.words))

    @property
    def asks_whether(self) -> bool:
        """Whether the question asks if something happened: a yes/no question, or a "when" question that allows
        it never did ("when, if ever, do we hear that speaker before 1:22?": whether, and when)."""
        return self.asks is Asks.YES_NO or (self.asks is Asks.WHEN and has_phrase(self.words, _IF_EVER))

    @property
    def asks_ever_seen(self) -> bool:
        """Whether a yes/no question asks if someone is seen anywhere at all ("is the speaker at 0:05 anyone you
        see in the video?", "does the voice at 1:17 ever show up on camera?"): a word of seeing and a word of any
        time or anyone, none of returning."""
        held = set(self.words)
        return self.asks_whether and bool(_SEEING & held) and bool(_ANY_ONE & held) and not self.asks_again

    @property
    def asks_gist(self) -> bool:
        """Whether the question asks what the speech is about ("what is the talk about at 1:20?", "what are they
        discussing?", "which subject does the speaker address?"): a gist word or phrase and a word for speech or
        hearing, no quotation."""
        which_gist = self.asks is Asks.WHICH and _after(self.words, "which") in _GIST  # "which subject ..."
        then_what = self.asks is Asks.YES_NO and has_phrase(self.words, _IF_SO_WHAT)  # "was it about X? if so, what?"
        heard = self.names_voice or bool(_HEARD & set(self.words))
        return (self.asks in (Asks.WHAT, Asks.OTHER) or which_gist or then_what) and not self.quotes and heard \
            and (bool(_GIST & set(self.words)) or _has_any(self.words, _GIST_PHRASES))

    @property
    def asks_sex(self) -> bool:
        """Whether the question offers both sexes as its answers ("a man or a woman?", "male or female?"): with a
        word of voice or talk, it asks what the voice sounds like ("is it a man or a woman talking at 1:02?")."""
        tokens = self.words
        for i, word in enumerate(tokens[1:-1], 1):
            if word != "or" or (before := _sex(tokens[i - 1])) is None:
                continue
            following = tokens[i + 2] if tokens[i + 1] in _INDEFINITE and i + 2 < len(tokens) else tokens[i + 1]
            if _sex(following) not in (None, before):
                return True
        return False

    @property
    def asks_still_or_live(self) -> bool:
        """Whether the question offers a still picture and live video as its answers ("a photo or video?", "is the
        image moving or frozen?"): an "or" with a word of one kind of picture within two words before it and of
        the other within three after ("shown before or after the video" offers two times)."""
        tokens = self.words
        for i, word in enumerate(tokens):
            if word != "or":
                continue
            before = {shown_by(w) for w in tokens[max(0, i - 2): i]} - {None}
            after = {shown_by(w) for w in tokens[i + 1: i + 4]} - {None}
            if before | after == {"still", "live"} and before and after and before != after:
                return True
        return False

    @property
    def asks_shown(self) -> bool:
        """Whether the question asks only what the picture holds at its moment ("What's on screen at 0:51?", "What
        is shown at 1:20?"): a "what" question of one moment with a word of showing, no talk, no quotation and no
        word of what is shown (not "what colour is shown", not "who")."""
        if self.asks not in (Asks.WHAT, Asks.OTHER) or self.moment is None or self.quotes or self.names_talk:
            return False
        held = _uncontracted(list(self.words))
        return bool(_ON_SCREEN & set(held)) and not _describing(tuple(w for w in held if w not in _ON_SCREEN))

    @property
    def asks_continuation(self) -> bool:
        """Whether the question asks for the words that follow its quotation ("what is said right after "…"?",
        "how does the sentence end?"), not for who says it or what is shown next."""
        if not self.quotes or self.asks in (Asks.WHO, Asks.WHEN, Asks.WHERE, Asks.HOW_MANY, Asks.YES_NO, Asks.WHY):
            return False
        held = set(self.words)
        return bool((_CONTINUES | _REMAINING) & held) \
            or (self.order and bool(_WORDS_SAID & set(self._asked_of_quote())))

    def _asked_of_quote(self) -> Phrase:
        """The question's words outside its first quotation and the anchor that leads to it: from the last order
        word before the quotation up to it ("What happens right after someone says "…"?" -> "what happens
        right": the saying there introduces the quotation, it is not what is asked; "What is said right after
        "…"?" -> "what is said right")."""
        found = _QUOTED.search(self.text)
        if found is None:
            return self.words
        before, after = tuple(words(self.text[:found.start()])), tuple(words(self.text[found.end():]))
        anchor = max((i for i, w in enumerate(before) if w in _ORDER_WORDS), default=len(before))
        return before[:anchor] + after

    @property
    def asks_later(self) -> bool:
        """Whether a yes/no question of order asks if the first thing it names comes *later* ("is A shown after
        B?"); False for "before" / "earlier" and when both ways are written (a description may hold one: "a red
        tie before a flag"), so the usual reading, "does A come first?", stands."""
        held = self._order_words()
        return bool(_LATER & held) and not _EARLIER & held

    @property
    def names_return(self) -> bool:
        """Whether the question has a word of someone seen or heard once more ("again", "come back", "reappear"),
        not the "back" of repeating words ("read back the line")."""
        held = set(self.words) - ({"back"} if _has_any(self.words, _READ_BACK) else set())
        return bool(_AGAIN & held)

    @property
    def asks_again(self) -> bool:
        """Whether the question asks about another time someone is seen or heard: a word of returning or an order
        word ("is she seen again?", "does he come back?", "had we heard them before?"), not the "before" of a bound
        ("before the 1:18 mark, had the video shown the close-up?")."""
        return self.order or self.names_return or bool((_LATER | _EARLIER) & set(self._unbounded()))

    def _unbounded(self) -> Phrase:
        """The words without a "before" that bounds the question's one clock time from the start (a yes/no or
        how-many question, :func:`_without_bound_before`); a time written twice ("before 1:05, had the speaker at
        1:05 been heard?") is a moment looked back from, and keeps it."""
        if self.so_far and len(self.times) == 1 and self.asks in (Asks.YES_NO, Asks.HOW_MANY):
            return _without_bound_before(self.words)
        return self.words

    @property
    def asks_earlier(self) -> bool:
        """Whether the question looks back from its moment ("had we heard them before?", "earlier"), and not
        forward too."""
        held = self._order_words()
        return bool(_EARLIER & held) and not _LATER & held

    @property
    def again_way(self) -> Literal["after", "before"] | None:
        """Which way in time a question of seeing someone again looks: ``"after"`` ("does she reappear at any later
        point?"), ``"before"`` ("had we heard that voice earlier?"), or None when it says neither or both. "first"
        counts for neither ("the man first seen at 0:10": when he is, not which way the question looks)."""
        held = self._order_words() - {"first"}
        later, earlier = bool(_LATER & held), bool(_EARLIER & held)
        return None if later == earlier else "after" if later else "before"

    def _order_words(self) -> set[str]:
        """The question's words, without a "next" that means beside ("the man next to the door"), with "before"
        for a phrase that looks back ("leading up to")."""
        held = set(self._unbounded())
        if has_phrase(self.words, ("next", "to")):
            held.discard("next")
        if _has_any(self.words, _LEADING_UP):
            held.add("before")
        if _looks_on(self.words):
            held.add("after")
        for phrase, way in _PASSIVE_ORDER:
            if has_phrase(self.words, phrase):
                held = (held - {phrase[0]}) | {way}
        return held

    @property
    def order_pair(self) -> tuple[str, str] | None:
        """The two things a question sets in order, as it describes them ("is A shown before B?", "order check: A
        prior to B?"): the words on each side of the one order joint of a clause, without the words of asking and
        of showing; None when no clause holds exactly one joint with such words on both sides."""
        text = _QUOTED.sub(" ", self.text)
        for mark in _CLAUSE_MARKS:
            text = text.replace(mark, "|")
        phrases = _ORDER_JOINTS if self.times or self.quotes else (*_ORDER_JOINTS, *_ORDER_VERBS)
        for clause in text.split("|"):
            tokens = _without(_located(tuple(words(clause))), _ALTERNATIVES)
            joints = _found(tokens, phrases)
            if len(joints) != 1:
                continue
            at, length = joints[0]
            left = _describing(tokens[_question_proper(tokens[:at]):at], _NAMING_FORM_WORDS)
            right = _describing(tokens[at + length:], _NAMING_FORM_WORDS)
            if left and right:
                return left, right
        return None

    @property
    def asked_subject(self) -> str:
        """What a yes/no question asks of when a lead-in names things first ("Between A and B, does B come up
        first?" -> "B up first"): the describing words after the auxiliary that opens the question proper, up to
        an order joint ("... - did the video show A prior to B?" -> "the video show A"); empty when the question
        has no lead-in (then its subject is the first thing it names) or asks no yes/no."""
        at = _question_proper(self.words)
        if self.asks is not Asks.YES_NO or not at:
            return ""
        rest = self.words[at + 1:]
        joints = _found(rest, _ORDER_JOINTS)
        return _describing(rest[:joints[0][0]] if joints else rest, _NAMING_FORM_WORDS)

    @property
    def anchored(self) -> bool:
        """Whether the question pins a moment: a clock time or the first / last scene."""
        return bool(self.times) or self.scene is not Scene.ANY

    @property
    def description(self) -> str:
        """The question's words that say what it is about, not how it asks: without question words,
        auxiliaries, requests and the words for speech, its gist or its wording ("What is said during the
        split-screen debate?" -> "the split screen debate"); empty when the question orders or times
        what it asks (the scene it names is then a neighbour or a bound, not the window asked about)."""
        if self.times or self.order or self.quotes:
            return ""
        return " ".join(w for w in _uncontracted(list(self.words)) if w not in _FORM_WORDS)

    @property
    def described(self) -> str:
        """The words that describe what the question asks about, its moment's words left out ("At 1:00, is the voice
        coming from the woman in the photo?" -> "at the voice coming from the woman in the photo")."""
        return _describing(self.words)

    @property
    def bounded_description(self) -> str:
        """What a question bounded "so far" describes, without its bound ("by the 0:44 mark, how many stretches
        where the screen is dark?" -> "stretches where the screen dark") and the words before its first that can
        describe ("I'm at 1:33 in the video - have I seen the debate by this point?" -> "the debate"): empty without
        such a bound, or when it orders or quotes."""
        if not self.so_far or self.order or self.quotes:
            return ""
        bare = _without(_without_bound_before(self.words), (*_ALTERNATIVES, *_ANY_TIME))
        kept = [w for w in _uncontracted(list(bare))
                if w not in _FORM_WORDS and w not in _BOUND_WORDS and w not in _SHOWING and not w.isdigit()]
        start = next((i for i, w in enumerate(kept) if w in _DETERMINERS or w.split("'")[0] not in _NOT_DESCRIBING),
                     len(kept))
        return " ".join(kept[start:])  # from its first word that describes ("I'm at 1:33 in the video - ...")

    def holds(self, word: str) -> bool:
        """Whether ``word`` (any case) is one of the question's words."""
        return word.lower() in self.words

    def says(self, text: str, share: float = 0.8) -> bool:
        """Whether at least ``share`` of ``text``'s words are the question's own (a description copied from it)."""
        wanted = words(text)
        return bool(wanted) and sum(w in self.words for w in wanted) >= share * len(wanted)

    def quoted(self, text: str, share: float = 0.8) -> bool:
        """Whether at least ``share`` of ``text``'s words stand inside the question's quotation marks."""
        wanted = words(text)
        held = {w for q in self.quotes for w in words(q)}
        return bool(wanted) and sum(w in held for w in wanted) >= share * len(wanted)


@lru_cache(maxsize=256)
def read_question(text: str) -> QuestionReading:
    """The reading of ``text`` (pure and cached: every module may ask for it again at no cost)."""
    tokens = _located(tuple(words(text)))
    times = tuple(clock_seconds(t) for t in clock_times(text))
    quotes = tuple(m.group(1) or m.group(2) for m in _QUOTED.finditer(text))
    scene = _named_scene(tokens, bool(quotes), bool(times))
    asks = _asks(tuple(_uncontracted(words(_QUOTED.sub(" ", text)))))
    ordering = _without_bound_before(tokens) if asks in (Asks.YES_NO, Asks.HOW_MANY) else tokens
    bounded_before = len(ordering) < len(tokens)  # "has it been shown before 0:22?" bounds as "by 0:22" does
    return QuestionReading(
        text, tokens, asks, times, quotes, scene,
        bool(times) and (_has_any(_without(tokens, _LEADING_UP), _SO_FAR) or bounded_before or _bound_by(tokens)
                         or (asks is Asks.YES_NO and _by_then(tokens))),
        any(w in _ORDER_WORDS for w in ordering) or _has_any(tokens, _LEADING_UP) or _looks_on(tokens),
        _occurrence(tokens),
        "glasses" if _EYEWEAR & set(tokens) else "any",
        _has_any(tokens, _CHARACTER_OF), bool(_DISTINCT & set(tokens)),
        clothes_named(words(_QUOTED.sub(" ", text))) or "any")  # fmt: skip


def _looks_on(tokens: Phrase) -> bool:
    """Whether the words ask what comes next without an order word: a verb of moving on (:data:`_GOING_ON`) with
    no thing named right after it ("what does it cut to?", not "how often does it cut to a dark screen?"), or
    "once" with a word of ending within the next eight ("once the segment at 0:45 is over")."""
    moving_on = any(not _DETERMINERS & set(tokens[i + n: i + n + 1]) for i, n in _found(tokens, _GOING_ON))
    return moving_on or any(w == "once" and _ENDED & set(tokens[i + 1: i + 9]) for i, w in enumerate(tokens))


_CONTRACTED = frozenset(w for phrase, _ in _ASKS for w in phrase) | _AUXILIARIES
"""Words whose contraction asks as they do ("what's on screen?", "who's talking?", "isn't she there?")."""


def _sex(word: str) -> str | None:
    """``man`` or ``woman`` for a word of either sex ("male", "woman's", "guy"), else None."""
    plain = word.replace("’", "'").removesuffix("'s")
    return _SEXES.get(plain) or person_kind(plain)


def _uncontracted(tokens: list[str]) -> list[str]:
    """``tokens`` with a question word or an auxiliary cut at its apostrophe ("what's" -> "what", "isn't" ->
    "is"): the question's form, as written without the contraction."""
    out = []
    for token in tokens:
        plain = token.replace("’", "'")
        head = plain[:-3] if plain.endswith("n't") else plain.split("'")[0]
        out.append(head if head != token and head in _CONTRACTED else token)
    return out


def _asks(tokens: Phrase) -> Asks:
    """The first question word's kind (``tokens``: the question's words outside its quotations); a question
    opening with an auxiliary, or holding one and no question word ("Up to 0:50, did the video show ...?"), asks
    yes or no. A request ("Could you tell me what ...", "Do you remember who ...", "could you please give me the
    words ...") asks its embedded question."""
    tokens = tuple(w for w in tokens if w not in _POLITE)
    guided = len(tokens) > 4 and tokens[2] in _GUIDING and tokens[3:5] in (("me", "through"), ("us", "through"))
    if len(tokens) > 2 and tokens[0] in _AUXILIARIES and tokens[1] == "you" and (tokens[2] in _ASKING_VERBS or guided):
        rest = tokens[5:] if guided else tokens[4:] if tokens[3:4] in (("me",), ("us",)) else tokens[3:]
        if rest[:1] in (("if",), ("whether",)):
            return Asks.YES_NO
        embedded = _asks(rest) if rest and rest[0] not in _AUXILIARIES else Asks.OTHER
        return Asks.YES_NO if embedded is Asks.OTHER and _AUXILIARIES & set(rest) else embedded
    if tokens and tokens[0] in _AUXILIARIES:  # "Is the friend who wrote it still alive?" asks yes or no
        return Asks.YES_NO
    for start in range(len(tokens)):
        if _relative(tokens, start) or _clause_of_time(tokens, start):
            continue
        if tokens[start] == "if" and start and tokens[start - 1] in _ASKING_IF:
            return Asks.YES_NO
        if start and _opens_question(tokens, start):
            return _asks(tokens[start:])  # the question proper begins here, after a lead-in ("hey, at 0:26, is it")
        if any(tokens[start: start + len(phrase)] == phrase for phrase in _COUNTING) or _what_count(tokens, start):
            return Asks.HOW_MANY
        for phrase, asks in _ASKS:
            if tokens[start: start + len(phrase)] == phrase:
                return asks
    return Asks.YES_NO if _AUXILIARIES & set(tokens) else Asks.OTHER


_TOTALS = frozenset({"number", "total", "count", "headcount", "tally"})
"""Nouns of a count, which a "what" before them turns into "how many" ("what's the total of distinct photos?")."""


def _what_count(tokens: Phrase, at: int) -> bool:
    """Whether a "what" at ``at`` asks for a count: a noun of a count after it, past a verb "be" and a determiner
    ("what's the head count at 1:05?", "what is the total number of photos?")."""
    if tokens[at] != "what":
        return False
    rest = [w for w in tokens[at + 1: at + 4] if w not in ("is", "was", "the", "s", "head")]
    return bool(rest) and rest[0] in _TOTALS


_QUESTION_WORDS = frozenset(w for phrase, _ in _ASKS for w in phrase) - {"how", "whether"}
"""Words that open a question after a clause of time ("when she speaks, who ..."); not "how" or "whether", which
also join clauses ("when she speaks, how loud ..." is rare, "when the man tells how ..." is not)."""


def _clause_of_time(tokens: Phrase, at: int) -> bool:
    """Whether a "when" at ``at`` opens a clause of time before the question proper rather than asking when: a
    subject after it, and a question word or an auxiliary with its subject later ("When the video reaches 1:05,
    what is discussed?", "when she speaks, is he on screen?"; not "when does she speak?", "when exactly?")."""
    if tokens[at] != "when" or at + 1 >= len(tokens) or tokens[at + 1] not in _SUBJECTS:
        return False
    rest = tokens[at + 2:]
    return bool(_QUESTION_WORDS & set(rest)) or any(_opens_question(rest, i) for i in range(len(rest)))


def _opens_question(tokens: Phrase, at: int) -> bool:
    """Whether an auxiliary followed by a subject stands at ``at``: where a yes/no question proper begins."""
    return tokens[at] in _AUXILIARIES and at + 1 < len(tokens) and tokens[at + 1] in _SUBJECTS


def _question_proper(tokens: Phrase) -> int:
    """Where the question proper begins after a lead-in ("in the video's running order, does A come before B?"):
    at the first auxiliary followed by a subject past the first word; 0 when there is none."""
    return next((i for i in range(1, len(tokens)) if _opens_question(tokens, i)), 0)


_RELATIVES = frozenset({"which", "whom", "whose"})
_PREPOSITIONS = frozenset({"with", "in", "at", "on", "during", "by", "from", "to", "of", "through", "for"})
_DETERMINERS = frozenset({"the", "a", "an", "this", "that", "these", "those"})


def _relative(tokens: Phrase, at: int) -> bool:
    """Whether the word at ``at`` is a relative pronoun of a request ("Please describe the segment with which the
    video begins", "tell me about the part in which she sings"): "which", "whom" or "whose" after a preposition
    that follows a noun phrase opened by a determiner, in a question that opens with a request verb. It describes
    what the request asks about; it asks nothing itself."""
    opening = tokens[1:] if tokens[:1] == ("please",) else tokens
    if not opening or opening[0] not in _REQUESTS or tokens[at] not in _RELATIVES or at < 3:
        return False
    return tokens[at - 1] in _PREPOSITIONS and bool(_DETERMINERS & set(tokens[max(0, at - 4): at - 1]))


def _found(tokens: Phrase, phrases: tuple[Phrase, ...]) -> list[tuple[int, int]]:
    """(position, length) of each occurrence of ``phrases`` in ``tokens``, scanning left to right without overlap,
    the first listed phrase at a position (list the longest first)."""
    found: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens):
        phrase = next((p for p in phrases if tokens[i: i + len(p)] == p), None)
        if phrase is not None:
            found.append((i, len(phrase)))
        i += len(phrase) if phrase is not None else 1
    return found


_INDEFINITE = frozenset({"a", "an"})


def _located(tokens: Phrase) -> Phrase:
    """``tokens`` with "in front of" for each "before" that places someone in front of a thing
    (:func:`_placing_befores`): what it means, so that a description read back says it."""
    placing = _placing_befores(tokens)
    kept: list[str] = []
    for i, word in enumerate(tokens):
        kept += ["in", "front", "of"] if i in placing else [word]
    return tuple(kept)


def _placing_befores(tokens: Phrase) -> frozenset[int]:
    """The positions of the words "before" that place someone in front of a thing ("a man in a red tie before a
    flag"): one right after a word that is not of showing, with "a" or "an" after it, whose next words (up to
    three, to the next word of showing) name no picture, screen, person, part of the video or time
    (:func:`~m3agent.graph.scenes.names_scene`). Such a "before" sets nothing in order; "is the photo shown before
    a dark screen?", "before a woman speaks", "before the debate" and "before 0:22" still do."""
    return frozenset(i for i, word in enumerate(tokens)
                     if word == "before" and i and tokens[i - 1] not in _SHOWING and tokens[i + 1: i + 2]
                     and tokens[i + 1] in _INDEFINITE and not names_scene(_noun_after(tokens, i + 2)))


def placed_in_front(text: str) -> str:
    """``text`` with "in front of" for each "before" of it that places someone in front of a thing (as
    :func:`read_question` reads it), the rest as written: the question as the model is shown it, so that it does
    not read "a red tie before a flag" as an order in time."""
    tokens = tuple(words(text))
    positions = _placing_befores(tokens)
    placing = {n for n, i in enumerate(i for i, w in enumerate(tokens) if w == "before") if i in positions}
    if not placing:
        return text
    out, start, ordinal, lower = [], 0, 0, text.lower()
    while (at := lower.find("before", start)) >= 0:
        end = at + len("before")
        whole = (not at or not _in_word(lower[at - 1])) and (end == len(text) or not _in_word(lower[end]))
        if whole:
            out.append(text[start:at] + ("in front of" if ordinal in placing else text[at:end]))
            ordinal += 1
        else:
            out.append(text[start:end])
        start = end
    return "".join(out) + text[start:]


def _in_word(char: str) -> bool:
    """Whether ``char`` belongs to a word as :func:`~m3agent.text.words` reads words."""
    return char.isalnum() or char in "'’"


def _noun_after(tokens: Phrase, start: int) -> Phrase:
    """Up to three words from ``start``, to the next word of showing or of order."""
    out: list[str] = []
    for word in tokens[start: start + 3]:
        if word in _SHOWING or word in _ORDER_WORDS:
            break
        out.append(word)
    return tuple(out)


def _describing(tokens: Phrase, form: frozenset[str] = _FORM_WORDS) -> str:
    """The words of ``tokens`` that describe what is shown (not of asking, ``form``, or of showing), without the
    words left dangling at the end ("the photo of a couple in the video" -> "the photo of a couple")."""
    kept = [w for w in tokens if w not in form and w not in _SHOWING and not any(c.isdigit() for c in w)]
    if all(w in STOPWORDS for w in kept):
        return ""
    while kept[-1] in STOPWORDS:
        kept.pop()
    return " ".join(w for i, w in enumerate(kept) if not i or kept[i - 1] != w)


_JUST = frozenset({"right", "just", "immediately", "directly", "shortly"})
"""Words that make "before 0:22" the moment next to it, not a bound ("is anyone on screen right before 0:22?")."""


def _without_bound_before(tokens: Phrase) -> Phrase:
    """``tokens`` without a "before" (or "prior to") that stands right before a clock time and after no word of
    nearness, for a yes/no or a how-many question: "has the photo been on screen at any point before 0:22?", "does
    it show up prior to 1:47?", "before 0:36, how many times does the screen go dark?" bound what they ask from the
    start, as "by 0:22" does (a "what" question asks for the neighbour: "what is shown before 0:22?")."""
    padded = ("", *tokens, "", "", "")
    dropped: set[int] = set()
    for i, w in enumerate(tokens):
        if padded[i] in _JUST:
            continue
        if w == "before" and _clock_at(padded, i + 2):
            dropped.add(i)
        elif w == "prior" and padded[i + 2] == "to" and _clock_at(padded, i + 3):
            dropped |= {i, i + 1}
    return tuple(w for i, w in enumerate(tokens) if i not in dropped)


def _clock_at(padded: Phrase, at: int) -> bool:
    """Whether a clock time stands at ``at``, after a "the" or not ("0:22", "the 0:22 mark")."""
    return padded[at].isdigit() or (padded[at] == "the" and padded[at + 1].isdigit())


def _by_then(tokens: Phrase) -> bool:
    """Whether a perfect "already" or "yet" bounds the question up to its time ("at 1:36, have we already been shown
    the dark screen?", "has the photo been shown yet at 0:50?"), not "already" of a moment ("is he already
    talking at 0:10?"); with a word of order or return the time is a moment looked back from ("had the man at
    0:10 already been seen before?")."""
    held = set(tokens)
    return bool(_BY_THEN & held) and bool(_PERFECT & held) and not (_EARLIER | _LATER | _AGAIN) & held


_BY_THEN = frozenset({"already", "yet"})
_PERFECT = frozenset({"has", "have", "had", "hasn't", "haven't", "hadn't"})


def _bound_by(tokens: Phrase) -> bool:
    """Whether a "by" bounds the question up to a time: a clock time follows it ("by 1:05", "by the 0:44 mark"), or
    it is one of :data:`_BY_WHEN`."""
    padded = (*tokens, "", "")
    clock_after = any(w == "by" and _clock_at(padded, i + 1) for i, w in enumerate(tokens))
    return clock_after or _has_any(tokens, _BY_WHEN)


def _after(tokens: Phrase, word: str) -> str:
    """The token after the first ``word`` (empty when there is none)."""
    at = tokens.index(word) if word in tokens else -1
    return tokens[at + 1] if 0 <= at < len(tokens) - 1 else ""


def _occurrence(tokens: Phrase) -> int:
    """Which appearance ``"the second time"`` counts (1 when the question counts none)."""
    for word, following in itertools.pairwise(tokens):
        if following == "time" and word in _ORDINALS:
            return _ORDINALS[word]
    return 1


def _without(tokens: Phrase, phrases: tuple[Phrase, ...]) -> Phrase:
    """``tokens`` with every occurrence of ``phrases`` cut out."""
    cut = {i + k for i, n in _found(tokens, phrases) for k in range(n)}
    return tuple(w for i, w in enumerate(tokens) if i not in cut)


def _named_scene(tokens: Phrase, quoted: bool, timed: bool) -> Scene:
    """The first or last scene a question names: by its phrases (:data:`_FIRST_SCENE`), by the recording said to
    start or end ("how does the clip begin?", "what do we see last before the footage stops?": the verb within two
    words of the recording, or right after an "it" in a question with no clock time), never in a question with a
    quotation (the line "starts", a sentence "ends"), or by a part of the video shown first or last ("which scene
    plays first?", never with an "or": "which scene comes first, A or B?" orders two)."""
    for ordinal, phrases, verbs in ((Scene.FIRST, _FIRST_SCENE, _STARTS), (Scene.LAST, _LAST_SCENE, _ENDS)):
        if _has_any(tokens, phrases) or (not quoted and any(_turns(tokens, i, verbs, timed)
                                                            for i in range(len(tokens)))):
            return ordinal
    if "or" not in tokens:
        for i, w in enumerate(tokens[:-2]):
            if w in _SCENE_NOUNS and tokens[i + 2] in ("first", "last"):
                return Scene.FIRST if tokens[i + 2] == "first" else Scene.LAST
    return Scene.ANY


def _turns(tokens: Phrase, at: int, verbs: frozenset[str], timed: bool) -> bool:
    """Whether the recording named at ``at`` starts or ends there (a verb of ``verbs`` within two words after it;
    right after it for "it", which in a question with a clock time is the part at that time)."""
    if tokens[at] not in _RECORDING or (timed and tokens[at] == "it"):
        return False
    reach = 2 if tokens[at] == "it" else 3
    return bool(verbs & set(tokens[at + 1: at + reach]))


def _has_any(tokens: Phrase, phrases: tuple[Phrase, ...]) -> bool:
    return any(has_phrase(tokens, p) for p in phrases)


def has_phrase(tokens: Phrase, phrase: Phrase) -> bool:
    """Whether the words of ``phrase`` stand together, in order, in ``tokens``."""
    n = len(phrase)
    return any(tokens[i: i + n] == phrase for i in range(len(tokens) - n + 1))
