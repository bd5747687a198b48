"""The query plan: the packaged model reads a question once, under a grammar, into a typed plan.

A plan names the operation asked (``ask``: same person? seen again? what comes after? how many? ...), its
``direction`` (before / after) and ``sense`` (seen / heard), and up to two references to people or moments
(``person``, ``other``: a kind, a place in the picture, a clock time, the first / last scene, a quote). The
operators of :mod:`m3agent.graph` then do the lookups (:mod:`m3agent.control.people.graph_answers`): the model
reads the question, the graph decides the answer.

What the model writes is checked against the question before it is used: a clock time the question does not
hold, or a quote whose words it does not hold, is dropped (a small model copies its examples' times); an operation
the question's form rules out is replaced (:func:`_fitting_ask`: a yes-or-no operation for a "what" question, "same
person" with one person named).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from m3agent.control.reading import Asks, QuestionReading, Scene, placed_in_front, read_question
from m3agent.control.replies import Ask, Direction, PlanRef, PlanReply
from m3agent.errors import M3AgentError, MalformedReplyError
from m3agent.graph.references import Kind, Reference
from m3agent.graph.scenes import describe
from m3agent.llm.prompts import load_prompt_set
from m3agent.text import STOPWORDS, clock_seconds, stem, words

if TYPE_CHECKING:
    from m3agent.control.run_context import RunContext

PLAN_PROMPT = "control_plan"
PLAN_MAX_TOKENS = 160


class Plan:
    """A checked plan: the operation, direction, sense and the references as :class:`Reference` values, checked
    against the question's :class:`QuestionReading` (a question given as text is read here)."""

    __slots__ = ("ask", "direction", "distinct", "later", "other", "person", "raw", "sense", "so_far", "yes_no")

    def __init__(self, reply: PlanReply, question: QuestionReading | str, raw: str = "") -> None:
        reading = read_question(question) if isinstance(question, str) else question
        self.ask: Ask = reply.ask
        self.direction = reply.direction
        self.sense = reply.sense
        self.so_far = reading.so_far  # the question's time bounds it from the start ("by 2:00", "so far")
        self.distinct = reading.distinct  # it counts different ones, not times shown
        # "Order check: A before B?" asks yes or no in a question's telegraphic form
        self.yes_no = reading.asks is Asks.YES_NO or (reading.asks is Asks.OTHER and reading.order_pair is not None)
        self.later = reading.asks_later  # a yes/no question of order asks whether the first thing comes later
        person = reference(reply.person, reading)
        other = reference(reply.other, reading) if reply.other is not None else None
        other = other if other is not None and (other.kind != "none" or other.anchored) else None
        self.ask, other = _not_in_order(self.ask, other, reading)
        self.ask, person, other = _two_moments(self.ask, person, other, reading)
        self.ask, person, other = _the_voice_of_the_described(self.ask, person, other, reading)
        person, self.other = _moment_of_the_person(person, other)
        person, self.other = _the_one_asked_about(self.ask, person, self.other)
        person = _with_the_named_scene(person, self.other, reading)
        person = _with_the_only_time(person, self.other, reading)
        person = _with_the_only_quote(person, self.other, reading) if self.ask not in _NO_QUOTE else person
        self.person, self.other = _wearing(person, self.other, reading)
        self.ask, self.person, self.other = _in_order(self.ask, self.person, self.other, reading)
        self.person, self.other = _the_side_asked(self.ask, self.person, self.other, reading)
        self.ask, self.person = _described_so_far(self.ask, self.person, reading)
        self.person = _counted_as_described(self.ask, self.person, reading)
        self.ask, self.direction = _fitting_ask(self.ask, self.direction, self.person, self.other, reading)
        self.person = _seen_for_looks(self.ask, self.person, reading)
        self.person = _placed(self.ask, self.person, self.other, reading)
        if self.ask in ("after", "before") and self.person.time_s is not None and self.person.kind == "none":
            self.person = replace(self.person, about="")  # the moment is its time, not the model's words for it
        self.raw = raw

    def describe(self) -> str:
        """One line for the run's trace: ``seen_again after heard: voice @0:44``."""
        refs = " / ".join(_ref_text(r) for r in (self.person, self.other) if r is not None)
        return f"{self.ask} {self.direction} {self.sense}: {refs}"


def write_plan(run: RunContext) -> Plan | None:
    """The model's plan for ``run.question`` (one call under the plan grammar); None without a chat model or
    when the call or its reply fails (the caller answers as if no plan was made)."""
    if run.chat is None:
        return None
    prompts = load_prompt_set(PLAN_PROMPT)
    messages = [{"role": "system", "content": prompts.render("system")},
                {"role": "user", "content": prompts.render("user", question=placed_in_front(run.question))}]
    try:
        reply = run.call(messages, prompts.schema, max_tokens=PLAN_MAX_TOKENS)
        return Plan(PlanReply.read(reply), run.reading, reply.text)
    except (M3AgentError, MalformedReplyError, ValueError, RuntimeError, OSError):
        return None


def reference(ref: PlanRef, reading: QuestionReading) -> Reference:
    """``ref`` as a :class:`Reference`, keeping only a time, a quote, a scene and a description the question really
    holds (a small model copies its examples' times, and also "quotes" its description of a person or the whole
    question)."""
    time_s = _held_time(ref.time, reading)
    quote = ref.quote if reading.quoted(ref.quote) else ""
    scene = ref.scene if reading.holds(ref.scene) else Scene.ANY.value
    about = ref.about if not quote and reading.says(ref.about) and not describe(ref.about).empty else ""
    about = "" if set(words(about)) <= _THE_RECORDING else about
    return Reference(ref.kind, ref.place, time_s, scene, quote, about=about)


_THE_RECORDING = frozenset({"the", "this", "that", "whole", "entire", "video", "clip", "recording", "footage"})
"""Words of a description that names the recording itself ("the video" of "how many photos does the video
show?"), no scene in it."""


def _held_time(written: str, reading: QuestionReading) -> float | None:
    try:
        seconds = clock_seconds(written)
    except ValueError:
        return None
    return seconds if seconds in reading.times else None


def _not_in_order(ask: Ask, other: Reference | None, reading: QuestionReading) -> tuple[Ask, Reference | None]:
    """"At 0:41, is the voice coming from the man in the photo or from someone else?" sets nothing in order: a
    yes/no question of one moment with no word of order and no two things in order is not "which comes first"
    (the model reads an "or" as a choice between two things shown); it is planned as a recall of that moment, with
    one reference, for the checks below to read what it asks."""
    if ask != "which_first" or reading.asks is not Asks.YES_NO or reading.moment is None or reading.order \
            or reading.order_pair is not None:
        return ask, other
    return "recall", None


def _two_moments(ask: Ask, person: Reference, other: Reference | None, reading: QuestionReading
                 ) -> tuple[Ask, Reference, Reference | None]:
    """"Is it one person talking both at 0:04 and at 1:36?" asks whether the people at two moments are one: whether
    someone speaks relates one moment, so a yes/no plan of it with a reference at each of two different times the
    question holds asks the same person (of the voices heard then, when the question speaks of talking); so does
    the same plan of a question that offers its answers without asking yes or no ("0:45 and 1:05: one speaker or
    two?")."""
    if ask != "speaks" or other is None or person.time_s is None or other.time_s is None \
            or person.time_s == other.time_s or reading.asks not in (Asks.YES_NO, Asks.OTHER):
        return ask, person, other
    if reading.names_voice:
        person, other = replace(person, kind="speaker"), replace(other, kind="speaker")
    return "same_person", person, other


def _the_voice_of_the_described(ask: Ask, person: Reference, other: Reference | None, reading: QuestionReading
                                ) -> tuple[Ask, Reference, Reference | None]:
    """"At 1:00, is the voice we hear coming from the smiling woman in the photo?" asks whether the person it describes
    speaks then: a yes/no question of one moment that speaks of a voice or of talking and describes someone seen (a
    man, a woman, someone in a photo), planned as a recall of what is heard, is whether that person speaks; so is
    the same plan written as the speaker then and, apart, the person described ("is the speech at 0:14 coming from
    the woman in the photo?")."""
    apart = other is not None and person.heard and not other.heard and other.kind != "none"
    if ask != "recall" or (other is not None and not apart) or reading.asks is not Asks.YES_NO \
            or reading.moment is None or reading.quotes or reading.asks_again or not reading.names_voice:
        return ask, person, other
    about = reading.described
    described = describe(about)
    if not described.kinds:
        return ask, person, other
    kind: Kind = "photo" if described.shown == "still" else "woman" if described.kinds[0] == "woman" else "man"
    return "speaks", Reference(kind, "any", reading.moment, about=about), None


def _moment_of_the_person(person: Reference, other: Reference | None) -> tuple[Reference, Reference | None]:
    """A second reference that is only a moment (kind none: a time or a scene, no quote) anchors an unanchored
    person: "the man on the left in the first scene" written as a man on the left and, apart, the first scene. A
    scene described by its content and nothing else is a second thing ("is the man on the left shown before the
    dark screen?"), not a moment of the first: it stays."""
    if other is None or other.kind != "none" or other.quote or person.kind == "none" or person.anchored:
        return person, other
    if other.time_s is None and other.scene == "any":
        return person, other
    return replace(person, time_s=other.time_s, scene=other.scene), None


def _the_one_asked_about(ask: Ask, person: Reference, other: Reference | None) -> tuple[Reference, Reference | None]:
    """"The speaker at 1:39: is it the woman in the photo?" asks whether the woman speaks at 1:39. Written as a
    speaker at a time and, apart, the person seen, the person asked about is the second one, at the first's
    moment (whether the speaker speaks is never in doubt); a speaker written alone ("does the man speaking into a
    microphone at 1:53 talk?") is the person seen then."""
    if ask != "speaks" or not person.heard:
        return person, other
    if other is None or other.heard or other.kind == "none":  # a lone speaker: whoever is seen then
        return (person if person.quote else replace(person, kind="person")), other
    if other.time_s is not None or other.scene != "any":
        return other, None
    return replace(other, time_s=person.time_s, scene=person.scene), None


def _with_the_named_scene(person: Reference, other: Reference | None, reading: QuestionReading) -> Reference:
    """``person`` in the first or last scene when the question names it and no reference took it (the model wrote
    the scene as a description instead, or left it out)."""
    if reading.scene is Scene.ANY or person.scene != "any" or (other is not None and other.scene != "any"):
        return person
    if person.time_s is not None or person.quote:
        return person
    return replace(person, scene="first" if reading.scene is Scene.FIRST else "last", about="")


def _with_the_only_time(person: Reference, other: Reference | None, reading: QuestionReading) -> Reference:
    """``person`` with the question's clock time when the question holds exactly one and no reference took it
    (the model left it out, or wrote it where the check dropped it)."""
    if len(reading.times) != 1 or person.time_s is not None or (other is not None and other.time_s is not None):
        return person
    if person.quote or person.scene != "any":
        return person
    return replace(person, time_s=reading.times[0])


_NO_QUOTE = frozenset({"recall", "count_people", "count_so_far", "count_scenes"})
"""Operations whose person a quotation does not pick out (what was said is the answer, or nobody is meant)."""


def _with_the_only_quote(person: Reference, other: Reference | None, reading: QuestionReading) -> Reference:
    """``person`` with the question's quotation when it holds exactly one and no reference took it: a small model
    often leaves the quote out ("who asks "why didn't you do it"" planned as a speaker of the first scene), and
    the quote is what picks out the speaker."""
    if len(reading.quotes) != 1 or person.quote or (other is not None and other.quote):
        return person
    if person.kind == "none" and (person.time_s is not None or person.scene != "any"):
        return person  # a moment already named by its time or scene
    return replace(person, quote=reading.quotes[0][:80])


_WEARER_KINDS = frozenset({"man", "woman", "person", "speaker"})


def _wearing(person: Reference, other: Reference | None, reading: QuestionReading
             ) -> tuple[Reference, Reference | None]:
    """The references with ``wears`` and ``dressed`` set from the question: "the woman with glasses", "the man in
    a dark suit" name glasses and a clothes colour, which the plan schema does not carry (the model is not asked;
    the words are unambiguous). They go to the first reference that is a person who can wear them (not a photo, a
    voice or a bare moment), with the time on screen the question counts ("appears for the second time") when it
    names glasses and no moment."""
    if reading.wears == "any" and reading.dressed == "any":
        return person, other
    if person.kind in _WEARER_KINDS:
        return _worn(person, reading), other
    if other is not None and other.kind in _WEARER_KINDS:
        return person, _worn(other, reading)
    return person, other


def _the_side_asked(ask: Ask, person: Reference, other: Reference | None, reading: QuestionReading
                    ) -> tuple[Reference, Reference | None]:
    """The two things of a yes/no question of order with the one it asks of first: a lead-in may name them in
    another order than the question proper asks ("Between A and B, does B come up first?" asks whether B comes
    before A). The side sharing more words with the question proper's subject is the one asked of; a tie keeps
    the order the plan gave."""
    subject = reading.asked_subject
    if ask != "which_first" or other is None or not person.about or not other.about or not subject:
        return person, other
    asked = _content(subject)
    return (other, person) if len(asked & _content(other.about)) > len(asked & _content(person.about)) \
        else (person, other)


def _content(text: str) -> set[str]:
    """The stems of a description's words that are not stopwords."""
    return {stem(w) for w in words(text) if w not in STOPWORDS}


def _worn(ref: Reference, reading: QuestionReading) -> Reference:
    ref = replace(ref, dressed=reading.dressed)
    return ref if reading.wears == "any" else replace(ref, wears=reading.wears, occurrence=reading.occurrence)


def _in_order(ask: Ask, person: Reference, other: Reference | None, reading: QuestionReading
              ) -> tuple[Ask, Reference, Reference | None]:
    """A question that sets two described things in order ("order check: A before B?", "did the video show A prior
    to B?") asks which comes first: the two things as the question describes them
    (:attr:`QuestionReading.order_pair`), whatever the model planned of what is shown or when (a recall, the
    neighbour of one of them, the scene, when one is shown, or which comes first with one side only). A yes/no
    question asks nothing of what is shown next to a moment; its order words set its two things in order."""
    pair = reading.order_pair
    ordered = ask in _ORDERED_ASKS or (ask == "seen_again" and not reading.names_return)
    if not ordered or (ask == "which_first" and other is not None) or pair is None or reading.times \
            or reading.quotes or reading.asks not in (Asks.YES_NO, Asks.OTHER):
        return ask, person, other
    if any(describe(side).empty for side in pair):
        return ask, person, other
    return "which_first", Reference(about=pair[0]), Reference(about=pair[1])


_ORDERED_ASKS = frozenset({"recall", "after", "before", "scene", "when", "which_first"})
"""Operations a question of two described things in order may be planned as, and is not (who, same person and how
many ask something else of them, as does seen again in a question with a word of returning: "is the man seen again
after the dark screen?")."""


_PERSON_KINDS = frozenset({"man", "woman", "person"})


_SHOWN_BY_THEN = frozenset({"when", "seen_again", "ever_seen", "anyone_there"})
"""Operations a so-far question of a described scene may be planned as ("has the woman with glasses talking indoors
come up by 1:35?": when she is first shown, whether she was seen)."""


def _described_so_far(ask: Ask, person: Reference, reading: QuestionReading) -> tuple[Ask, Reference]:
    """"As of 1:58, the woman with glasses talking indoors shown yet?" asks whether a scene so described came by
    then: a person written with more than who they are (what the scene shows, what happens in it) is that scene
    (the graph then asks when it is shown, bounded), as is a voice written with what the picture is while it is
    heard ("until 1:05, has the dark screen with a voice been on screen?"). A question of a person seen *again*
    keeps the person; "has anyone been on screen by 0:40?" asks of anyone ("I'm at 1:33 - have I already seen the
    split-screen debate by this point?" of the scene its picture names)."""
    if ask not in _SHOWN_BY_THEN or not reading.so_far or reading.asks not in (Asks.YES_NO, Asks.OTHER):
        return ask, person
    if ask not in ("when", "anyone_there") and reading.asks_again:  # "seen again by 1:35?" asks of a person
        return ask, person
    if person.heard and not person.quote and person.time_s is not None:  # "the dark screen with a voice": a picture
        about = person.about or reading.bounded_description
        if describe(about).shown != "any":
            return "when", replace(person, kind="none", about=about)
        return ask, person
    about = person.about or reading.bounded_description  # the model may leave the description out
    if (person.kind not in _PERSON_KINDS and person.kind != "none") or not about or person.time_s is None:
        return ask, person
    described = describe(about)
    if described.pictured or (described.topic and ask != "anyone_there"):  # what the scene shows: its kind of
        return "when", replace(person, kind="none", about=about)  # picture, how many, a close-up; "anyone" no topic
    return ask, person


def _counted_as_described(ask: Ask, person: Reference, reading: QuestionReading) -> Reference:
    """"How many still images does the video show?" counts scenes the question describes: a count of scenes whose
    reference names no one and describes nothing (the model's description was dropped, or never written) takes
    the question's own words when they say what the picture is. A count of voices written with what the picture
    is while they are heard ("how many black-screen, voice-only segments by 0:08?") counts that picture's scenes."""
    if ask not in ("count_scenes", "count_so_far") or person.quote:
        return person
    if person.kind in ("voice", "speaker"):
        described = describe(person.about or reading.bounded_description or reading.description)
        return Reference(time_s=person.time_s, about=described.picture) if described.shown != "any" else person
    if ask != "count_scenes" or person.kind not in ("none", "photo") or person.about:
        return person
    described = describe(reading.description or reading.bounded_description)
    return replace(person, about=described.picture) if described.pictured else person


_YES_NO_ASKS = frozenset({"seen_again", "same_person", "speaks", "ever_seen", "anyone_there"})
"""Operations that answer yes or no: never what a "what" question asks ("What do we see at 0:51?")."""


def _fitting_ask(ask: Ask, direction: Direction, person: Reference, other: Reference | None,
                 reading: QuestionReading) -> tuple[Ask, Direction]:
    """The plan's operation, or the one the question's form leaves when it rules the model's out: a "what" question
    planned as a yes/no operation or a time asks what is shown in the scene it names ("what does the video end
    on?"), else what the memories say, as is a "what" question planned as a recall when it names the first or last
    scene and no talk ("what's on screen in the very last scene?"); "the scene" next to a clock time by an order
    word is its neighbour after or before it, and a neighbour lies the way the question's order words look; "same
    person" with one person named asks whether they were seen or heard before (or after), as the question's order
    words say, or, in a yes/no question with no order word that speaks of talking, whether they are the one
    speaking; "when" or a recall in a yes/no question of the person at one moment, one way in time, is whether they
    are seen or heard again that way; a question offering a photo or video as its answers asks which is on screen;
    "seen again" with no way in time planned looks the one way the question's words do
    ("reappear at any later point?"); "seen again" in a question that asks of no other time is whether a voice is
    ever seen, or whether anyone is there, and so is "ever seen" of nobody heard at one moment (and "anyone there"
    of a speaker seen anywhere is "ever seen"); where the one speaking is asks who speaks (the answer names them by
    their place), and so does a recall of talk that offers places to choose from."""
    named = reading.scene is not Scene.ANY and not reading.times and not reading.quotes
    if reading.asks_sex and reading.names_voice and ask in ("who_speaks", "speaks", "recall", "seen_again"):
        return "voice_pitch", direction  # "tell me if it's a man or a woman talking at 1:02": the voice's kind
    if reading.asks_still_or_live and reading.moment is not None and ask in ("recall", "scene", "appearance"):
        return "still_or_live", direction  # "what kind of picture is on at 1:14: a photo or video?"
    if reading.asks_shown and ask in (*_YES_NO_ASKS, "recall"):
        return "scene", direction  # "what's on screen at 0:51?": the shot at that moment, put into words
    if reading.asks is Asks.WHAT and (ask in _YES_NO_ASKS or (ask == "when" and named)):
        return ("scene" if named else "recall"), direction
    if ask in ("recall", "when") and named and reading.asks in (Asks.WHAT, Asks.OTHER) and not reading.names_talk:
        return "scene", direction  # "describe the ending of the video", "how does the video end?": the scene
    if ask == "which_first" and named and other is None and reading.order_pair is None:
        return "scene", direction  # "which scene plays first in the video?": one scene named, nothing to order
    if ask == "which_first" and other is None and len(reading.times) == 1 and not reading.so_far \
            and reading.asks_later != reading.asks_earlier:  # "which scene follows the one at 1:08?": one moment
        return _neighbour_way(reading)
    if reading.asks_gist and ask in ("which_first", "when", "after", "before") and not reading.order:
        return "recall", direction  # "what subject comes up in the speech at 0:45?": what the speech is about
    if ask in ("after", "before") and reading.asks is Asks.YES_NO and reading.asks_again and person.kind != "none" \
            and not reading.quotes and reading.asks_later != reading.asks_earlier:
        return "seen_again", "before" if reading.asks_earlier else "after"  # "did the voice at 1:12 speak earlier?"
    if ask == "count_so_far" and not reading.so_far and reading.moment is not None:
        return "count_people", direction  # "how many voices in the scene at 0:49?": no bound, that moment
    if ask == "scene" and reading.times and reading.order and reading.scene is Scene.ANY \
            and reading.asks_later != reading.asks_earlier:  # "the scene following 0:04?": its neighbour
        return _neighbour_way(reading)
    if ask == "recall" and _a_moment_in_order(person, reading):  # "what was shown leading up to 0:57?"
        return _neighbour_way(reading)
    if ask in ("after", "before") and reading.asks_later != reading.asks_earlier \
            and (ask == "after") != reading.asks_later:  # "the scene just ahead of the one at 1:53" looks back
        return _neighbour_way(reading)
    if ask in ("when", "recall") and _asks_again_one_way(person, reading):  # "was the voice at 0:26 heard earlier?"
        return "seen_again", "before" if reading.asks_earlier else "after"
    if ask == "seen_again" and direction == "any" and len(reading.times) == 1 and not reading.so_far \
            and reading.again_way is not None:  # "does she, on screen at 1:37, reappear at any later point?"
        return ask, reading.again_way
    if ask == "seen_again" and not reading.asks_again and len(reading.times) == 1 and other is None:
        if person.heard and not person.quote:  # "speaker at 1:28 visible on screen anywhere?"
            return "ever_seen", direction
        if _anybody(person):  # "at 0:59, can you see a person?"
            return "anyone_there", direction
    if ask == "ever_seen" and len(reading.times) == 1 and other is None and not person.heard \
            and not reading.names_voice and _anybody(person):  # "could anyone be seen in the picture at 1:32?"
        return "anyone_there", direction
    if ask == "recall" and reading.asks_ever_seen and len(reading.times) == 1 and other is None and person.heard \
            and not person.quote:  # "do you recall whether the speaker at 0:05 is anyone you see?"
        return "ever_seen", direction
    if ask == "anyone_there" and reading.asks_ever_seen and reading.names_voice and len(reading.times) == 1 \
            and other is None and not person.quote:  # "is the speaker at 0:05 among the people on camera?"
        return "ever_seen", direction
    if ask == "position" and person.kind == "speaker" and other is None:
        return "who_speaks", direction  # "is the one talking on the left or the right?": the speaker, by place
    if ask == "recall" and reading.offers_places and reading.names_talk and not reading.asks_words and other is None:
        return "who_speaks", direction  # "does the talking come from the left panel or the right panel?"
    if ask == "same_person" and other is None and len(reading.times) < 2 and person.kind != "none":
        way: Direction = "before" if reading.asks_earlier else "after" if reading.asks_later else "any"
        if way == "any" and reading.names_talk and reading.asks is Asks.YES_NO:
            return "speaks", direction  # "is she the one doing the talking?": the same person as the speaker
        return "seen_again", way
    return ask, direction


def _placed(ask: Ask, person: Reference, other: Reference | None, reading: QuestionReading) -> Reference:
    """The one place the question puts someone at (:attr:`QuestionReading.place`), for the person seen the plan
    asks about and left unplaced ("can you describe the right person at 1:02?": the person on the right); never a
    voice or a quotation, nor when a second reference is placed."""
    place = reading.place
    if place is None or ask not in _OF_A_PERSON or person.place != "any" or person.heard or person.quote.strip() \
            or (other is not None and other.place != "any"):
        return person
    return replace(person, kind="person" if person.kind == "none" else person.kind, place=place)


_OF_A_PERSON = frozenset({"appearance", "speaks", "seen_again", "same_person", "count_scenes", "when"})
"""Operations that ask something of a person seen, whom a place in the picture picks out."""


def _seen_for_looks(ask: Ask, person: Reference, reading: QuestionReading) -> Reference:
    """"What does the right person at 1:02 look like?" asks of someone seen: a reference the model wrote as a
    speaker or a voice, in a question of looks or place that speaks of no voice or talking, is the person seen."""
    if ask not in ("appearance", "position") or not person.heard or person.quote or reading.names_voice:
        return person
    return replace(person, kind="person")


def _neighbour_way(reading: QuestionReading) -> tuple[Ask, Direction]:
    """The neighbour the question's order words point to: after it, or before it."""
    return ("after", "after") if reading.asks_later else ("before", "before")


def _asks_again_one_way(person: Reference, reading: QuestionReading) -> bool:
    """Whether a yes/no question asks if the person at one moment is seen or heard again one way in time ("was the
    speaker at 0:26 heard earlier, and when?", "when, if ever, before 1:22 is the speaker at 1:22 heard?": the same
    time twice is one moment): not when they are (a plain "when" question), not what came by then."""
    return reading.asks_whether and person.kind != "none" and person.time_s is not None \
        and len(set(reading.times)) == 1 and not reading.so_far and reading.asks_earlier != reading.asks_later


def _anybody(person: Reference) -> bool:
    """Whether the reference is anyone at all: no kind of person, place, clothes or description of its own."""
    return person.kind in ("person", "none") and person.place == "any" and not person.about and not person.quote \
        and person.wears == "any" and person.dressed == "any"


def _a_moment_in_order(person: Reference, reading: QuestionReading) -> bool:
    """Whether a "what" question asks what is shown next to one moment, by its clock time and one way in time
    (not what is said there, not everything up to it)."""
    return person.kind == "none" and person.time_s is not None and not person.quote and len(reading.times) == 1 \
        and reading.asks in (Asks.WHAT, Asks.OTHER) and reading.asks_later != reading.asks_earlier \
        and not reading.so_far and not reading.names_talk and not reading.quotes and reading.scene is Scene.ANY


def _ref_text(ref: Reference) -> str:
    parts = [ref.kind, ref.place if ref.place != "any" else ""]
    parts += [f"@{ref.time_s:g}s" if ref.time_s is not None else "", f"{ref.scene} scene" if ref.scene != "any" else ""]
    parts += [f'"{ref.quote}"' if ref.quote else "", f"with {ref.wears}" if ref.wears != "any" else "",
              f"in {ref.dressed}" if ref.dressed != "any" else "",
              f"time {ref.occurrence}" if ref.occurrence != 1 else ""]
    return " ".join(p for p in parts if p)
