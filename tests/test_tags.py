"""Entity tags are parsed and rewritten token-exactly (never as substrings)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m3agent import tags
from m3agent.domain import Character, Entity, EntityKind


def test_face_3_is_not_found_inside_face_30() -> None:
    text = "<face_3> greets <face_30> and <face_300>."
    assert tags.to_characters(text, {3: 1}) == "<character_1> greets <face_30> and <face_300>."


def test_character_1_is_not_rewritten_inside_character_10() -> None:
    text = "<character_1> and <character_10> and <character_11>"
    out = tags.rewrite(text, lambda t: "Ann" if (t.kind, t.id) == ("character", 1) else None)
    assert out == "Ann and <character_10> and <character_11>"


def test_bare_tags_are_recognised_only_as_whole_words() -> None:
    assert tags.entity_ids("face_3 spoke to voice_12") == (3, 12)
    assert tags.entity_ids("my_face_3 and face_3x and surface_3") == ()


def test_unbalanced_brackets_stay_text() -> None:
    assert tags.tokenize("x<face_3") == ["x<", tags.Tag("face", 3)]
    assert tags.render(tags.tokenize("<<face_3>>")) == "<<face_3>>"


def test_leading_zeros_are_canonicalised() -> None:
    assert tags.rewrite("<face_03>", lambda t: None) == "<face_3>"


def test_entity_ids_are_distinct_in_first_seen_order() -> None:
    assert tags.entity_ids("<voice_7> said hi to <face_2>; <voice_7> again") == (7, 2)


def test_renumber_maps_foreign_ids() -> None:
    out = tags.renumber("<face_1> met <voice_10>", {("face", 1): ("face", 41), ("voice", 10): ("voice", 52)})
    assert out == "<face_41> met <voice_52>"


def test_to_names_keeps_unknown_tags() -> None:
    names = {tags.Tag(tags.TagKind.CHARACTER, 2): "Lily"}
    assert tags.to_names("<character_2> and <character_20>", names) == "Lily and <character_20>"


@given(st.lists(st.tuples(st.sampled_from(["face", "voice", "character"]), st.integers(0, 10_000)), max_size=8),
       st.lists(st.text(alphabet="ab ,.:;!?()", max_size=6), min_size=9, max_size=9))
def test_tokenize_render_round_trip(tag_list: list[tuple[str, int]], fillers: list[str]) -> None:
    text = fillers[0] + "".join(f"<{k}_{i}>{fillers[n + 1]}" for n, (k, i) in enumerate(tag_list))
    assert tags.render(tags.tokenize(text)) == text
    assert [(t.kind, t.id) for t in tags.find_tags(text)] == tag_list


def test_tag_kinds_are_the_entity_kinds_and_character() -> None:
    assert [k.value for k in tags.ENTITY_KINDS] == [k.value for k in EntityKind]
    assert {k.value for k in tags.TagKind} == {k.value for k in EntityKind} | {"character"}


def test_one_formatter_for_every_kind() -> None:
    assert tags.face(3) == "<face_3>" and tags.voice(7) == "<voice_7>" and tags.character(2) == "<character_2>"
    assert tags.format_tag(EntityKind.VOICE, 7) == "<voice_7>" == Entity(7, EntityKind.VOICE).tag
    assert Character(2, (3, 7)).tag == "<character_2>" == str(tags.Tag(tags.TagKind.CHARACTER, 2))
    assert tags.Tag(tags.TagKind.CHARACTER, 2).bare == "character_2"


def test_format_tag_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="person"):
        tags.format_tag("person", 1)


def test_parse_reads_one_whole_tag() -> None:
    assert tags.parse("<voice_7>") == tags.Tag(tags.TagKind.VOICE, 7)
    assert tags.parse(" face_3 ") == tags.Tag(tags.TagKind.FACE, 3)
    for not_one in ("", "voice 7", "<voice_7> and", "<face_3><face_4>", "<person_1>"):
        assert tags.parse(not_one) is None


@given(st.sampled_from(list(tags.TagKind)), st.integers(0, 10_000))
def test_parse_reads_what_the_formatter_writes(kind: tags.TagKind, number: int) -> None:
    assert tags.parse(tags.format_tag(kind, number)) == tags.Tag(kind, number)


def test_pattern_matches_canonical_tags_only() -> None:
    character = re.compile(tags.pattern(tags.TagKind.CHARACTER, group="id"))
    assert [m.group("id") for m in character.finditer("<character_2>, <face_3>, character_4")] == ["2"]
    assert re.findall(tags.pattern(), "<face_3> and <voice_12> met <character_1>") == [
        "<face_3>", "<voice_12>", "<character_1>"]


def test_canonical_spelling_repairs_loose_model_spellings() -> None:
    text = "<Face 3> talks to [voice_7], < voice_8 > and face9; surface_3 stays"
    assert tags.canonical_spelling(text) == "<face_3> talks to <voice_7>, <voice_8> and <face_9>; surface_3 stays"


def test_replace_first_replaces_one_occurrence_token_exactly() -> None:
    target = tags.Tag(tags.TagKind.CHARACTER, 1)
    text = "<character_10> met <character_1>, then <character_1> left"
    assert tags.replace_first(text, target, "<face_4>") == "<character_10> met <face_4>, then <character_1> left"


@pytest.mark.parametrize(("text", "kept"), [
    ("speaking <character_8>, <character_3>, <c", "speaking <character_8>, <character_3>"),
    ("the man on the left (<face_1", "the man on the left"),
    ("heard <voice_", "heard"),
    ("said it <", "said it"),
    ("met <character_12>", "met <character_12>"),  # a whole tag stays
    ("size < 5", "size < 5"),  # a comparison, not a tag
    ("a<b", "a<b"),  # no tag kind starts with "b"
    ("<ch", "<ch"),  # nothing would be left
])
def test_a_tag_cut_at_the_end_of_a_reply_is_dropped(text: str, kept: str) -> None:
    assert tags.without_cut_tag(text) == kept


def test_a_grounded_answer_cut_mid_tag_by_its_length_limit_keeps_no_fragment() -> None:
    from m3agent.control.replies import GroundedReply

    reply = GroundedReply.model_validate({"used": ["f1"], "answer": "Shot 0:14-0:22: speaking <character_8>, <c"})
    assert reply.answer == "Shot 0:14-0:22: speaking <character_8>"
