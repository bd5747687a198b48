"""Scenes found by their content (:mod:`m3agent.graph.scenes`): a description read into measured terms, scenes
scored against it, and the plan's operations that use them (when, shown so far, which first, how many)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from m3agent.control.people.graph_answers import _beyond, graph_answer
from m3agent.domain import ShotRecord
from m3agent.graph.operators import EntityGraph
from m3agent.graph.scenes import SceneDescription, describe, matching_scenes, picture_span, scenes, two_scenes
from m3agent.graph.values import Appearance, Role
from test_graph_answers import plan, ref
from test_graph_operators import build


@pytest.fixture
def graph(make_store: Callable[[], Any]) -> EntityGraph:
    store = make_store()
    build(store)
    return EntityGraph(store)


@pytest.mark.parametrize(("text", "expected"), [
    ("the photo of two men side by side", SceneDescription("still", 2, ("man", "man"))),
    ("the dark screen with three voices in turn", SceneDescription("dark", 0, (), topic=("turn",), voices=3)),
    ("the screen goes black", SceneDescription("dark", 0)),
    ("the woman with dark hair pulled back",
     SceneDescription("any", None, ("woman",), topic=("dark", "hair", "pull", "back"))),
    ("the split-screen TV interview", SceneDescription("live", 2, (), topic=("interview",), split=True, event=True)),
    ("different still photos", SceneDescription("still")),
    ("dark-screen passages", SceneDescription("dark", 0)),
    ("the woman with glasses talking indoors", SceneDescription("live", None, ("woman",), True, ("indoor",),
                                                                 event=True)),
    ("the snow tubing home video", SceneDescription("live", topic=("snow", "tub", "home"))),
    ("the photo of a woman in a black dress", SceneDescription("still", None, ("woman",), clothes="dark")),
    ("the man in a white T-shirt", SceneDescription("any", None, ("man",), clothes="white")),
    ("times the video shows a still image", SceneDescription("still")),
    ("times the picture went dark with only a voice", SceneDescription("dark", 0, voices=1)),
    ("voice-only moments with a blank frame", SceneDescription("dark", 0)),
    ("a photo of a dark night", SceneDescription("still", topic=("dark", "night"))),
    ("voice-over-black moments", SceneDescription("dark", 0)),  # "over black": a film's dark screen
    ("black screens with voice only", SceneDescription("dark", 0)),  # the plural of the screen
    ("the photo over a dark table", SceneDescription("still", topic=("dark", "table"))),
    # how old someone looks: a hair colour said of hair, or an age word; a grey suit is a garment's colour
    ("the photo of a grey-haired man with a red tie", SceneDescription("still", None, ("man",), topic=("red", "tie"),
                                                                      age="older")),
    ("the photo of a young man in a blue sweater", SceneDescription("still", None, ("man",), clothes="blue",
                                                                   age="young")),
    ("the man in a grey suit", SceneDescription("any", None, ("man",), clothes="grey")),
    # a close-up frames one person; an event or an activity beside a person unfolds: live video, unless a photo
    ("the close-up of the grey-haired man with glasses", SceneDescription("any", 1, ("man",), True, age="older")),
    ("the photo of a man speaking into a microphone", SceneDescription("still", None, ("man",),
                                                                      topic=("into", "microphone"), event=True)),
    ("the Oval Office meeting", SceneDescription(topic=("oval", "office", "meet"), event=True)),  # nothing implied
    ("the photo of two women and a man", SceneDescription("still", 3, ("woman", "woman", "man"))),
    ("the meeting of men", SceneDescription("live", 2, ("man", "man"), topic=("meet",), event=True)),
    ("the rap performance on stage", SceneDescription(topic=("rap", "performance", "stage"), event=True)),
])
def test_a_description_in_measured_terms(text: str, expected: SceneDescription) -> None:
    assert describe(text) == expected


def test_scenes_run_from_cut_to_cut_and_fit_their_description(graph: EntityGraph) -> None:
    assert [(g[0].start_s, g[-1].end_s) for g in scenes(graph, "v1")] == [(0.0, 12.0), (12.0, 48.0), (48.0, 60.0)]
    spans = {text: [(s.start_s, s.end_s) for s in matching_scenes(graph, "v1", describe(text))]
             for text in ("the dark screen with a voice", "the two people side by side", "the part with the chair",
                          "the photo of a lighthouse")}
    assert spans["the dark screen with a voice"] == [(48.0, 60.0)]
    assert spans["the two people side by side"] == [(0.0, 12.0)]
    assert spans["the part with the chair"] == [(12.0, 48.0)]
    assert spans["the photo of a lighthouse"] == []  # nothing measured says still, no word is found: no guess
    assert matching_scenes(graph, "v1", describe("the")) == []


@pytest.mark.parametrize(("kind", "expected"), [("still", [(48.0, 60.0)]), ("uncertain", [(48.0, 60.0)]),
                                              ("live", [])])
def test_a_moving_picture_with_no_face_found_is_no_dark_screen(make_store: Callable[[], Any], kind: str,
                                                                expected: list[tuple[float, float]]) -> None:
    """Nobody on screen is a dark screen only when the picture stands still: a live shot where the detector found
    no face (a stage, a crowd far off) is not one."""
    store = make_store()
    build(store, shots=[ShotRecord("v1", 1, 48.0, 60.0, True, kind, 0.9)])
    found = matching_scenes(EntityGraph(store), "v1", describe("the dark screen with a voice"))
    assert [(s.start_s, s.end_s) for s in found] == expected


def test_the_plan_asks_about_described_scenes(graph: EntityGraph) -> None:
    dark, two = ref(about="the dark screen with a voice"), ref(about="the two people side by side")
    first = graph_answer(graph, "v1", plan("Is the dark screen with a voice shown before the two people side by side?",
                                           "which_first", dark, two))
    assert first is not None and first.text.startswith("No: the two people side by side (0:00–0:12) comes first")
    later = graph_answer(graph, "v1", plan("Is the dark screen with a voice shown after the two people side by side?",
                                           "which_first", dark, two))
    assert later is not None and later.text.startswith("Yes: the two people side by side (0:00–0:12) comes first")
    earlier = graph_answer(graph, "v1", plan("Do the two people side by side come earlier than the dark screen with "
                                             "a voice?", "which_first", two, dark))
    assert earlier is not None and earlier.text.startswith("Yes: the two people side by side")
    # a lead-in names the two things, the question proper asks of the second: the model's order is not the asked one
    led = graph_answer(graph, "v1", plan("Between the two people side by side and the dark screen with a voice, does "
                                         "the dark screen with a voice come up first?", "which_first", two, dark))
    assert led is not None and led.text.startswith("No: the two people side by side (0:00–0:12) comes first")
    which = graph_answer(graph, "v1", plan("Which comes first, the dark screen with a voice or the two people side "
                                           "by side?", "which_first", dark, two))
    assert which is not None and which.text.startswith("The two people side by side (0:00–0:12) comes first")
    when = graph_answer(graph, "v1", plan("When is the dark screen with a voice shown?", "when", dark))
    assert when is not None and when.text == "The dark screen with a voice is shown at 0:48–1:00."
    not_yet = graph_answer(graph, "v1", plan("By 0:40, has the dark screen with a voice been shown yet?", "when",
                                             {**dark, "time": "0:40"}))
    assert not_yet is not None and not_yet.text.startswith("No: the dark screen with a voice is not shown before "
                                                           "0:40; it is first shown at 0:48–1:00")
    shown = graph_answer(graph, "v1", plan("Up to 0:50, did the video include the dark screen with a voice?", "when",
                                           {**dark, "time": "0:50"}))
    assert shown is not None and shown.text.startswith("Yes") and shown.memory_ids
    bounded = graph_answer(graph, "v1", plan("Up to 0:40, did the video include the dark screen with a voice?",
                                             "which_first", dark, ref(time="0:40")))
    assert bounded is not None and bounded.text.startswith("No: the dark screen with a voice is not shown before")
    alone = graph_answer(graph, "v1", plan("When is the dark screen with a voice first shown?", "which_first", dark))
    assert alone is not None and alone.text == "The dark screen with a voice is shown at 0:48–1:00."
    count = graph_answer(graph, "v1", plan("How many times is the dark screen with a voice shown?", "count_scenes",
                                           dark))
    assert count is not None and count.text.startswith("One: the dark screen with a voice at 0:48–1:00")
    unchecked = plan("Is the photo of a lighthouse shown before the dark screen?", "which_first",
                     ref(kind="photo", about="a photo of Paris"), dark)
    assert unchecked.person.about == "the photo of a lighthouse", "the model's words dropped, the question's taken"


@pytest.mark.parametrize(("kinds", "spans"), [
    (("live", "live", "live"), [(0.0, 60.0)] * 3),  # camera cuts within one recording
    (("still", "still", "still"), [(0.0, 12.0), (12.0, 48.0), (48.0, 60.0)]),  # another photo, another picture
    (("live", "live", "still"), [(0.0, 48.0), (0.0, 48.0), (48.0, 60.0)]),
])
def test_the_picture_shown_at_a_moment_ends_where_a_still_begins_or_ends(
        make_store: Callable[[], Any], kinds: tuple[str, str, str], spans: list[tuple[float, float]]) -> None:
    store = make_store()
    build(store, shots=[ShotRecord("v1", 0, 0.0, 12.0, True, kinds[0], 0.9),
                        ShotRecord("v1", 0, 12.0, 30.0, True, kinds[1], 0.9),
                        ShotRecord("v1", 1, 30.0, 48.0, False, kinds[1], 0.9),
                        ShotRecord("v1", 1, 48.0, 60.0, True, kinds[2], 0.9)])
    graph = EntityGraph(store)
    assert [picture_span(graph, "v1", t) for t in (5.0, 40.0, 55.0)] == spans


def test_a_voice_heard_on_from_the_photo_before_was_heard_earlier() -> None:
    """"The voice at 0:20 - heard before?": it went on from 0:00 under another photo, so yes, at 0:00-0:12; what it
    said from another moment of the same picture is no earlier time."""
    voice = Appearance("v1", 0.0, 22.0, Role.VOICE)
    assert _beyond([voice], (12.0, 22.0)) == [Appearance("v1", 0.0, 12.0, Role.VOICE)]
    assert _beyond([voice], (0.5, 22.0)) == []  # half a second over the cut: the same picture's voice
    assert _beyond([voice], (1.5, 22.0)) == []  # a cut found at 2 fps, a padded speech segment: still this picture's
    assert _beyond([voice], None) == []


def test_two_things_set_in_order_are_two_scenes(graph: EntityGraph) -> None:
    """"The man" fits the scenes at 0:00 and 0:12 alike, "the two people side by side" only the one at 0:00: in an
    order question the two are different scenes, so the man is the one at 0:12 and comes second."""
    man, two = describe("the man"), describe("the two people side by side")
    found = two_scenes(graph, "v1", man, two)
    assert found is not None and [s.start_s for s in found] == [12.0, 0.0]
    assert two_scenes(graph, "v1", two, describe("two people")) is None  # one scene for both: no order to tell
    order = graph_answer(graph, "v1", plan("Is the man shown before the two people side by side?", "which_first",
                                           ref(about="the man"), ref(about="the two people side by side")))
    assert order is not None and order.text.startswith("No: the two people side by side (0:00–0:12) comes first")


def test_an_operation_the_question_rules_out_is_replaced() -> None:
    ended = plan("Could you tell me what the video finishes on?", "when", ref())
    assert ended.ask == "scene" and ended.person.scene == "last"
    how = plan("How does the video end?", "when", ref())
    assert how.ask == "scene" and how.person.scene == "last"
    last = plan("Do you remember what's on screen in the very last scene of the video?", "recall", ref())
    assert last.ask == "scene" and last.person.scene == "last"
    talk = plan("What do they talk about in the last scene?", "recall", ref())
    assert talk.ask == "recall", "the talk in the scene: the memories' lines, not the picture"
    seen = plan("Could you tell me what we see on screen at 0:51?", "seen_again", ref(kind="person", time="0:51"))
    assert seen.ask == "scene", "what the picture holds at that moment: its shot"
    before = plan("Had whoever talks at 1:00 already spoken before that moment?", "same_person",
                  ref(kind="speaker", time="1:00"))
    assert (before.ask, before.direction) == ("seen_again", "before")
    following = plan("Scene following 0:04?", "scene", ref(time="0:04"))
    assert (following.ask, following.direction) == ("after", "after")
    preceding = plan("The scene immediately preceding 0:35?", "scene", ref(time="0:35"))
    assert (preceding.ask, preceding.direction) == ("before", "before")
    at = plan("What is the scene at 0:35?", "scene", ref(time="0:35"))
    assert at.ask == "scene"
    asked = plan("Speaker at 1:39 - is it the smiling woman in the photo?", "speaks", ref(kind="speaker", time="1:39"),
                 ref(kind="photo", about="the smiling woman in the photo"))
    assert asked.ask == "speaks" and asked.other is None
    person = asked.person
    assert (person.kind, person.time_s, person.about) == ("photo", 99.0, "the smiling woman in the photo")
    alone = plan("Does the man speaking into a microphone at 1:53 talk?", "speaks", ref(kind="speaker", time="1:53"))
    assert (alone.person.kind, alone.person.time_s) == ("person", 113.0)
    talking = plan("Is the woman in red at 1:00 actually the one doing the talking?", "same_person",
                   ref(kind="woman", time="1:00"))
    assert talking.ask == "speaks"  # one person and no order word: whether she is the speaker
    again = plan("Is the woman in red at 1:00 the same one we see later?", "same_person",
                 ref(kind="woman", time="1:00"))
    assert (again.ask, again.direction) == ("seen_again", "after")
    two = plan("Is the speaker at 1:00 the one at 1:10?", "same_person", ref(kind="speaker", time="1:00"),
               ref(kind="speaker", time="1:10"))
    assert two.ask == "same_person"
    kept = plan("Is the man at 0:10 seen again later?", "seen_again", ref(kind="man", time="0:10"))
    assert kept.ask == "seen_again"
    asked_when = plan("What time is the dark screen first shown?", "when", ref(about="the dark screen"))
    assert asked_when.ask == "when"
    heard_before = plan("Was the voice at 0:26 already heard earlier in the video, and when?", "when",
                        ref(kind="speaker", time="0:26"))
    assert (heard_before.ask, heard_before.direction) == ("seen_again", "before")
    if_ever = plan("When, if ever, before 1:22 do we hear the speaker who talks at 1:22?", "when",
                   ref(kind="speaker", time="1:22"))
    assert (if_ever.ask, if_ever.direction) == ("seen_again", "before")  # whether, then when; one moment twice
    when_heard = plan("When is the voice at 0:26 heard?", "when", ref(kind="speaker", time="0:26"))
    assert when_heard.ask == "when"  # not a yes/no question
    by_then = plan("By 0:40, has the man at 0:10 been seen before?", "when", ref(kind="man", time="0:10"))
    assert by_then.ask == "when"  # two times: a bound, not one moment


def test_the_plan_is_checked_against_the_reading_for_scenes(graph: EntityGraph) -> None:
    last = plan("What is the last scene of the video?", "scene", ref(about="the last scene of the video"))
    assert last.person.scene == "last" and last.person.about == ""  # the reading names the scene; no description
    order = graph_answer(graph, "v1", plan("Is the dark screen with a voice shown before the two people side by "
                                           "side?", "before", ref(about="the dark screen with a voice"),
                                           ref(about="the two people side by side")))
    assert order is not None and order.text.startswith("No: the two people side by side (0:00–0:12) comes first")


def test_plain_recalls_the_question_form_reads_as_order_or_neighbour(graph: EntityGraph) -> None:
    ordered = plan("Order check: the dark screen with a voice before the two people side by side?", "recall",
                   ref(kind="person", quote="the dark screen with a voice before the two people side by side"))
    assert ordered.ask == "which_first"
    answer = graph_answer(graph, "v1", ordered)
    assert answer is not None and answer.text.startswith("No: the two people side by side (0:00–0:12) comes first"), \
        "an order check asks yes or no"
    said = plan("What is said before the dark screen with a voice?", "recall", ref(about="the dark screen"))
    assert said.ask == "recall", "a what question is not an order check"
    led = plan("Could you tell me what the video showed in the segment leading up to the one at 0:50?", "recall",
               ref(time="0:50", about="the segment leading up to the one at 0:50"))
    assert (led.ask, led.direction, led.person.time_s, led.person.about) == ("before", "before", 50.0, "")
    talk = plan("What was said leading up to 0:50?", "recall", ref(time="0:50"))
    assert talk.ask == "recall", "the words said, not the shot"
    for ask, person, other in (("after", ref(kind="person", about="the dark screen with a voice"), None),
                               ("which_first", ref(about="the dark screen with a voice before the two people"), None),
                               ("scene", ref(), None)):
        asked = plan("Order check: the dark screen with a voice before the two people side by side?", ask, person,
                     other)
        assert (asked.ask, asked.person.about, asked.other and asked.other.about) == \
            ("which_first", "the dark screen with a voice", "the two people side by side"), ask
    earlier = plan("Does the dark screen with a voice come earlier in the video than the two people side by side?",
                   "seen_again", ref(about="the dark screen with a voice"))
    assert (earlier.ask, earlier.person.about, earlier.other and earlier.other.about) == \
        ("which_first", "the dark screen with a voice", "the two people side by side"), "no word of returning"
    again = plan("Is the man on the left seen again after the dark screen with a voice?", "seen_again",
                 ref(kind="man", place="left"))
    assert again.ask == "seen_again", "seen once more: a person, not an order of two things"
    two = plan("Is the man on the left shown before the dark screen with a voice?", "which_first",
               ref(kind="man", place="left"), ref(about="the dark screen with a voice"))
    assert two.person.kind == "man" and two.person.place == "left", "the model's two references stay"


def test_a_person_described_with_their_scene_so_far_is_the_scene(graph: EntityGraph) -> None:
    asked = plan("As of 0:55, the woman talking on a dark screen shown yet?", "when",
                 ref(kind="woman", time="0:55", about="the woman talking on a dark screen"))
    assert asked.person.kind == "none"
    shown = graph_answer(graph, "v1", asked)
    assert shown is not None and shown.text.startswith("Yes")
    person = plan("As of 0:55, the woman shown yet?", "when", ref(kind="woman", time="0:55", about="the woman"))
    assert person.person.kind == "woman", "who she is, nothing of a scene: the person"
    seen = plan("Has the woman talking on a dark screen come up at any point up to 0:55?", "seen_again",
                ref(kind="woman", time="0:55", about="the woman talking on a dark screen"))
    assert (seen.ask, seen.person.kind) == ("when", "none"), "planned as seen again: whether the scene came by then"
    again = plan("Up to 0:55, is the woman talking on a dark screen seen again?", "seen_again",
                 ref(kind="woman", time="0:55", about="the woman talking on a dark screen"))
    assert (again.ask, again.person.kind) == ("seen_again", "woman"), "seen again asks of the person"


def test_a_scene_bounded_so_far_is_asked_whatever_operation_the_model_wrote(graph: EntityGraph) -> None:
    dark = ref(about="the dark screen with a voice", time="0:50")
    for ask in ("ever_seen", "seen_again", "which_first", "recall"):
        for question in ("Up to 0:50, did the video include the dark screen with a voice?",
                         "Has the dark screen with a voice been on screen at any point before 0:50?"):
            shown = graph_answer(graph, "v1", plan(question, ask, dark))
            assert shown is not None and shown.text.startswith("Yes"), (ask, question)
    counted = graph_answer(graph, "v1", plan("Up to 0:50, how many times was the dark screen with a voice shown?",
                                             "count_scenes", dark))
    assert counted is not None and not counted.text.startswith("Yes"), "a count stays a count"
    said = plan("Up to 0:50, what was said during the dark screen with a voice?", "recall", dark)
    assert graph_answer(graph, "v1", said) is None, "not a yes-or-no question: the memories answer it"


def test_the_shot_at_a_moment_is_described_for_the_answer_the_memories_lacked(graph: EntityGraph) -> None:
    from m3agent.control.people.graph_answers import moment_scene

    asked = plan("What is happening at 0:03?", "recall", ref(time="0:03"))
    described = moment_scene(graph, "v1", asked, 3.0)
    assert described is not None and described.text.startswith("The 0:03 scene (0:00–0:12")
    assert described.memory_ids, "it cites the shot it describes"


def test_seen_again_in_a_question_of_one_moment_asks_who_is_there_or_whose_voice() -> None:
    anyone = plan("At 0:59, can you see a person?", "seen_again", ref(kind="person", time="0:59"))
    assert anyone.ask == "anyone_there"
    voice = plan("Speaker at 1:28 visible on screen anywhere? When?", "seen_again", ref(kind="speaker", time="1:28"))
    assert voice.ask == "ever_seen"
    again = plan("At 0:59, is the person there seen again?", "seen_again", ref(kind="person", time="0:59"))
    assert again.ask == "seen_again"
    back = plan("Does the speaker at 1:28 come back?", "seen_again", ref(kind="speaker", time="1:28"))
    assert back.ask == "seen_again"
    described = plan("At 0:59, can you see the woman in red?", "seen_again", ref(kind="woman", time="0:59"))
    assert described.ask == "seen_again", "a described person is not anyone"


def test_a_described_scene_not_shown_by_a_bound_counts_zero(graph: EntityGraph) -> None:
    asked = plan("By 0:40, how many times has the screen gone dark with only a voice?", "count_scenes",
                 ref(about="the screen gone dark with only a voice", time="0:40"))
    counted = graph_answer(graph, "v1", asked)
    assert counted is not None
    assert counted.text == "Zero: the screen gone dark with only a voice is not shown before 0:40."
    assert counted.memory_ids, "it cites the window it looked through"


@pytest.mark.parametrize("question", ["Voice at 0:39: heard earlier? If so, when?",
                                      "That voice at 0:34 - did we hear it earlier on? When?",
                                      "Is the speaker at 0:34 seen later in the video?"])
def test_a_voice_asked_about_another_time_stays_seen_again(question: str) -> None:
    asked = plan(question, "seen_again", ref(kind="voice", time=question.split(" at ")[1][:4]))
    assert asked.ask == "seen_again"


def test_a_count_of_scenes_describes_them_in_the_questions_words_not_as_the_video() -> None:
    """The model wrote "the video" (the recording, every live scene) for what "how many still images does the
    video show, not counting repeats?" counts: the description is the question's, and repeats count once."""
    counted = plan("How many still images does the video show, not counting repeats?", "count_scenes",
                   ref(about="the video"))
    assert counted.person.about == "a still picture" and counted.distinct
    assert describe(counted.person.about).shown == "still"
    kept = plan("How many times is the dark screen with a voice shown?", "count_scenes",
                ref(about="the dark screen with a voice"))
    assert kept.person.about == "the dark screen with a voice", "a description of the model's own stays"


def test_a_count_so_far_of_a_scene_the_model_left_undescribed(graph: EntityGraph) -> None:
    """"By 0:40, how many stretches where the screen is dark?": the bound is no part of what is counted; the count
    is of the picture the question describes, named as perception measures it."""
    asked = plan("I'm keeping track - by the 0:40 mark, how many stretches have there been where the screen is dark "
                 "and you only hear a voice?", "count_scenes", ref(time="0:40"))
    assert (asked.person.about, asked.person.time_s, asked.so_far) == ("a dark screen", 40.0, True)
    counted = graph_answer(graph, "v1", asked)
    assert counted is not None and counted.text == "Zero: a dark screen is not shown before 0:40."
    later = graph_answer(graph, "v1", plan("Up to 0:59, how many dark-screen passages have there been?",
                                           "count_scenes", ref(time="0:59")))
    assert later is not None and later.text.startswith("One: a dark screen at 0:48–1:00")


@pytest.mark.parametrize(("question", "ask", "person", "wanted"), [
    ("What's on screen at 0:51?", "recall", ref(time="0:51"), "scene"),
    ("What is shown at 0:51?", "anyone_there", ref(kind="person", time="0:51"), "scene"),
    ("What do we see at 0:51?", "recall", ref(time="0:51"), "scene"),
    ("What colour shirt is shown at 0:51?", "recall", ref(time="0:51"), "recall"),
    ("What is said at 0:51?", "recall", ref(time="0:51"), "recall"),
    ("Describe the ending of the video.", "recall", ref(), "scene"),
    ("Which scene plays first in the video?", "which_first", ref(), "scene"),  # one scene named: nothing to order
    ("Tell me about the beginning of the video.", "recall", ref(), "scene"),
    ("Which scene follows the one at 1:08?", "which_first", ref(time="1:08"), "after"),
    ("What precedes the scene at 0:35?", "which_first", ref(time="0:35"), "before"),
    ("How many voices can be heard in the scene at 0:49?", "count_so_far", ref(time="0:49"), "count_people"),
    ("Up to 0:49, how many voices have been heard?", "count_so_far", ref(time="0:49"), "count_so_far"),
    ("Do you recall whether the speaker at 0:05 is anyone you see in the video?", "recall",
     ref(kind="voice", time="0:05"), "ever_seen"),
    ("Does the voice at 0:05 belong to someone who is ever on camera?", "recall", ref(kind="voice", time="0:05"),
     "ever_seen"),
    ("Do you recall what the speaker at 0:05 says?", "recall", ref(kind="voice", time="0:05"), "recall"),
    # "ever seen" asks of a voice: of nobody heard at one moment, it is whether anyone is there
    ("Do you remember if anyone could be seen in the picture at 1:32?", "ever_seen", ref(time="1:32"),
     "anyone_there"),
    ("Is the voice at 1:32 the voice of anyone seen on screen?", "ever_seen", ref(time="1:32"), "ever_seen"),
    ("Is the speaker at 0:05 seen again later?", "recall", ref(kind="voice", time="0:05"), "seen_again"),
    ("The man on the left is on screen at 0:34. Is there another scene with him later?", "recall",
     ref(kind="man", place="left", time="0:34"), "seen_again"),
    ("At 1:14, is the picture a photo or video?", "recall", ref(time="1:14"), "still_or_live"),
    ("What does the video cut to once the segment at 0:45 is over?", "recall", ref(time="0:45"), "after"),
    ("At 0:10, could you tell me whether the one talking is on the left side or the right side?", "position",
     ref(kind="speaker", time="0:10"), "who_speaks"),  # the place of whoever speaks: who speaks, named by place
    ("At 0:10, is the man in a dark suit on the left or the right?", "position", ref(kind="man", time="0:10"),
     "position"),
    ("When the screen splits at 0:12, does the talking come from the left panel or the right panel?", "recall",
     ref(time="0:12"), "who_speaks"),
    ("At 0:12, what does the person on the left or the right say?", "recall", ref(time="0:12"), "recall"),
    ("Is the speaker at 0:05 among the people who appear on camera?", "anyone_there", ref(time="0:05"), "ever_seen"),
    ("At 0:05, is anyone on camera?", "anyone_there", ref(time="0:05"), "anyone_there"),
])
def test_the_operation_the_questions_form_leaves(question: str, ask: str, person: dict[str, str],
                                                 wanted: str) -> None:
    """A plan the question's own form rules out is replaced by the one it leaves: what the picture holds at a moment
    is its shot; the end or the beginning of the video is that scene; a scene that follows or precedes one moment is
    its neighbour, not one of two things in order; a count with no bound is of that moment."""
    assert plan(question, ask, person).ask == wanted


def test_a_question_of_looks_is_of_someone_seen_whatever_kind_the_model_wrote() -> None:
    looks = plan("What does the right person at 1:02 look like?", "appearance",
                 ref(kind="speaker", place="right", time="1:02"))
    assert (looks.ask, looks.person.kind, looks.person.place) == ("appearance", "person", "right")
    voice = plan("What does the voice at 1:02 sound like?", "appearance", ref(kind="voice", time="1:02"))
    assert voice.person.kind == "voice", "a voice named: the voice"


def test_whether_one_person_talks_at_two_moments_is_the_same_person() -> None:
    asked = plan("Is it one person talking both at 0:04 and at 1:36?", "speaks", ref(kind="person", time="0:04"),
                 ref(kind="speaker", time="1:36"))
    assert asked.ask == "same_person"
    offered = plan("0:04 and 1:36: one speaker or two different ones?", "speaks", ref(kind="speaker", time="0:04"),
                   ref(kind="speaker", time="1:36"))
    assert offered.ask == "same_person"
    assert (asked.person.kind, asked.person.time_s, asked.other and asked.other.kind,
            asked.other and asked.other.time_s) == ("speaker", 4.0, "speaker", 96.0)
    one = plan("At 1:36, is it the woman in red who is talking?", "speaks", ref(kind="woman", time="1:36"))
    assert one.ask == "speaks", "one moment: whether she speaks"


def test_whether_the_voice_is_the_described_persons_is_whether_they_speak() -> None:
    asked = plan("At 1:00, is the voice we hear coming from the smiling woman in the photo?", "recall",
                 ref(kind="voice", time="1:00"))
    assert (asked.ask, asked.person.kind, asked.person.time_s) == ("speaks", "photo", 60.0)
    words = plan("At 1:53, are the words coming from the blonde woman in a striped shirt in the photo, or from "
                 "somebody else?", "recall", ref(kind="none", time="1:53"))
    assert (words.ask, words.person.kind, words.person.time_s) == ("speaks", "photo", 113.0)
    apart = plan("Is the speech at 0:14 coming from the smiling woman in a black dress in the photo?", "recall",
                 ref(kind="speaker", time="0:14"), ref(kind="photo"))
    assert (apart.ask, apart.person.kind, apart.person.time_s, apart.other) == ("speaks", "photo", 14.0, None)
    man = plan("Is the man in a grey suit talking at 0:40?", "recall", ref(kind="voice", time="0:40"))
    assert (man.ask, man.person.kind) == ("speaks", "man")
    said = plan("At 1:00, is the voice saying something about money?", "recall", ref(kind="voice", time="1:00"))
    assert said.ask == "recall", "no one described: what the voice says"
    again = plan("Is the voice at 1:00 the woman's we heard earlier?", "recall", ref(kind="voice", time="1:00"))
    assert (again.ask, again.direction) == ("seen_again", "before"), "another time asked about: whether heard then"


def test_a_question_of_what_speech_is_about_recalls_it_whatever_the_order_the_model_read() -> None:
    asked = plan("What topic comes up in the talk around 1:05?", "which_first", ref(kind="voice", time="1:05"))
    assert asked.ask == "recall"
    ordered = plan("What is the talk about right after 1:05?", "after", ref(time="1:05"))
    assert ordered.ask == "after", "an order word: the neighbour's talk"


def test_a_yes_no_question_of_a_voice_at_another_time_is_seen_again_not_the_neighbour() -> None:
    asked = plan("Was the man talking at 1:12 heard at some earlier point? When?", "before",
                 ref(kind="speaker", time="1:12"))
    assert (asked.ask, asked.direction) == ("seen_again", "before")
    later = plan("Does the woman at 0:30 show up at a later point?", "after", ref(kind="woman", time="0:30"))
    assert (later.ask, later.direction) == ("seen_again", "after")
    shown = plan("What comes right before the scene at 1:12?", "before", ref(time="1:12"))
    assert shown.ask == "before", "a what-question asks for the neighbour"


def test_a_voice_over_a_described_picture_so_far_is_when_that_picture_is_shown() -> None:
    asked = plan("Till 1:05, has the black screen with someone talking over it been shown?", "ever_seen",
                 ref(kind="voice", time="1:05"))
    assert (asked.ask, asked.person.kind) == ("when", "none") and "black screen" in asked.person.about
    voice = plan("Till 1:05, has the man with a deep voice been heard?", "ever_seen", ref(kind="voice", time="1:05"))
    assert voice.ask == "ever_seen", "a voice described by how it sounds stays a voice"


def test_what_the_model_leaves_out_of_a_scene_the_question_still_says(graph: EntityGraph) -> None:
    """A so-far question planned as whether a person was seen, with no description written, is the scene the
    question describes; a count of voices written with the picture they are heard over counts that picture; a
    question offering both sexes for a voice asks what the voice sounds like."""
    asked = plan("Up to 0:55, have we seen the woman talking on a dark screen yet or not?", "seen_again",
                 ref(kind="woman", time="0:55"))
    assert (asked.ask, asked.person.kind, asked.person.about) == ("when", "none", "woman on a dark screen")
    shown = graph_answer(graph, "v1", asked)
    assert shown is not None and shown.text.startswith("Yes")
    plain = plan("Up to 0:55, have we seen the woman yet?", "seen_again", ref(kind="woman", time="0:55"))
    assert plain.person.kind == "woman", "who she is, nothing of a scene: the person"
    counted = plan("How many black-screen, voice-only segments have there been by 0:50?", "count_scenes",
                   ref(kind="voice", time="0:50", about="black-screen, voice-only segments"))
    assert (counted.person.kind, counted.person.about) == ("none", "a dark screen")
    one = graph_answer(graph, "v1", counted)
    assert one is not None and one.text.startswith("One: a dark screen at 0:48")
    earlier = plan("How many black-screen, voice-only segments have there been by 0:40?", "count_scenes",
                   ref(kind="voice", time="0:40", about="black-screen, voice-only segments"))
    zero = graph_answer(graph, "v1", earlier)
    assert zero is not None and zero.text.startswith("Zero")
    voices = plan("How many voices have been heard by 0:50?", "count_so_far", ref(kind="voice", time="0:50"))
    assert voices.person.kind == "voice", "no picture described: the voices are counted"
    pitch = plan("Tell me if it's a man or a woman talking at 0:30.", "who_speaks", ref(kind="speaker", time="0:30"))
    assert pitch.ask == "voice_pitch"
    who = plan("Who is talking at 0:30, the man or the woman?", "who_speaks", ref(kind="speaker", time="0:30"))
    assert who.ask == "who_speaks"


@pytest.mark.parametrize(("text", "age"), [
    ("a grey-haired man", "older"), ("the man with white hair", "older"), ("the elderly woman", "older"),
    ("a young man in a blue sweater", "young"), ("the man in a grey suit", "any"), ("a white T-shirt", "any"),
    ("a 10-year-old boy", "any"), ("the middle-aged woman", "any"),
])
def test_how_old_a_description_says_someone_looks(text: str, age: str) -> None:
    from m3agent.graph.fits import age_named
    from m3agent.text import words

    assert age_named(words(text.replace("-", " ")))[0] == age


def test_age_and_voices_tell_apart_scenes_that_fit_alike(make_store: Callable[[], Any]) -> None:
    """Two people side by side at 0:00-0:12: described as older, the scene fits only once someone in it is measured
    older (unmeasured, it is not contradicted); one voice against several ranks dark screens that fit alike."""
    from m3agent.domain import Clip, EntityAttribute

    store = make_store()
    ids = build(store)
    older = describe("the two grey-haired people side by side")
    assert [(s.start_s, s.end_s) for s in matching_scenes(EntityGraph(store), "v1", older)] == [(0.0, 12.0)]
    with store.clip(Clip("v1", 2, 60.0, 61.0)) as w:
        w.add_attribute(EntityAttribute(ids["a"], "v1", 2, "apparent_age", "31", 0.9, 3))
        w.add_attribute(EntityAttribute(ids["b"], "v1", 2, "apparent_age", "44", 0.9, 3))
    assert matching_scenes(EntityGraph(store), "v1", older) == [], "both measured under 50: contradicted"
    young = describe("the two young people side by side")
    assert [(s.start_s, s.end_s) for s in matching_scenes(EntityGraph(store), "v1", young)] == [(0.0, 12.0)]
    one = matching_scenes(EntityGraph(store), "v1", describe("the dark screen with a voice"))
    many = matching_scenes(EntityGraph(store), "v1", describe("the dark screen with three voices"))
    assert [(s.start_s, s.end_s) for s in one] == [(48.0, 60.0)] and one[0].fit > many[0].fit


def test_an_or_between_a_person_and_someone_else_sets_nothing_in_order() -> None:
    """The model reads "X or someone else" as a choice between two things shown; a yes/no question of one moment
    with no word of order asks whether X speaks."""
    asked = plan("At 0:41, is the voice coming from the man in the photo or from someone else?", "which_first",
                 ref(kind="photo", time="0:41"), ref(kind="person"))
    assert (asked.ask, asked.other) == ("speaks", None)
    ordered = plan("Is the man in the photo shown before the dark screen?", "which_first", ref(about="the photo"),
                   ref(about="the dark screen"))
    assert ordered.ask == "which_first"
    first = plan("When is the dark screen first shown?", "which_first", ref(about="the dark screen"))
    assert first.ask == "which_first", "no moment: left as planned"


def test_a_photo_reference_describes_a_still_and_a_close_up_is_a_scene() -> None:
    from m3agent.graph.scenes import describe_as

    assert describe("the man talking into a microphone").shown == "live"  # an activity said of a person
    assert describe_as("the man talking into a microphone", "photo").shown == "still"
    assert describe_as("the dark screen", "photo").shown == "dark"
    close = plan("Has the close-up of the grey-haired man with glasses appeared at any point up to 0:55?", "ever_seen",
                 ref(kind="man", time="0:55", about="the close-up of the grey-haired man with glasses"))
    assert (close.ask, close.person.kind) == ("when", "none"), "a close-up is a scene, though no topic word is left"


def test_a_split_screen_is_said_of_its_shot_and_read_from_a_description() -> None:
    from m3agent.control.people.words import shot_kind
    from m3agent.graph.values import ShotView

    split = ShotView("v", 0, 0.0, 13.0, True, "a split screen; on screen <face_1>", (), kind="live", split_screen=True)
    assert shot_kind(split) == "live video, a split screen"
    assert shot_kind(ShotView("v", 1, 13.0, 20.0, True, "", (), kind="still")) == "a still picture"
    assert describe("the split-screen debate").split and describe("the split-screen debate").people == 2
    assert not describe("the photo of two men").split


def test_an_event_is_found_by_the_sounds_it_makes(make_store: Callable[[], Any]) -> None:
    """No model sees a stage, but a performance is heard: music and rapping in a shot's sounds attest "the rap
    performance on stage" (two of its three words); the scene with a chair attests nothing of it. A question of
    what is said there names the scene by the event alone, and the camera's cuts within it leave it one stretch; a
    person's look alone names no scene."""
    from m3agent.control.people.spoken import described_scenes
    from m3agent.control.reading import read_question
    from m3agent.domain import Clip, Memory, MemoryKind
    from m3agent.text import clock
    from test_graph_operators import PROVENANCE, random_vector

    store = make_store()
    build(store)
    with store.clip(Clip("v1", 2, 60.0, 80.0)) as w:
        for start, end in ((60.0, 72.0), (72.0, 80.0)):
            text = f"Shot {clock(start)}–{clock(end)} (after a scene change): sounds: music, rapping."
            w.add_memory(Memory(kind=MemoryKind.EPISODIC, text=text, video_id="v1", clip_index=2, start_s=start,
                                end_s=end, provenance=PROVENANCE, embedding=random_vector(text)))
    graph = EntityGraph(store)
    for said in ("the rap performance on stage", "the concert"):
        found = matching_scenes(graph, "v1", describe(said))
        assert [(s.start_s, s.end_s) for s in found] == [(60.0, 72.0), (72.0, 80.0)], said
    assert matching_scenes(graph, "v1", describe("the ceremony")) == []
    found = described_scenes(graph, "v1", read_question("What is said during the rap performance on stage?"), None)
    assert [(s.start_s, s.end_s) for s in found] == [(60.0, 80.0)]
    assert described_scenes(graph, "v1", read_question("What does the man in glasses say?"), None) == []
