"""The one reading of a question (:mod:`m3agent.control.reading`), table by table: each row is a wording and what
it must read as. Rows are phrasings of the M3-Bench question types, written to cover the tables, not copied from an
evaluation set."""

from __future__ import annotations

import pytest

from m3agent.control.reading import Asks, Scene, has_phrase, placed_in_front, read_question
from m3agent.control.retrieval.query import Intent, parse_query

ASKS = [
    ("Do you remember what's on screen in the very last scene?", Asks.WHAT),  # contractions ask as written out
    ("hey, at 0:20 who's doing the talking?", Asks.WHO),
    ("Isn't she the woman from before?", Asks.YES_NO),
    ("Where’s the man with glasses at 1:10?", Asks.WHERE),
    ("Who speaks first?", Asks.WHO),
    ("In the opening scene, who is on the left?", Asks.WHO),
    ("Whose voice is heard over the music?", Asks.WHO),
    ("To whom does the host hand the microphone?", Asks.WHO),
    ("What is written on the sign?", Asks.WHAT),
    ("What time does the interview start?", Asks.WHEN),
    ("When does the woman with glasses appear?", Asks.WHEN),
    ("Where is the man standing?", Asks.WHERE),
    ("How many people are on screen at 0:40?", Asks.HOW_MANY),
    ("How often is applause heard?", Asks.HOW_MANY),
    ("Which person laughs?", Asks.WHICH),
    ("Is the same man seen again later?", Asks.YES_NO),
    ("Did anyone mention the budget?", Asks.YES_NO),
    ("Has a low voice been heard so far at 2:00?", Asks.YES_NO),
    ("Is the friend who wrote the note still alive?", Asks.YES_NO),
    ("Up to 0:50, did the video include the dark screen?", Asks.YES_NO),
    ("By 0:40, has the photo been shown yet?", Asks.YES_NO),
    ("At 1:20, which side is talking?", Asks.WHICH),
    ("How does the video open?", Asks.OTHER),
    ("In the debate, why does the woman say she could not do it?", Asks.WHY),
    ("Describe the room.", Asks.OTHER),
    ("Finish the line that starts with hello.", Asks.OTHER),
    ("", Asks.OTHER),
    # a request asks its embedded question
    ("Could you tell me what the video finishes on?", Asks.WHAT),
    ("Can you tell me who speaks at 0:10?", Asks.WHO),
    ("Do you remember how many people are on screen at 0:10?", Asks.HOW_MANY),
    ("Could you tell me whether the man at 0:10 is seen again?", Asks.YES_NO),
    ("Can you say if the woman speaks?", Asks.YES_NO),
    ("Could you tell me the rest of it?", Asks.OTHER),
    # a word of politeness asks nothing
    ("Could you please give me the words spoken at the 0:48 mark?", Asks.OTHER),
    ("Can you just tell me who speaks at 0:10?", Asks.WHO),
    ("Could you please tell me if the man is seen again?", Asks.YES_NO),
    ("I wonder whether she had spoken before 1:00.", Asks.YES_NO),
    ("Could the man on the left be the one speaking?", Asks.YES_NO),
    # "if" after a verb of knowing or asking is "whether"; elsewhere a condition
    ("I'm trying to figure out if the voice at 1:37 was heard earlier - if so, at what time?", Asks.YES_NO),
    ("Let me know if the woman speaks again, and when.", Asks.YES_NO),
    ("Not sure if anyone is on screen at 0:20?", Asks.YES_NO),
    ("Is she seen again? If so, when?", Asks.YES_NO),
    ("The voice at 0:30: if it was heard before, when was that?", Asks.WHEN),
    ("If you remember, what is said at 0:40?", Asks.WHAT),
    # a lead-in before the question proper
    ("Hey, at 0:26, is it the man with glasses who's talking?", Asks.YES_NO),
    ("Quick question: does the man at 0:10 come back later, and if so at what time?", Asks.YES_NO),
    ("Hey, do you remember who speaks at 0:10?", Asks.WHO),
    ("At 1:20, which side is talking?", Asks.WHICH),
    ("The voice at 0:30 - when was it first heard?", Asks.WHEN),
    # a relative "which" in a request describes what is asked about; it asks nothing
    ("Please describe the segment with which the video begins.", Asks.OTHER),
    ("Tell me about the part in which she sings.", Asks.OTHER),
    ("Tell me which side is talking at 1:20.", Asks.WHICH),
    ("At 1:20, in which part of the screen is she?", Asks.WHICH),
    # a count asked without "how many"
    ("I need the number of times the screen went dark up to 0:40.", Asks.HOW_MANY),
    ("Number of people visible at 0:10?", Asks.HOW_MANY),
    ("Count the people in the frame at 0:10.", Asks.HOW_MANY),
    ("What's the head count at 0:10?", Asks.HOW_MANY),
    ("What is the total of different photos?", Asks.HOW_MANY),
    ("What number of voices can be heard at 0:10?", Asks.HOW_MANY),
    ("What is the man counting at 0:10?", Asks.WHAT),  # no noun of a count after "what"
    # "read" and "transcribe" make a request of "could you ..."
    ("Could you read back what is said at 0:10?", Asks.WHAT),
    # "walk me through" makes a request; "walk" alone does not
    ("Can you walk me through what's shown around 0:44?", Asks.WHAT),
    ("Can you walk to the door?", Asks.YES_NO),
    ("Tally up the people who are visible at 0:10.", Asks.HOW_MANY),
    # "when" with a subject after it and a question later opens a clause of time; it asks nothing
    ("When the video reaches 1:05, what subject is the dialogue focused on?", Asks.WHAT),
    ("When the woman on the right speaks, who is on the left?", Asks.WHO),
    ("When the man speaks, is he on screen?", Asks.YES_NO),
    ("When exactly is the photo shown?", Asks.WHEN),
    ("When is the man who speaks at 0:40 seen again?", Asks.WHEN),
    ("when the photo of two men is shown", Asks.WHEN),
]


@pytest.mark.parametrize(("question", "asks"), ASKS)
def test_what_a_question_asks_for(question: str, asks: Asks) -> None:
    assert read_question(question).asks is asks


SCENES = [
    ("What comes right after the first scene?", Scene.FIRST),
    ("Who is seen in the opening shot?", Scene.FIRST),
    ("What is heard at the very beginning?", Scene.FIRST),
    ("Who is in the last scene?", Scene.LAST),
    ("What happens in the final part?", Scene.LAST),
    ("What is said at the end?", Scene.LAST),
    ("Who speaks first?", Scene.ANY),  # "first" alone names no scene
    ("Was the last thing said a question?", Scene.ANY),
    ("What does the video finish on?", Scene.LAST),
    ("How does the video open?", Scene.FIRST),
    ("When does the interview start?", Scene.ANY),  # a part starting is no scene of the video
    ("Who is in the shot that closes the clip?", Scene.LAST),
    ("What picture opens the video?", Scene.FIRST),
    ("Which part ends the video?", Scene.LAST),
    ("Does the speech end the debate?", Scene.ANY),  # ends something else
    ("Describe the opening clip of the video.", Scene.FIRST),  # an ordinal word and any word for a part
    ("What's shown in the final segment?", Scene.LAST),
    ("Who is in the closing moment?", Scene.LAST),
    ("Is the first one the same person as the second?", Scene.ANY),  # "one" is no part of the video
    ("What happens the first time she appears?", Scene.ANY),
    # the recording said to start or end, or a part shown first or last
    ("How does the clip begin, visually?", Scene.FIRST),
    ("Thinking back, what did the video kick off with?", Scene.FIRST),
    ("What do we see last before the footage stops?", Scene.LAST),
    ("Right before it ends, what's on screen?", Scene.LAST),
    ("Which scene plays first in the video?", Scene.FIRST),
    ("Which scene comes first, the photo or the debate?", Scene.ANY),  # two things in order
    ("The part on at 1:05 - what shows up once it ends?", Scene.ANY),  # "it" is the part at that time
    ('A line starts with "we will win". How does it end?', Scene.ANY),  # a line ends, not the recording
    ('Complete the sentence from the video that opens with "we will win".', Scene.ANY),
]


@pytest.mark.parametrize(("question", "scene"), SCENES)
def test_the_scene_a_question_names_by_its_place(question: str, scene: Scene) -> None:
    assert read_question(question).scene is scene


def test_prior_to_is_an_order_word_looking_back() -> None:
    reading = read_question("Did the video show the photo prior to the debate?")
    assert reading.order and reading.asks_earlier and not reading.asks_later


def test_times_quotes_and_bounds() -> None:
    reading = read_question('Was the voice heard at 0:44 heard before 1:02:05, after "we will win"?')
    assert reading.times == (44.0, 3725.0) and reading.order and reading.anchored
    assert reading.quotes == ("we will win",) and reading.quoted("We will WIN") and not reading.quoted("we lost")
    assert read_question("Who says “thank you” first?").quotes == ("thank you",)
    assert read_question("How many people were seen up to 0:38?").so_far
    assert read_question("How many voices so far at 2:10?").so_far
    assert read_question("As of 2:00, has the kitchen been shown?").so_far
    assert read_question("Is the man at 0:10 in the following scene too?").asks_later
    assert read_question("Is the man at 0:10 in the next scene too?").asks_later
    assert not read_question("Is the man next to the door at 0:10 the one speaking?").asks_later  # beside
    assert not read_question("How many voices so far?").so_far  # a bound needs its time
    assert read_question("By 0:50, has the kitchen been shown?").so_far
    assert read_question("Has the kitchen appeared by the 0:50 mark?").so_far
    assert read_question("By the time we get to 0:50, has the kitchen appeared?").so_far
    assert read_question("At 0:50, have we seen the kitchen by this point?").so_far
    assert read_question("Till 0:50, how many photos were there?").so_far
    spoken_by = read_question("Is the line at 0:50 said by the man in the photo?")
    assert not spoken_by.so_far and spoken_by.moment == 50.0, "'by' before who says it is no bound"
    bounded = read_question("Has the photo of a couple been on screen at any point before 0:22?")
    assert bounded.so_far and not bounded.order, "before a time, in a yes/no question: a bound, as by is"
    assert read_question("Before 0:36, how many times does the screen go dark?").so_far
    prior = read_question("Does the dark screen with a voice show up anywhere in the video prior to 1:47?")
    assert prior.so_far and not prior.order, "prior to a time bounds as before it does"
    assert read_question("Is the photo shown prior to the debate?").order_pair == ("the photo", "the debate")
    for neighbour in ("What is shown before 0:22?", "Is anyone on screen right before 0:22?",
                      "What is shown just prior to 0:22?", "Is anyone on screen right prior to 0:22?"):
        assert read_question(neighbour).order and not read_question(neighbour).so_far, neighbour
    assert not read_question("What did Ann say about the budget?").anchored
    assert not read_question("What did Ann say about the budget?").order


@pytest.mark.parametrize(("question", "occurrence", "wears"), [
    ("When does the woman with glasses appear for the second time?", 2, "glasses"),
    ("Who wears spectacles the last time we see him?", -1, "glasses"),
    ("What does the man in eyeglasses say?", 1, "glasses"),
    ("What does the man say the third time he speaks?", 3, "any"),
    ("What time is it?", 1, "any"),
])
def test_occurrences_and_eyewear(question: str, occurrence: int, wears: str) -> None:
    reading = read_question(question)
    assert (reading.occurrence, reading.wears) == (occurrence, wears)


@pytest.mark.parametrize(("question", "dressed"), [
    ("Is the man in a dark suit with a red tie at 0:12 seen again?", "dark"),
    ("Where is the guy in the white T-shirt at 1:05?", "white"),
    ("Does the woman in a black dress speak?", "dark"),
    ("What does the young man in a blue striped shirt say?", "blue"),
    ("Is the woman with dark hair on the left?", "any"),  # hair is not clothes
    ("Who says \"a red coat\" at 0:40?", "any"),  # words quoted are not a description
    ("Does the screen go dark while a suit is discussed?", "any"),
])
def test_the_colour_of_the_clothes_a_question_describes(question: str, dressed: str) -> None:
    assert read_question(question).dressed == dressed


@pytest.mark.parametrize(("question", "person"), [
    ("Who is on screen?", True), ("Whose bag is it?", True), ("What is on screen?", False),
    ("Is the whole room lit?", False),  # "whole" is not "who"
])
def test_a_person_is_asked_for(question: str, person: bool) -> None:
    assert read_question(question).asks_person is person


def test_the_character_behind_a_name_or_description() -> None:
    from m3agent.control.people.characters import CharacterIndex

    empty = CharacterIndex({}, {})
    for question in ("Which character is Alice?", "What is the character id of the host?",
                     "Which voice is the narrator's?"):
        assert read_question(question).asks_character, question
        assert parse_query(question, empty).intent is Intent.CHARACTER_OF, question
    assert parse_query("What did the character say?", empty).intent is Intent.SEARCH


def test_phrases_are_whole_words_in_order() -> None:
    words = read_question("Up to 1:00, so far so good").words
    assert has_phrase(words, ("so", "far")) and has_phrase(words, ("up", "to"))
    assert not has_phrase(words, ("far", "so", "far")) and not has_phrase(words, ("to", "up"))
    assert read_question("Who is here?") is read_question("Who is here?")  # read once, shared


@pytest.mark.parametrize(("question", "words", "moment"), [
    ("What is said at 1:20?", True, 80.0),
    ("Around 0:40, what words does the speaker use?", True, 40.0),
    ("Quote the line spoken near 2:05.", True, 125.0),
    ("What exactly does she say at 0:12?", True, 12.0),
    ("What is the talk about at 1:20?", False, 80.0),
    ("What did Ann say about the budget?", False, None),
    ("Who says the line at 0:30?", False, 30.0),
    ('What is said right after "we will win"?', False, None),
    ("What is said right before 1:20?", True, None),
    ("What has been said so far at 1:20?", True, None),
    ("What is said between 0:10 and 0:20?", True, None),
    ("What colour is the car at 0:10?", False, 10.0),
    ("Which line do we hear at 0:40?", True, 40.0),
    ("Which sentences are spoken near 2:05?", True, 125.0),
    ("Which speaker says hello at 0:30?", False, 30.0),  # a who-question in "which" form
    ("Can you read back the line at 0:30?", True, 30.0),
])
def test_words_said_and_the_one_moment(question: str, words: bool, moment: float | None) -> None:
    reading = read_question(question)
    assert (reading.asks_words, reading.moment) == (words, moment)


@pytest.mark.parametrize(("question", "continues"), [
    ('What is said right after "we will win"?', True),
    ('Someone says "we will win". What are the next words?', True),
    ('Someone begins "we will ...". How does the sentence end?', True),
    ('Finish the line that starts "we will".', True),
    ('What comes right after "we will win"?', False),
    ('What is shown right after "we will win"?', False),
    ('Who speaks right after "we will win"?', False),
    ('When is "we will win" said?', False),
    ("What is said right after the debate?", False),
    ('Somebody starts with "we will" - how does that sentence wrap up?', True),
    ('After "we will win", what is said?', True),
    ('What happens right after someone says "we will win"?', False),  # the saying introduces the quotation
    ('What is heard right before the voice that says "we will win"?', False),
    ('Right after she says "we will win", what do we see?', False),
    ('"we will ..." - what follows in that sentence?', True),
    ('She opens with "we will" - what are the remaining words?', True),
])
def test_the_words_after_a_quotation(question: str, continues: bool) -> None:
    assert read_question(question).asks_continuation is continues


@pytest.mark.parametrize(("question", "subject"), [
    ("Between the man in the restaurant and the rap performance, does the rap performance come up first?",
     "the rap performance up first"),
    ("Comparing the photo of a couple and the debate, is the photo of a couple the earlier one?",
     "the photo of a couple the earlier one"),
    # an order joint ends the subject; the question proper's verb of showing is no part of it
    ("I can't recall the order - did the video show the photo of a couple prior to the debate?",
     "the photo of a couple"),
    ("Thinking about the order of the video, did you see the photo ahead of the debate?", "the photo"),
    # no lead-in: the subject is the first thing named; not a yes/no question: nothing asked of
    ("Is the photo of a couple shown before the debate?", ""),
    ("Between the photo and the debate, which comes first?", ""),
])
def test_the_subject_a_yes_no_question_asks_of_after_a_lead_in(question: str, subject: str) -> None:
    assert read_question(question).asked_subject == subject


@pytest.mark.parametrize(("question", "later"), [
    ("Is the photo of a lighthouse shown after the interview?", True),
    ("Does the interview come later in the video than the photo?", True),
    ("Is the photo of a lighthouse shown before the interview?", False),
    ("Does the photo come earlier in the video than the interview?", False),
    ("Is the photo of a man with a red tie before a flag shown after the debate?", True),  # "before a flag": a place
    ("Is the photo of a man shown before the flag is shown after the debate?", False),  # both ways: the usual
    ("Which comes first, the photo or the interview?", False),
])
def test_which_way_an_order_question_asks(question: str, later: bool) -> None:
    assert read_question(question).asks_later is later


@pytest.mark.parametrize(("question", "gist"), [
    ("What is the talk about at 1:20?", True),
    ("What are the two speakers discussing around 0:40?", True),
    ("What topic does the interview cover?", True),
    ("What is said at 1:20?", False),  # the words, not their gist
    ("What is the photo about?", False),  # not about speech
    ('What is "we will win" about?', False),  # a quotation
    ("Who is talking about the budget?", False),
    ("What's the talk at 1:20 concerning?", True),
    ("During the debate, what is he going on about?", True),
    ("Summary of the spoken content at 1:20?", True),
    ("What's going on at 1:20?", False),  # what happens, not what is said
    ("Sum up the talking in the dark screen with a voice.", True),
    ("Sum up the picture at 1:20.", False),  # not about speech
    # more words of a gist and of what is heard (an eleventh and a twelfth hand's phrasings, dev)
    ("What's the point of the conversation happening at 1:05?", True),
    ("Give me the main idea of the talk at roughly 1:05.", True),
    ("What topic does the narration cover around the 1:05 mark?", True),
    ("Tell me what the speech near 1:05 focuses on.", True),
    ("At timestamp 1:05, what issue is the speaker addressing?", True),
    ("The audio at 1:05 - what's it about?", True),
    ("Name the topic of what we hear at 1:05.", True),
    ("what r they on about around 1:05", True),
    ("Which subject does the speaker address at 1:05?", True),  # "which" before a gist word asks as "what"
    ("When the video reaches 1:05, what subject is the dialogue focused on?", True),  # a clause of time first
    ("What topic is covered in the split-screen debate?", True),  # an event made of speech
    ("Which speaker talks about the budget?", False),  # "which" before a person: who
    ("What is said at this point?", False),  # a point in time, not the point of a talk
    ("Any idea what is said at 1:20?", False),
    ("What is the focus of the photo?", False),  # nothing heard
    ("Was the talk at 1:05 about anything in particular? If so, what?", True),  # the yes or no goes on to "what"
    ("Was the talk at 1:05 about taxes?", False),
])
def test_a_question_about_what_speech_is_about(question: str, gist: bool) -> None:
    assert read_question(question).asks_gist is gist


@pytest.mark.parametrize(("question", "description"), [
    ("What is said during the dark screen with a voice?", "the dark screen with a voice"),
    ("During the split-screen debate, what do we hear being talked about?", "the split screen debate"),
    ("Could you tell me what gets discussed over the course of the photo of a couple?", "the of the photo of a couple"),
    ("In the split-screen debate, what's the main point of the speech?", "in the split screen debate the of the"),
    ("hey what's the talk about in the rap performance on stage", "the in the rap performance on stage"),
    ("Tell me the topic of discussion in the rap performance on stage, please.",
     "the of in the rap performance on stage"),
    ("What is said right after the dark screen?", ""),  # ordered: the scene is a neighbour, not the window
    ("What is said at 1:20?", ""),  # timed
    ('Finish the line "we will win".', ""),  # quoted
])
def test_what_a_question_is_about_without_how_it_asks(question: str, description: str) -> None:
    assert read_question(question).description == description


@pytest.mark.parametrize(("question", "order"), [
    ("What is the talk in the photo of a grey-haired man with a red tie before a flag about?", False),
    ("Tell me what the talk in the photo of a woman before a bookshelf is about.", False),
    ("Is the photo shown before a dark screen?", True),  # a screen: a thing shown
    ("Does the man in glasses appear before a woman speaks?", True),  # a word of showing before it
    ("Is the photo of two men before a photo of a couple?", True),  # a picture after it
    ("Is the interview before a speech by the senator?", True),  # something that happens
    ("What is shown before the debate?", True),  # no indefinite article: a thing of the video
    ("What happens before a cut to the studio?", True),
])
def test_before_a_thing_places_someone_in_front_of_it(question: str, order: bool) -> None:
    """ "A man with a red tie before a flag" stands in front of it: that "before" orders nothing, and the question
    keeps its description (the catalogue's photo of a man before a flag was read as an order question)."""
    reading = read_question(question)
    assert reading.order is order
    if not order:
        assert "flag" in reading.description or "bookshelf" in reading.description


def test_talked_about_is_a_gist_question() -> None:
    assert read_question("During the dark screen, what do we hear being talked about?").asks_gist


@pytest.mark.parametrize(("question", "pair"), [
    ("Order check: the woman with glasses talking indoors before the rap performance on stage?",
     ("the woman with glasses talking indoors", "the rap performance on stage")),
    ("I can't recall the order - did the video show the photo of a blonde woman prior to the close-up of a man?",
     ("the photo of a blonde woman", "the close up of a man")),
    ("Is the dark screen shown before or after the photo of two men?", ("the dark screen", "the photo of two men")),
    ("Does the photo of a man come after the dark screen?", ("the photo of a man", "the dark screen")),
    ("Does the interview come after the photo?", ("the interview", "the photo")),  # a word for talk names it
    ("Is the photo of a man with a red tie before a flag shown after the debate?",  # "before a flag": in front of
     ("the photo of a man with a red tie in front of a flag", "the debate")),
    ("Is the photo of a man shown before a flag is shown after the debate?", None),  # two joints: unclear
    ("Which comes first, the photo or the interview?", None),  # no joint
    ("Did she speak after 0:40?", None),  # nothing described after the joint
    ("Is the photo of two men shown at a later time than the dark screen?",
     ("the photo of two men", "the dark screen")),
    ("Does the photo of a couple appear after the dark screen, or is it the other way around?",
     ("the photo of a couple", "the dark screen")),  # the other answer offered: not part of what is ordered
    ("Is the debate shown before the photo of two men or vice versa?", ("the debate", "the photo of two men")),
    # an earlier or later point, moment or stage; a lead-in before the question proper; "yes or no" offered
    ("In the running order, does the dark screen appear at an earlier point than the photo of a couple?",
     ("the dark screen", "the photo of a couple")),
    ("Is the photo of two men shown at a later stage than the debate?", ("the photo of two men", "the debate")),
    ("was the photo shown earlier than the debate, yes or no?", ("the photo", "the debate")),
    ("Does the photo of a couple come earlier in the video than the debate?", ("the photo of a couple", "the debate")),
    # a word for speech in what is named names the scene
    ("Order check: the split-screen TV interview before the dark screen with a voice?",
     ("the split screen tv interview", "the dark screen with a voice")),
    ("Is the woman with glasses talking indoors shown before the photo of a couple?",
     ("the woman with glasses talking indoors", "the photo of a couple")),
    # the passive names the later thing first; "in the video" after what is named is no part of it
    ("Is the rap performance preceded by the photo of a man in the video?",
     ("the rap performance", "the photo of a man")),
    ("Is the debate followed by the photo of a couple?", ("the debate", "the photo of a couple")),
    # a verb of order sets two described things in order; from a clock time it steps from a moment
    ("Tell me whether the photo of a couple precedes the debate in the video.", ("the photo of a couple",
                                                                                "the debate")),
    ("Does the photo follow the debate?", ("the photo", "the debate")),
    ("Which segment immediately precedes the one playing at 1:05?", None),
])
def test_the_two_things_a_question_sets_in_order(question: str, pair: tuple[str, str] | None) -> None:
    assert read_question(question).order_pair == pair


@pytest.mark.parametrize(("question", "later"), [
    ("Is the rap performance preceded by the photo of a man?", True),  # A after B
    ("Is the debate followed by the photo of a couple?", False),  # A before B
    ("Does the photo follow the debate?", True),
    ("Was the photo of a couple followed by the debate, or the other way around?", False),
])
def test_an_order_in_the_passive_asks_the_other_way(question: str, later: bool) -> None:
    reading = read_question(question)
    assert (reading.asks_later, reading.asks_earlier) == (later, not later)
    assert read_question("What followed the photo at 0:20?").asks_later
    assert read_question("What preceded the photo at 0:20?").asks_earlier


@pytest.mark.parametrize(("question", "shown"), [
    ("What is the talk in the photo of a grey-haired man with a red tie before a flag about?",
     "What is the talk in the photo of a grey-haired man with a red tie in front of a flag about?"),
    ("Before 0:30, was the woman Before a bookshelf shown before a dark screen?",
     "Before 0:30, was the woman in front of a bookshelf shown before a dark screen?"),
    ("Is the photo shown before a dark screen?", "Is the photo shown before a dark screen?"),
    ("The man's beforehand remark, before a flag?", "The man's beforehand remark, in front of a flag?"),
])
def test_the_model_is_shown_a_placing_before_as_in_front_of(question: str, shown: str) -> None:
    """The plan's model reads a "before" that places someone ("a red tie before a flag") as an order in time; it is
    shown the question as the reading reads it, every other word as written."""
    assert placed_in_front(question) == shown


@pytest.mark.parametrize(("question", "later"), [
    ("What does the video cut to after the segment at 0:45?", True),
    ("I'm trying to remember what the video cuts to once the segment at 0:45 is over.", True),
    ("What does it move on to at 1:10?", True),
    ("Once the scene at 0:30 ends, what comes on?", True),
    ("How many times does the video cut to a dark screen?", False),  # a thing named: a count, not what comes next
    ("Is the man shown once the whole time?", False),  # "once" with nothing ending: one time
])
def test_moving_on_and_once_over_look_forward(question: str, later: bool) -> None:
    reading = read_question(question)
    assert reading.order is later and reading.asks_later is later and not reading.asks_earlier


def test_later_words_and_words_read_back() -> None:
    assert read_question("Is the woman at 0:10 seen again further into the video?").again_way == "after"
    assert read_question("Does the man at 0:10 turn up afterwards?").again_way == "after"
    assert not read_question("Can you read back the line at 0:30?").asks_again  # repeating words, not returning
    assert read_question("Does the man at 0:10 come back?").asks_again


def test_the_last_thing_shown_and_a_bound_from_the_start() -> None:
    assert read_question("Tell me about the last thing shown.").scene is Scene.LAST
    assert read_question("What do we see as the video draws to a close?").scene is Scene.LAST
    assert read_question("What is the first thing on screen?").scene is Scene.FIRST
    start = read_question("From the start to 1:05, how many times is the screen dark?")
    assert start.so_far and start.moment is None
    mark = read_question("Before the 1:05 mark, had the photo been shown?")
    assert mark.so_far and not mark.order


@pytest.mark.parametrize(("question", "bound"), [
    ("At 1:36, have we already been shown the dark screen with a voice? If so, when?", True),
    ("Has the photo been shown yet at 0:50?", True),
    ("Is he already talking at 0:10?", False),  # "already" of a moment
    ("Had the man at 0:10 already been seen before?", False),  # a moment looked back from
])
def test_a_perfect_already_or_yet_bounds_the_question(question: str, bound: bool) -> None:
    assert read_question(question).so_far is bound


def test_leading_up_to_looks_back_and_bounds_nothing() -> None:
    led = read_question("What did the video show in the segment leading up to the one at 0:57?")
    assert led.order and led.asks_earlier and not led.asks_later and not led.so_far
    assert read_question("What was shown up to 0:57?").so_far
    into = read_question("Which scene leads into the one at 0:57?")
    assert into.order and into.asks_earlier and not into.asks_later and not into.so_far
    ahead = read_question("Which scene came just ahead of the one at 1:53?")
    assert ahead.order and ahead.asks_earlier and not ahead.asks_later


@pytest.mark.parametrize(("question", "whether"), [
    ("When, if ever, is the speaker at 0:40 seen on screen?", True),
    ("When, if ever, before 1:22 do we hear the speaker who talks at 1:22?", True),
    ("Was the voice at 0:26 heard earlier?", True),
    ("When is the speaker at 0:40 first seen?", False),
    ("When does she ever smile?", False),
])
def test_a_when_that_allows_never_asks_whether(question: str, whether: bool) -> None:
    assert read_question(question).asks_whether is whether


@pytest.mark.parametrize(("question", "voice"), [
    ("Is the voice at 0:40 a man's?", True),
    ("Are the words at 1:00 spoken by the woman in the photo?", True),
    ("Is the man on the left heard at 0:12?", True),
    ("Is the man on the left seen at 0:12?", False),
])
def test_a_question_names_what_is_heard(question: str, voice: bool) -> None:
    assert read_question(question).names_voice is voice


@pytest.mark.parametrize(("question", "sex"), [
    ("tell me if it's a man or a woman talking at 1:02", True),
    ("Is the voice at 0:40 male or female?", True),
    ("Is the voice at 0:40 a man's or a woman's?", True),
    ("Is the speaker at 0:40 a woman or a man?", True),
    ("Is the voice at 0:40 a man's?", False),  # one sex named: yes or no
    ("Is the man or the boy on the left speaking?", False),  # two men: not the sex asked
    ("Who speaks at 1:02, the man or the woman?", False),  # "the": a choice between two people seen
])
def test_a_question_that_offers_both_sexes(question: str, sex: bool) -> None:
    assert read_question(question).asks_sex is sex


@pytest.mark.parametrize(("question", "offered"), [
    ("At 1:14, is it a photo or video?", True),
    ("Is the picture at 1:14 moving or frozen?", True),
    ("At 1:14, is a live video or a still photo shown?", True),
    ("Is the photo shown before or after the video?", False),  # an order, not a kind of picture
    ("Is the photo of a man or a woman?", False),
])
def test_a_question_that_offers_a_still_picture_and_live_video(question: str, offered: bool) -> None:
    assert read_question(question).asks_still_or_live is offered


def test_a_bounded_description_leaves_out_the_bound_the_showing_and_the_other_answer() -> None:
    read = read_question("Up to the 1:58 mark, have we seen the woman with glasses talking indoors yet or not?")
    assert read.so_far and read.bounded_description == "woman with glasses indoors"
    assert read_question("By 0:08, how many black-screen, voice-only segments?").bounded_description == \
        "black screen voice only segments"
    assert read_question("Has the photo of a couple appeared at any point up to 1:17?").bounded_description == \
        "photo a couple"  # the words of bounds ("by the time", "as of") go too
    read = read_question("I'm at 1:33 in the video - have I already seen the split-screen debate by this point?")
    assert read.so_far and read.bounded_description == "split screen debate", "the asker's clause describes nothing"
    assert read_question("We're at 1:10: has the photo of a couple come up yet?").bounded_description == \
        "photo a couple"


@pytest.mark.parametrize(("question", "way"), [
    ("Does the woman, on screen at 1:37, reappear at any later point?", "after"),
    ("The voice at 0:25: had we heard it earlier, and when?", "before"),
    ("Is the man at 0:10 seen again?", None),  # no way in time
    ("Is the man first seen at 0:10 seen again later?", "after"),  # "first" looks no way
    ("Is the man at 0:10 seen before or after 0:40?", None),  # both ways
])
def test_which_way_a_question_of_seeing_again_looks(question: str, way: str | None) -> None:
    assert read_question(question).again_way == way


@pytest.mark.parametrize(("question", "place"), [
    ("at 1:02, can you describe the right person? hair, clothes, that kind of thing", "right"),
    ("Describe the man on the left at 0:10.", "left"),
    ("At 1:51, describe the person in the right part of the picture.", "right"),
    ("Who is in the background at 0:05?", "background"),
    ("the person in the middle at 0:10, who is it?", "centre"),
    ("What does the right-hand side person wear at 0:10?", "right"),
    # offered as answers, of time, or of being correct: no one place
    ("Is the left or the right person speaking at 1:00?", None),
    ("Split screen at 0:48: left or right speaking?", None),
    ("What is shown right after 0:20?", None),
    ("What is in the middle of the video?", None),
    ("Is that right? Who talks at 0:10?", None),
])
def test_the_one_place_a_question_puts_someone_at(question: str, place: str | None) -> None:
    assert read_question(question).place == place
