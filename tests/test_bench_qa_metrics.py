"""LoCoMo answer scores: the paper's normalisation (articles, punctuation, Porter stems) and per-category rules."""

from __future__ import annotations

import pytest

pytest.importorskip("nltk", reason="the bench extra (nltk) is not installed")

from m3agent.bench.qa_metrics import abstains, exact_match, normalise, score, token_f1


def test_normalisation_drops_case_punctuation_and_articles() -> None:
    assert normalise("The Cat, and a dog!") == "cat dog"
    assert exact_match("Running shoes.", "the running shoe")  # Porter stems: shoes -> shoe


def test_token_f1_is_the_harmonic_mean_of_overlap() -> None:
    assert token_f1("7 May 2023", "7 May 2023") == 1.0
    assert token_f1("on 7 May", "7 May 2023") == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert token_f1("nothing alike", "7 May 2023") == 0.0


def test_category_rules() -> None:
    multi = score(1, "violin, clarinet", "clarinet and violin, guitar")
    assert multi["f1"] == pytest.approx((2 / 3 + 0) / 2)  # each gold item takes its best predicted item
    assert score(3, "liberal", "Liberal; because of her views")["f1"] == 1.0
    assert score(5, "The memory does not say.", "Not mentioned in the conversation.")["f1"] == 1.0
    assert score(5, "music", "Not mentioned in the conversation.")["f1"] == 0.0
    assert abstains("") and abstains("not mentioned") and not abstains("Lily")
