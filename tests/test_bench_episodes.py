"""Generated evaluation episodes: the catalogue matches the real media, episodes are fixed by their seed, dev and
test share no seed and no phrasing, every gold answer follows from the timeline and passes its own scoring (and a
wrong one fails), a small real episode builds, and the report gives intervals and the dev-test gap."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from m3agent.bench.episodes.catalogue import Catalogue, load_catalogue
from m3agent.bench.episodes.facts import Fact, facts
from m3agent.bench.episodes.people_eval import TYPES, EvalQuestion, Timeline, evidence_hit, keyword_correct
from m3agent.bench.episodes.people_eval import render as render_times
from m3agent.bench.episodes.questions import episode_set, load_templates
from m3agent.bench.episodes.run import gap, record_run, render, report
from m3agent.bench.episodes.seeds import LENGTH_SLACK_S, Episode, Placed, generate
from m3agent.errors import BenchmarkError

CATALOGUE = load_catalogue()
TEMPLATES = load_templates()


def _media_seconds(path: Path) -> float:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0] if container.streams.video else container.streams.audio[0]
        if stream.duration is not None and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
        return float(container.duration or 0) / 1e6


def _planned_timeline(episode: Episode) -> Timeline:
    """Part id -> (start, end) from the catalogue's lengths, as a built episode would have them (to ±0.3 s)."""
    timeline, clock = {}, 0.0
    for part in episode.parts:
        timeline[part.part_id] = (clock, clock + part.piece.duration_s)
        clock += part.piece.duration_s
    return timeline


def _episode(catalogue: Catalogue, *ids: str) -> Episode:
    parts = tuple(Placed(f"p{i:02d}_{pid}", catalogue.piece(pid), i) for i, pid in enumerate(ids, 1))
    return Episode(0, 2.0, "test", parts)


def test_every_catalogue_file_exists_and_every_time_lies_inside_its_media(media_dir: Path) -> None:
    import cv2

    for piece in CATALOGUE.pieces:
        for name in piece.files():
            assert (media_dir / name).is_file(), f"{piece.id}: {name} is missing"
        if piece.image is not None:
            assert cv2.imread(str(media_dir / piece.image)) is not None, piece.id
        source = media_dir / (piece.video or piece.audio or "")
        available = _media_seconds(source) - piece.offset_s
        played = available if piece.seconds is None else piece.seconds
        assert piece.seconds is None or piece.seconds <= available + 0.05, f"{piece.id} asks past its audio's end"
        assert played == pytest.approx(piece.duration_s, abs=0.35), f"{piece.id}: {played:.2f} s played"
        for line in piece.lines or ():
            assert 0 <= line.start < line.end <= piece.duration_s + 0.1, piece.id
        assert {v.who for v in piece.voices} >= {p.who for p in piece.people if p.speaks}, piece.id


def test_the_catalogue_says_how_it_was_made_and_covers_every_kind_of_piece() -> None:
    assert "hand-annotated" in CATALOGUE.about.lower() and "project session" in CATALOGUE.about
    kinds = Counter(p.kind for p in CATALOGUE.pieces)
    assert kinds["video"] >= 14 and kinds["still"] >= 8 and kinds["dark"] >= 8
    trump = [p.id for p in CATALOGUE.pieces if p.seen("donald_trump") or p.heard("donald_trump")]
    assert {"debate", "oval", "dark_trump_a"} <= set(trump)
    assert sum(p.seen("glasses_woman") for p in CATALOGUE.pieces) == 3


def test_an_episode_is_fixed_by_its_seed_and_has_what_every_episode_needs() -> None:
    for seed, minutes in ((1, 2.0), (1001, 3.0), (7, 20.0)):
        episode = generate(CATALOGUE, seed, minutes)
        assert episode == generate(CATALOGUE, seed, minutes)
        assert episode_set(CATALOGUE, TEMPLATES, seed, minutes)[1] == episode_set(CATALOGUE, TEMPLATES, seed,
                                                                                  minutes)[1]
        assert abs(episode.planned_s - minutes * 60) <= LENGTH_SLACK_S + 1, (seed, episode.planned_s)
        pieces = [p.piece for p in episode.parts]
        assert any(p.split_screen for p in pieces) and any(p.kind == "still" for p in pieces)
        assert any(p.kind == "dark" for p in pieces)
        assert all(a.piece is not b.piece for a, b in zip(episode.parts, episode.parts[1:], strict=False))
    assert generate(CATALOGUE, 1, 2.0).parts != generate(CATALOGUE, 2, 2.0).parts
    long = generate(CATALOGUE, 7, 20.0)
    assert len({p.piece.id for p in long.parts}) < len(long.parts)  # 20 minutes replays pieces
    with pytest.raises(BenchmarkError):
        generate(CATALOGUE, 1, 1.0)


def test_dev_and_test_share_no_seed_and_no_phrasing() -> None:
    dev, test = TEMPLATES.phrasings("dev"), TEMPLATES.phrasings("test")
    assert not {p.text for p in dev} & {p.text for p in test}
    assert not {p.id for p in dev} & {p.id for p in test}
    assert not set(TEMPLATES.seeds["dev"]) & set(TEMPLATES.seeds["test"])
    assert len(TEMPLATES.seeds["test"]) >= 5
    for split, phrasings in (("dev", dev), ("test", test)):
        per_type = Counter(TEMPLATES.kinds[p.kind].type for p in phrasings)
        assert all(per_type[t] >= 3 for t in TYPES), (split, per_type)
    test_ids = {p.id for p in test}
    for seed in TEMPLATES.seeds["test"]:
        questions = episode_set(CATALOGUE, TEMPLATES, seed, 2.0, "test")[1].questions
        assert len(questions) >= 30
        assert all(q.id.split("-", 1)[1] in test_ids for q in questions)
    with pytest.raises(BenchmarkError, match="test split"):
        episode_set(CATALOGUE, TEMPLATES, TEMPLATES.seeds["test"][0], 2.0, "dev")


def test_the_fresh_wording_asks_the_same_facts_of_a_dev_seed_in_other_words() -> None:
    fresh, others = TEMPLATES.phrasings("fresh"), TEMPLATES.phrasings("dev") + TEMPLATES.phrasings("test")
    assert not {p.text for p in fresh} & {p.text for p in others}
    assert {p.kind for p in fresh} == set(TEMPLATES.kinds)
    for seed in (1, 2):
        dev = episode_set(CATALOGUE, TEMPLATES, seed, 2.0)[1].questions
        new = episode_set(CATALOGUE, TEMPLATES, seed, 2.0, wording="fresh")[1].questions
        assert [(q.type, q.answer, q.evidence, q.keywords, q.when) for q in dev] == [
            (q.type, q.answer, q.evidence, q.keywords, q.when) for q in new]
        assert all(a.question != b.question for a, b in zip(dev, new, strict=True))
        assert all(q.id.split("-", 1)[1] in {p.id for p in fresh} for q in new)
    with pytest.raises(BenchmarkError, match="fresh wording"):
        episode_set(CATALOGUE, TEMPLATES, TEMPLATES.seeds["test"][0], 2.0, wording="fresh")


@pytest.mark.parametrize(("seed", "minutes"), [(1, 2.0), (3, 5.0), (1002, 2.0), (1005, 20.0)])
def test_every_gold_answer_passes_its_own_scoring_and_a_wrong_one_fails(seed: int, minutes: float) -> None:
    episode, eval_set = episode_set(CATALOGUE, TEMPLATES, seed, minutes)
    timeline = _planned_timeline(episode)
    per_type = Counter(q.type for q in eval_set.questions)
    assert len(eval_set.questions) == 30 and all(per_type[t] >= 2 for t in TYPES), per_type
    for q in eval_set.questions:
        gold = render_times(q.answer, timeline)
        assert "{" not in render_times(q.question, timeline) and "{" not in gold, q.id
        assert keyword_correct(q, gold, timeline), (q.id, q.question, gold)
        assert evidence_hit(q, [timeline[p] for p in q.evidence], timeline)
        assert not keyword_correct(q, "I cannot tell from what I remember.", timeline), q.id
        if q.polarity is not None:
            flipped = ("No" if q.polarity == "yes" else "Yes") + gold[gold.index(","):] if "," in gold else gold
            assert not keyword_correct(q, flipped, timeline), q.id


def _fact(found: list[Fact], kind: str, **slots: str) -> Fact:
    hits = [f for f in found if f.kind == kind and all(f.slots.get(k) == v for k, v in slots.items())]
    assert len(hits) == 1, (kind, slots, hits)
    return hits[0]


def test_facts_follow_from_the_order_of_the_parts_as_read_by_hand() -> None:
    import random

    # debate (Trump left, Clinton right) · Trump's voice on a dark screen · Oval Office (Trump again)
    # · a woman speaking to the camera · the woman with glasses twice, the second time straight after
    episode = _episode(CATALOGUE, "debate", "dark_trump_a", "oval", "aoc", "glasses_9", "glasses_10")
    found = facts(episode, random.Random(0))
    trump_left = _fact(found, "seen_again", person="the man in a dark suit with a red tie on the left")
    assert trump_left.polarity == "yes" and trump_left.when == ("p03_oval",)
    assert _fact(found, "seen_again", person="the blonde woman in a dark jacket on the right").polarity == "no"
    voice = _fact(found, "voice_before", at="{mid:p02_dark_trump_a}")
    assert voice.polarity == "yes" and voice.when == ("p01_debate",)
    assert _fact(found, "voice_seen", at="{mid:p02_dark_trump_a}").polarity == "yes"  # Trump is on screen
    assert _fact(found, "same_person", at="{mid:p05_glasses_9}", at2="{mid:p06_glasses_10}").polarity == "yes"
    assert _fact(found, "same_person", at="{mid:p04_aoc}", at2="{mid:p05_glasses_9}").polarity == "no"
    assert _fact(found, "count_people", at="{mid:p02_dark_trump_a}").keywords[0][0] == "0"
    assert _fact(found, "count_people", at="{mid:p01_debate}").keywords == (("2", "two", "both"),)
    glasses = _fact(found, "count_appearances", person="the woman with glasses")
    assert glasses.keywords == (("1", "one", "single"),)  # two adjacent parts are one scene
    assert "after" not in {f.kind for f in found if f.slots.get("at") == "{mid:p05_glasses_9}"}
    assert _fact(found, "who_speaks_split", at="{p01_debate+4.7}").keywords == (("left", "man"),)
    clinton = _fact(found, "who_speaks_split", at="{p01_debate+6.8}")
    assert (clinton.keywords, clinton.rivals) == ((("right", "woman"),), ("left", "man"))
    assert _fact(found, "voice_kind", at="{mid:p04_aoc}").keywords[0][0] == "woman"
    assert _fact(found, "anyone_there", at="{mid:p02_dark_trump_a}").polarity == "no"
    # Trump sits in the Oval Office without it being known whether he talks: no "heard before?" about his voice
    later = _episode(CATALOGUE, "oval", "dark_trump_a")
    asked = {f.slots["at"] for f in facts(later, random.Random(0)) if f.kind == "voice_before"}
    assert asked == {"{mid:p01_oval}"}  # Mirziyoyev's voice, heard first there: asked


def test_a_small_real_episode_builds_with_the_catalogue_lengths(media_dir: Path, tmp_path: Path) -> None:
    from m3agent.bench.episodes.build import build_episode

    episode = _episode(CATALOGUE, "aoc", "still_rapper_libri533", "dark_libri2033")
    assert episode.planned_s <= 60
    built = build_episode([p.source(media_dir) for p in episode.eval_parts()], tmp_path / "e.mp4")
    assert (tmp_path / "e.mp4").stat().st_size > 0
    for part, placed in zip(built, episode.parts, strict=True):
        assert part.end_s - part.start_s == pytest.approx(placed.piece.duration_s, abs=0.3), placed.part_id
    timeline = {p.part_id: (b.start_s, b.end_s) for p, b in zip(episode.parts, built, strict=True)}
    q = EvalQuestion("x", "identity", "q", "a", ("p02_still_rapper_libri533",), polarity="no")
    assert keyword_correct(q, "No, that voice is new.", timeline)


def test_an_answer_naming_every_side_is_taken_at_the_one_it_names_first() -> None:
    """"Left or right?" answered with both sides is no answer: the scorer takes the one named first; words the two
    sides share (two men) tell nothing; a question without rivals is scored as before."""
    timeline = {"p1": (0.0, 10.0)}
    q = EvalQuestion("x", "crossmodal", "q", "a", ("p1",), (("right", "woman"),), rivals=("left", "man"))
    assert keyword_correct(q, "Most likely the woman on the right: her lips move, not the man on the left.", timeline)
    assert not keyword_correct(q, "Most likely the man on the left, rather than the woman on the right.", timeline)
    assert not keyword_correct(q, "On the left (the man); on the right (the woman).", timeline)
    two_men = EvalQuestion("y", "crossmodal", "q", "a", ("p1",), (("left", "man"),), rivals=("right", "man"))
    assert not keyword_correct(two_men, "The man on the right is speaking, not the man on the left.", timeline)
    assert keyword_correct(two_men, "The man on the left is speaking.", timeline)
    plain = EvalQuestion("z", "crossmodal", "q", "a", ("p1",), (("left", "man"),))
    assert keyword_correct(plain, "On the right (the woman); on the left (the man).", timeline)


def _answers(right: dict[str, int], n: int = 5) -> list[dict[str, object]]:
    return [{"type": t, "keyword": i < right.get(t, 0), "judged": None, "latency_s": 1.0 + i}
            for t in TYPES for i in range(n)]


def test_the_report_gives_intervals_and_the_dev_test_gap(tmp_path: Path) -> None:
    dev = report(_answers({t: 4 for t in TYPES}))
    assert dev["scorer"] == "keyword" and dev["by_type"]["speech"]["accuracy"] == 0.8
    low, high = dev["by_type"]["speech"]["ci95"]
    assert low < 0.8 <= high and dev["p50_latency_s"] == 3.0
    dev.update(split="dev", minutes=2.0)
    assert gap([], dev) is None
    test = report(_answers({t: 2 for t in TYPES})) | {"split": "test", "minutes": 2.0}
    assert gap([test], dev) == dict.fromkeys([*TYPES, "all"], 0.4)
    assert gap([test | {"minutes": 5.0}], dev) is None  # another length is not comparable
    env = {"date": "2026-11-28 16:00 UTC", "git_commit": "abc", "machine": {"cpu": "x", "cores": 2}}
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    for label, result in (("d", dev), ("t", test)):
        record_run(tmp_path / "episodes.jsonl", doc, result | {"seeds": [1], "episodes": []}, label, env)
    text = doc.read_text()
    assert "kept" in text and "| d |" in text and "| t |" in text and "all +0.40" in text
    rows = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [r["split"] for r in rows] == ["dev", "test"] and "Dev – test gap" in render(rows)
    fresh = report(_answers({t: 3 for t in TYPES})) | {"split": "dev", "wording": "fresh", "minutes": 2.0,
                                                       "seeds": [1]}
    assert gap(rows, fresh) == dict.fromkeys([*TYPES, "all"], 0.2)  # the dev wording of the same seeds minus it
    assert gap(rows, fresh | {"seeds": [2]}) is None
    record_run(tmp_path / "episodes.jsonl", doc, fresh | {"episodes": []}, "f", env)
    assert "dev (fresh wording)" in doc.read_text() and "all +0.40" in doc.read_text()


def test_the_fresh_wording_is_refused_for_the_test_split() -> None:
    from click.testing import CliRunner

    from m3agent.cli.main import main

    result = CliRunner().invoke(main, ["bench", "episodes", "--split", "test", "--fresh-wording", "--llm", "none",
                                       "--no-record"])
    assert result.exit_code != 0 and "test seeds are asked only test phrasings" in result.output
