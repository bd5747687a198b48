"""The people-and-order evaluation set: it loads and checks itself, renders times from the timeline, and scores
answers by keywords, yes/no polarity and times inside a part; the section renders every recorded run."""

from __future__ import annotations

from collections import Counter

import pytest

from m3agent.bench.episodes.people_doc import render
from m3agent.bench.episodes.people_eval import (
    EvalQuestion,
    evidence_hit,
    internal_ids,
    keyword_correct,
    load_eval_set,
    polarity,
)
from m3agent.bench.episodes.people_eval import render as render_times
from m3agent.errors import BenchmarkError

TIMELINE = {"debate": (0.0, 13.4), "photo": (13.4, 24.4), "oval": (58.4, 75.5)}


def test_the_packaged_set_has_forty_questions_over_every_type() -> None:
    eval_set = load_eval_set()
    counts = Counter(q.type for q in eval_set.questions)
    assert len(eval_set.questions) >= 40
    assert all(counts[t] >= 5 for t in ("speech", "identity", "temporal", "crossmodal", "counting", "description"))
    assert len({q.id for q in eval_set.questions}) == len(eval_set.questions)


def test_times_are_written_from_the_timeline() -> None:
    assert render_times("Is the man at {mid:photo} seen at {debate+6} or {start:oval}–{end:oval}?", TIMELINE) == \
        "Is the man at 0:18 seen at 0:06 or 0:58–1:15?"


def test_yes_no_and_when_are_scored_together() -> None:
    q = EvalQuestion("I1", "identity", "q", "a", ("oval",), polarity="yes", when=("oval",))
    assert keyword_correct(q, "Yes, he is seen again at 0:58–1:15.", TIMELINE)
    assert not keyword_correct(q, "Yes, he is seen again.", TIMELINE)  # no time in the part
    assert not keyword_correct(q, "No, he is not seen at 0:58.", TIMELINE)
    assert polarity("They are different people.") == "no" and polarity("No, only once.") == "no"
    assert polarity("The memory does not say.") is None  # an abstention is not a no
    assert polarity("<character_2>, seen twice") is None


def test_keyword_groups_need_one_word_of_each_as_a_whole_word() -> None:
    q = EvalQuestion("C1", "crossmodal", "q", "a", ("debate",), keywords=(("man", "left"),))
    assert keyword_correct(q, "The man on the left.", TIMELINE)
    assert not keyword_correct(q, "The woman.", TIMELINE)  # "man" inside "woman" does not count


def test_evidence_and_leaks() -> None:
    q = EvalQuestion("S1", "speech", "q", "a", ("debate",), keywords=(("senator",),))
    assert evidence_hit(q, [(30.0, 40.0), (2.0, 5.0)], TIMELINE)
    assert not evidence_hit(q, [(13.4, 20.0)], TIMELINE)
    assert internal_ids("In CLIP_1 [m4], <face_2> and <character_3> speak") == ["CLIP_1", "[m4]", "<face_2>"]


def test_a_set_naming_an_unknown_part_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "parts": [{"id": "a", "video": "v.mp4"}], "questions": [{"id": "q", '
                   '"type": "identity", "question": "at {mid:b}?", "answer": "no", "evidence": ["a"], '
                   '"polarity": "no"}]}')
    with pytest.raises(BenchmarkError, match="unknown parts"):
        load_eval_set(str(bad))


def test_the_section_has_a_row_per_run() -> None:
    row = {"label": "baseline", "date": "2026-11-26 06:00 UTC", "commit": "abc", "mode": "grounded",
           "by_type": {"identity": {"judged_accuracy": 0.2, "keyword_accuracy": 0.1}},
           "overall": {"judged_accuracy": 0.3, "keyword_accuracy": 0.25, "evidence_hit_rate": 0.5,
                       "p50_latency_s": 9.5}, "leaked_ids": {"T1": ["CLIP_1"]}}
    planned = {**row, "label": "plan", "overall": {**row["overall"], "plan_accuracy": 0.9}}
    text = render([row, planned])
    assert "| baseline | 2026-11-26 06:00 UTC / abc | grounded | – | 0.2 (0.1) |" in text
    assert text.count("\n| ") == 3 and "| 0.5 | – | 9.5 | 1 |" in text  # no plan before plans existed
    assert "| 0.5 | 0.9 | 9.5 | 1 |" in text


def test_a_new_row_keeps_the_readings_written_under_the_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from m3agent.bench.episodes.people_doc import HEADING, record_run

    doc, scores = tmp_path / "benchmarks.md", tmp_path / "people_eval.jsonl"
    env = {"date": "2026-11-28", "git_commit": "abc", "machine": {"cpu": "EPYC", "cores": 2}}
    result = {"overall": {"keyword_accuracy": 0.5}, "by_type": {}, "leaked_ids": {}, "mode": "grounded"}
    record_run(scores, doc, result, "first", env)
    text = doc.read_text() + "\nWhy the first run missed S5.\n\n## Next\n\nother\n"
    doc.write_text(text)
    record_run(scores, doc, result, "second", env)
    text = doc.read_text()
    section = text[text.index(f"## {HEADING}"):text.index("## Next")]
    assert "| first |" in section and "| second |" in section
    assert section.index("| second |") < section.index("Why the first run missed S5.")  # rows above, notes below
    assert text.count("Why the first run missed S5.") == 1 and text.endswith("## Next\n\nother\n")
