"""One owner of the speech line: what the writers put into memory, every reader reads back the same way."""

from __future__ import annotations

import pytest

from m3agent.memorize.speech_line import SpeechLine, quoted, read_speech, said_line, says_line


def test_the_perception_writers_line_reads_back_with_its_captions_apart() -> None:
    line = says_line(65.2, "<voice_3>", "Four more years.", ("FOUR MORE YEARS", "Live"))
    assert line == 'At 1:05 <voice_3> says: "Four more years." Captioned on screen: "FOUR MORE YEARS"; "Live".'
    assert read_speech(line) == SpeechLine("<voice_3>", "Four more years.", ("FOUR MORE YEARS", "Live"))
    assert read_speech(says_line(1.0, "<voice_3>", "Hi.")) == SpeechLine("<voice_3>", "Hi.")
    quoting = says_line(1.0, "<voice_3>", "Hi.", ('SHE SAID "NO"', "Live"))
    assert read_speech(quoting) == SpeechLine("<voice_3>", "Hi.", ('SHE SAID "NO"', "Live")), "quotes inside a caption"


def test_a_conversation_turn_and_the_prompts_form_read_back_the_same() -> None:
    assert read_speech(said_line("<voice_1>", "I adopted two cats.")) == SpeechLine("<voice_1>", "I adopted two cats.")
    assert read_speech(quoted("<character_2>", "Hello.")) == SpeechLine("<character_2>", "Hello.")


@pytest.mark.parametrize("text", ["<face_2> is on screen on the left.", 'Shot 2 (0:10-0:20): still.',
                                  'On screen: "says: nothing"', "Anna says: hello"])
def test_other_memories_are_not_speech(text: str) -> None:
    assert read_speech(text) is None


def test_grounded_mode_and_consolidation_find_the_same_speaker() -> None:
    """Before issue 47 control's grounded mode matched its own pattern (``says`` or ``said`` then a word
    boundary) beside consolidation's (``says:`` or ``said:``); both now read the one line."""
    from m3agent.control.modes.grounded import _speaker
    from m3agent.domain import Memory, MemoryKind
    from m3agent.memorize.consolidation.exchange import speaker_of

    for text, character in ((says_line(3.0, "<character_4>", "Yes."), "<character_4>"),
                            (said_line("<character_1>", "No."), "<character_1>"),
                            (says_line(3.0, "<voice_4>", "Yes."), None),
                            ("<character_4> says nothing at 0:03.", None)):
        memory = Memory(video_id="v", clip_index=0, kind=MemoryKind.EPISODIC, text=text, start_s=3.0, end_s=4.0)
        assert _speaker(text) == character
        assert (speaker_of(memory) if character else None) == character
