"""Entity tags are parsed and rewritten token-exactly (never as substrings)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from m3agent import tags


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
