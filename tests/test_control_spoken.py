"""Words said, quoted from the speech memories: at a moment, by the person a question describes, and after a
quotation the recogniser cut across two lines (:mod:`m3agent.control.people.spoken`), and through the grounded chain."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from m3agent.control import Answer, answer_question
from m3agent.control.people.spoken import following, speech_lines, spoken, transcript_lines
from m3agent.control.reading import read_question
from m3agent.control.steps import Provenance
from m3agent.domain import (
    BBox,
    Clip,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    Memory,
    MemoryKind,
    Video,
    VoiceSegment,
)
from m3agent.graph.operators import EntityGraph
from m3agent.memorize.scene_memories import screen_line
from m3agent.memorize.speech_line import says_line
from test_control_select import scripted
from test_graph_answers import GROUNDED, plan, plan_reply, ref

LINES = (  # (voice, start, end, words, caption)
    ("a", 10.0, 12.2, "Because I was a senator with a Republican president. Oh really?", ""),
    ("b", 12.3, 14.0, "I will be the president. You could have done it.", "oh really I will be"),
    ("a", 14.5, 17.0, "If you were an effective senator, you could have done it.", ""),
    ("b", 40.0, 43.0, "Thank you all for coming tonight.", ""),
)


def write(store: Any, embed: Callable[[str], Any]) -> dict[str, int]:
    """Video v1: voices a (linked to the face on the left) and b (the face on the right) speak :data:`LINES`."""
    store.add_video(Video("v1", "/v1.mp4", 60.0, metadata={"width": 1280, "height": 720}))
    with store.clip(Clip("v1", 0, 0.0, 60.0)) as w:
        ids = {name: w.add_entity(EntityKind.VOICE, [embed(name)]).id for name in ("a", "b")}
        left, right = (w.add_entity(EntityKind.FACE, [embed(side)]).id for side in ("left", "right"))
        for k in range(40):
            w.add_face(FaceObservation(0, 8.0 + k / 2, BBox(100, 200, 300, 460), 0.99, entity_id=left))
            w.add_face(FaceObservation(0, 8.0 + k / 2, BBox(900, 200, 1100, 460), 0.99, entity_id=right))
        w.set_link(FaceVoiceLink(left, ids["a"], 1.0, LinkSource.AV, "test"))
        w.set_link(FaceVoiceLink(right, ids["b"], 1.0, LinkSource.AV, "test"))
        for voice, start, end, said, caption in LINES:
            w.add_voice(VoiceSegment(0, start, end, said, entity_id=ids[voice]))
            text = f'At 0:{int(start):02d} <voice_{ids[voice]}> says: "{said}"'
            text += f' Captioned on screen: "{caption}".' if caption else ""
            w.add_memory(Memory(kind=MemoryKind.EPISODIC, text=text, video_id="v1", clip_index=0, start_s=start,
                                end_s=end, entity_ids=(ids[voice],), embedding=embed(text)))
        w.add_memory(Memory(kind=MemoryKind.EPISODIC, text="Shot 0:00–1:00: two people at desks.", video_id="v1",
                            clip_index=0, start_s=0.0, end_s=60.0, embedding=embed("shot")))
    return ids


def test_the_lines_at_a_moment_and_the_nearest_one_around_it(make_store: Callable[[], Any]) -> None:
    store = make_store()
    write(store, _random)
    graph = EntityGraph(store)

    def said(question: str) -> str | None:
        found = spoken(store, graph, "v1", read_question(question), None)
        return None if found is None else found.text

    both = said("What is said at 0:12?")
    assert both is not None and "Oh really?" in both and "I will be the president" in both, "two lines meet there"
    assert "Thank you" not in both and "effective" not in both
    assert "Thank you all" in (said("Around 0:38, what words does the speaker use?") or ""), "the nearest, 2 s on"
    assert said("What is said at 0:30?") is None, "no line within reach: the model answers"
    assert said("Who says the line at 0:12?") is None


def test_what_a_talk_is_about_is_answered_by_its_lines(make_store: Callable[[], Any]) -> None:
    store = make_store()
    write(store, _random)
    graph = EntityGraph(store)
    talk = spoken(store, graph, "v1", read_question("What is the talk about at 0:12?"), None)
    assert talk is not None and talk.text.startswith("The talk at 0:10–0:17: ")  # no shots: 4 s either side
    assert "Oh really?" in talk.text and "effective senator" in talk.text and "Thank you" not in talk.text
    assert spoken(store, graph, "v1", read_question("What are they discussing at 0:41?"), None) is not None
    assert spoken(store, graph, "v1", read_question("What is the talk about at 0:30?"), None) is None, "none said"
    assert spoken(store, graph, "v1", read_question("What is the picture about at 0:12?"), None) is None, \
        "not about speech"


def test_the_lines_of_the_person_the_plan_describes(make_store: Callable[[], Any]) -> None:
    store = make_store()
    write(store, _random)
    question = "What does the person on the right say at 0:12?"
    described = plan(question, "recall", ref(kind="person", place="right", time="0:12"))
    found = spoken(store, EntityGraph(store), "v1", read_question(question), described)
    assert found is not None and [m.start_s for m in found.lines] == [12.3]


def test_the_words_after_a_quotation_cut_across_two_lines(make_store: Callable[[], Any]) -> None:
    store = make_store()
    write(store, _random)
    lines = speech_lines(store, "v1", None)
    after = following(lines, "oh really I will be")
    assert after is not None and after.said.startswith("the president. You could have done it.")
    assert [m.start_s for m in after.lines] == [10.0, 12.3, 14.5], "where it was found, and the next line"
    assert after.found == "Oh really? I will be" and after.found_at == 10.0 and not after.on_screen
    ending = following(lines, "If you were an effective")
    assert ending is not None and ending.said.startswith("senator, you could have done it.")
    assert following(lines, "we shall fight on the beaches") is None
    last = following(lines, "coming tonight")
    assert last is not None and last.said == "" and last.text == \
        'Said at 0:40: "Thank you all for coming tonight." Nothing is said after it.', "the last words: nothing follows"
    assert following(speech_lines(store, "v1", before_clip=-1), "oh really") is None, "nothing before the clip"


REORDERED = "If you were effective, if you were effective center, you could have done it."
CAPTIONS = ("you could have done it if you were an effective", "if you were an effective senator you could have done")


def _said(start: float, words: str, captions: tuple[str, ...] = ()) -> Memory:
    return Memory(kind=MemoryKind.EPISODIC, text=says_line(start, "<voice_1>", words, captions), video_id="v1",
                  clip_index=0, start_s=start, end_s=start + 2.0)


def test_the_words_after_a_quotation_the_recogniser_wrote_in_another_order() -> None:
    """The recogniser put the words the asker takes to come after the quotation before and among it: the answer
    quotes the sentence where it was found, so they are in it; captions read on screen, when there are any, are
    the transcript word for word and answer first."""
    heard = [_said(9.1, REORDERED), _said(14.0, "Thank you all for coming tonight.")]
    found = following(heard, "you could have done it if you were an effective")
    assert found is not None and not found.on_screen
    assert found.found == REORDERED and found.said == "Thank you all for coming tonight."
    assert found.text.startswith(f'Said at 0:09: "{REORDERED}" After it: "Thank you')
    shown = [_said(9.1, REORDERED, CAPTIONS), _said(11.2, "If you were effective.", CAPTIONS[1:]),
             _said(14.0, "Thank you all for coming tonight.")]
    found = following(shown, "you could have done it if you were an effective")
    assert found is not None and found.on_screen and found.said == CAPTIONS[1], "a caption kept on screen once"
    assert found.text.startswith(f'On screen at 0:09: "{CAPTIONS[0]}" After it: "{CAPTIONS[1]}"')
    last = following(shown, "senator you could have done")
    assert last is not None and not last.on_screen, "nothing follows the last caption: the speech heard answers"


def _shown(start: float, end: float, text: str) -> Memory:
    return Memory(kind=MemoryKind.EPISODIC, text=screen_line(start, end, text), video_id="v1", clip_index=0,
                  start_s=start, end_s=end)


def test_a_caption_the_recogniser_heard_too_little_of_is_read_on_screen(make_store: Callable[[], Any]) -> None:
    """The recogniser wrote "center to you could have done" where the caption reads "you could have done it if you
    were an effective": too few of its words for the caption to be merged into the line, so it stays a line of text
    of its own. The words after it, and the words at its moment, are read there too; a logo of two words is not."""
    split = [_said(5.7, "Because I was a senator. Oh really? I will be the president. If"),
             _shown(10.0, 11.0, CAPTIONS[0]), _said(10.8, "center to you could have done."),
             _shown(12.0, 13.0, CAPTIONS[1]), _shown(0.0, 13.0, "Original video")]
    found = following(sorted(split, key=lambda m: m.start_s), "you could have done it if you were an effective")
    assert found is not None and found.on_screen and found.said == CAPTIONS[1]
    store = make_store()
    store.add_video(Video("v1", "/v1.mp4", 20.0))
    with store.clip(Clip("v1", 0, 0.0, 20.0)) as w:
        for m in split:
            w.add_memory(replace(m, embedding=_random(m.text)))
    assert [m.start_s for m in transcript_lines(store, "v1", None)] == [5.7, 10.0, 10.8, 12.0], "no logo"
    at = spoken(store, EntityGraph(store), "v1", read_question("What words are spoken at 0:10?"), None)
    assert at is not None and f'On screen 0:10–0:11: "{CAPTIONS[0]}"' in at.text and "center to you" in at.text
    assert "Original video" not in at.text


def test_the_grounded_chain_quotes_the_lines_without_a_model_answer(make_store: Callable[[], Any]) -> None:
    from m3agent.embed import create_embedder

    embedder = create_embedder("hash")
    store = make_store()
    store.set_embedding_model(embedder.name, embedder.dim)
    write(store, lambda text: embedder.embed([text])[0])
    recall = json.dumps(plan_reply("recall", ref(time="0:12")))
    steps = list(answer_question(store, embedder, scripted(recall), "What is said at 0:12?", video_id="v1",
                                 config=GROUNDED))
    answer = steps[-1]
    assert isinstance(answer, Answer) and answer.provenance is Provenance.SPOKEN
    assert '"I will be the president. You could have done it."' in answer.text
    assert "<voice_" not in answer.text, "people are said in words"
    assert {(e.start_s, e.end_s) for e in answer.evidence if e.cited} == {(10.0, 12.2), (12.3, 14.0)}
    asked = 'Someone says "oh really I will be". What are the next words?'
    steps = list(answer_question(store, embedder, scripted(recall), asked, video_id="v1", config=GROUNDED))
    assert isinstance(steps[-1], Answer) and "You could have done it" in steps[-1].text


def _random(text: str) -> Any:
    from store_helpers import unit_vectors

    return unit_vectors(1, seed=sum(map(ord, text)))[0]


def test_the_talk_in_a_scene_the_question_describes(make_store: Callable[[], Any]) -> None:
    """No clock time and no plan: the question's own words describe the scene ("the dark screen with a voice" is
    the cut at 0:48 where nobody is on screen), and the lines said in it are quoted, headed by its span for a
    gist question. A person's description alone ("the man in glasses") names no scene here."""
    from test_graph_operators import build

    store = make_store()
    build(store, said=[(3.0, "Hello there, welcome to the news."), (50.0, "Ask not what your country can do.")])
    graph = EntityGraph(store)

    def said(question: str) -> str | None:
        found = spoken(store, graph, "v1", read_question(question), None)
        return None if found is None else found.text

    words = said("What is said during the dark screen with a voice?")
    assert words is not None and "Ask not what your country" in words and "welcome" not in words
    gist = said("What are they talking about in the dark screen with a voice?")
    assert gist is not None and gist.startswith("The talk at 0:48–1:00: ") and "Ask not" in gist
    assert said("What is said right after the dark screen with a voice?") is None, "a neighbour, not the scene"
    assert said("What does the man in glasses say?") is None
    assert said("What is said during the photo of a lighthouse?") is None, "no scene fits: the model answers"


def test_a_quotation_is_found_where_its_words_stand_in_its_order() -> None:
    """A line that says the same words twice in another order ("ask not what your country can do for you, ask what
    you can do for your country"): the stretch holding them in the asker's order is where the quotation was said,
    so what follows it is the next line, not the quotation's own end."""
    heard = [_said(13.0, "And so my fellow Americans, ask not what your country can do for you, ask what you can do "
                         "for your country."), _said(24.0, "Everyone here today endeavoring towards a better future.")]
    found = following(heard, "ask what you can do for your country")
    assert found is not None and found.said.startswith("Everyone here today")
    earlier = following(heard, "ask not what your country can do for you")
    assert earlier is not None and earlier.said.startswith("ask what you can do")


def test_the_sounds_heard_with_a_talk_say_what_kind_of_talk_it_is(make_store: Callable[[], Any]) -> None:
    """A talk over music in rhymed words (a shot summary saying ``sounds: music, rapping``): the answer about
    what is said there names the sounds with the lines, and so does the shot put into words; a talk with no
    sounds in its shot is headed by its span alone."""
    from m3agent.control.people.words import shot_content
    from m3agent.memorize.scene_memories import PROVENANCE

    store = make_store()
    store.add_video(Video("v1", "/v1.mp4", 40.0, metadata={"width": 1280, "height": 720}))
    clip = Clip("v1", 0, 0.0, 40.0)
    with store.clip(clip) as w:
        voice = w.add_entity(EntityKind.VOICE, [_random("voice")]).id
        for text, start, end in ((f"Shot 0:00–0:20: speaking <voice_{voice}>; sounds: music, rapping.", 0.0, 20.0),
                                 (f"Shot 0:20–0:40 (after a scene change): speaking <voice_{voice}>.", 20.0, 40.0)):
            w.add_memory(Memory(kind=MemoryKind.EPISODIC, text=text, video_id="v1", clip_index=0, start_s=start,
                                end_s=end, entity_ids=(voice,), provenance=PROVENANCE, embedding=_random(text)))
        for start, said in ((4.0, "Late nights, bright lights, we write and fight."), (25.0, "Thanks for coming.")):
            text = says_line(start, f"<voice_{voice}>", said)
            w.add_memory(Memory(kind=MemoryKind.EPISODIC, text=text, video_id="v1", clip_index=0, start_s=start,
                                end_s=start + 3.0, entity_ids=(voice,), embedding=_random(text)))
    graph = EntityGraph(store)
    talk = spoken(store, graph, "v1", read_question("What is the talk about at 0:05?"), None)
    assert talk is not None and talk.text.startswith("The talk at 0:04–0:07 (sounds: music, rapping): ")
    plain = spoken(store, graph, "v1", read_question("What is the talk about at 0:26?"), None)
    assert plain is not None and plain.text.startswith("The talk at 0:25–0:28: ")
    first, second = graph.shots("v1")
    assert shot_content(graph, first).endswith("; sounds: music, rapping")
    assert "sounds" not in shot_content(graph, second)
