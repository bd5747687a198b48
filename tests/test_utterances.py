"""Speech memories are utterances: a speaker's contiguous, sentence-complete speech, bounded in length."""

from __future__ import annotations

from m3agent.domain import Clip, MemoryKind, VoiceSegment, Word
from m3agent.memorize.utterances import MAX_WORDS, utterances
from m3agent.memorize.writers.perception import write_clip

CLIP = Clip("vid", 0, 0.0, 30.0)


def seg(start: float, end: float, text: str, entity: int, words: tuple[Word, ...] = ()) -> VoiceSegment:
    return VoiceSegment(clip_index=0, start_s=start, end_s=end, text=text, entity_id=entity, words=words)


def test_fragments_of_one_sentence_become_one_utterance_of_the_main_speaker() -> None:
    # the debate's pattern: the diarizer switched speaker in mid-sentence
    found = utterances([seg(3.54, 3.82, "Why didn't", 3), seg(3.82, 4.28, "you do it?", 4),
                        seg(4.6, 5.3, "Why didn't you do it?", 4)])
    assert [(u.entity_id, u.text) for u in found] == [(4, "Why didn't you do it? Why didn't you do it?")]
    assert (found[0].start_s, found[0].end_s, found[0].segments) == (3.54, 5.3, 3)


def test_a_pause_or_another_speaker_ends_an_utterance() -> None:
    found = utterances([seg(0.0, 2.0, "We need a plan.", 1), seg(2.3, 3.0, "I agree.", 2),
                        seg(3.2, 4.0, "Good.", 1), seg(7.0, 8.0, "Anyway, tickets.", 1)])
    assert [(u.entity_id, u.text) for u in found] == [(1, "We need a plan."), (2, "I agree."), (1, "Good."),
                                                      (1, "Anyway, tickets.")]


def test_an_open_sentence_does_not_run_across_a_real_gap() -> None:
    found = utterances([seg(0.0, 1.0, "and then we", 1), seg(3.0, 4.0, "went home.", 2)])
    assert [(u.entity_id, u.text) for u in found] == [(1, "and then we"), (2, "went home.")]


def test_utterances_are_bounded_but_sentences_are_not_cut() -> None:
    sentence = " ".join(["word"] * 20) + "."
    many = [seg(i * 5.0, i * 5.0 + 4.5, sentence, 1) for i in range(5)]
    found = utterances(many)
    assert all(u.words <= MAX_WORDS for u in found) and len(found) >= 2
    assert all(u.text.endswith(".") for u in found)
    assert " ".join(u.text for u in found) == " ".join(s.text for s in many)


def test_word_times_set_the_span_and_memories_keep_their_format() -> None:
    words = (Word("Hello", 1.2, 1.5), Word("there.", 1.6, 1.9))
    unattributed = VoiceSegment(clip_index=0, start_s=3.1, end_s=3.5, text="Hm.")
    found = utterances([seg(1.0, 2.5, "Hello there.", 5, words), seg(2.6, 3.0, "", 5), unattributed])
    assert [(u.start_s, u.end_s) for u in found] == [(1.2, 1.9)]
    memories = write_clip(CLIP, [], [seg(0.0, 1.0, "My name is", 9), seg(1.1, 1.5, "Ann Lee.", 9)], fps=2.0)
    speech = [m for m in memories if m.kind == MemoryKind.EPISODIC]
    assert [m.text for m in speech] == ['At 0:00 <voice_9> says: "My name is Ann Lee."']
    assert [m.text for m in memories if m.kind == MemoryKind.SEMANTIC] == ["<voice_9>'s name is Ann Lee."]


def _words(text: str, start: float, step: float) -> tuple[Word, ...]:
    return tuple(Word(w, start + i * step, start + (i + 1) * step) for i, w in enumerate(text.split()))


def test_a_cut_to_another_scene_ends_the_sentence_when_the_voice_changes() -> None:
    # the episode's debate -> speech edit: the last words of one scene and the next scene's sentence by another
    # voice ran together into one utterance of the second voice
    last = seg(11.4, 13.9, "you were effective senator, to do. And", 8,
               _words("you were effective senator, to do. And", 11.4, 2.5 / 7))
    said = "so my fellow Americans, ask not what your country can do"
    speech = seg(13.9, 22.1, said, 9, _words(said, 13.9, 0.7))
    assert [u.entity_id for u in utterances([last, speech])] == [9]  # no cut known: one sentence, most words win
    found = utterances([last, speech], cuts=[13.5])
    assert [(u.entity_id, u.text) for u in found] == [
        (8, "you were effective senator, to do."), (9, f"And {said}")]
    assert found[0].end_s <= found[1].start_s < 13.6


def test_one_voice_speaking_over_a_cut_stays_one_sentence() -> None:
    narrator = [seg(1.0, 3.0, "and over the hills we", 4, _words("and over the hills we", 1.0, 0.4)),
                seg(3.1, 4.0, "walked home.", 4, _words("walked home.", 3.1, 0.45))]
    found = utterances(narrator, cuts=[2.0, 3.05])
    assert [(u.entity_id, u.text) for u in found] == [(4, "and over the hills we walked home.")]


def test_write_clip_splits_speech_at_the_shots_cuts() -> None:
    from m3agent.domain import Shot

    voices = [seg(9.0, 10.0, "you could have", 1, _words("you could have", 9.0, 0.33)),
              seg(10.1, 12.0, "done it. My fellow Americans.", 2, _words("done it. My fellow Americans.", 10.1, 0.38))]
    shots = [Shot(0.0, 10.9, cut=False), Shot(10.9, 30.0, cut=True)]
    texts = [m.text for m in write_clip(CLIP, [], voices, fps=2.0, shots=shots) if "says" in m.text]
    assert texts == ['At 0:09 <voice_1> says: "you could have done it."',
                     'At 0:10 <voice_2> says: "My fellow Americans."']
