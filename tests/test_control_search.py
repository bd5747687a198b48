"""The search tools on a real SQLite memory: exclusion, tags, causality, names, time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from m3agent.control.results import SearchResult
from m3agent.control.retrieval.query import Intent, extract_time_range, parse_query
from m3agent.control.retrieval.search import MemorySearcher
from test_control_world import World, opened_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with opened_world(tmp_path) as built:
        yield built


def searcher(world: World, **options: object) -> MemorySearcher:
    return MemorySearcher(world.store, world.embedder, video_id="v1", **options)  # type: ignore[arg-type]


def clip_indexes(result: SearchResult) -> list[int]:
    return [c.clip.index for c in result.clips]


def texts(result: SearchResult) -> list[str]:
    return [h.text for h in result.hits]


def test_repeated_clip_search_returns_the_next_best_clips(world: World) -> None:
    tools = searcher(world)
    query = "who buys bread"
    first = tools.search_clip(query, k=1)
    second = tools.search_clip(query, k=1)
    third = tools.search_clip(query, k=1)
    assert clip_indexes(first) and clip_indexes(second) and clip_indexes(third)
    assert len({*clip_indexes(first), *clip_indexes(second), *clip_indexes(third)}) == 3
    # the best clips for "bread" come first
    assert {clip_indexes(first)[0], clip_indexes(second)[0]} == {1, 9}


def test_clip_search_returns_whole_clips_ordered_by_relevance(world: World) -> None:
    result = searcher(world).search_clip("a loaf of bread", k=2)
    first = result.clips[0]
    assert first.clip.index == 1 and (first.clip.start_s, first.clip.end_s) == (30.0, 60.0)
    assert [h.memory.id for h in first.hits] == [world.memory_ids["bread"], world.memory_ids["coat"]]
    assert [h.matched for h in first.hits] == [True, False]
    assert result.clips[0].score >= result.clips[-1].score


def test_memory_search_never_repeats_a_memory(world: World) -> None:
    tools = searcher(world)
    first = tools.search_memory("buys at the bakery counter", k=2)
    second = tools.search_memory("buys at the bakery counter", k=2)
    ids_first = {h.memory.id for h in first.hits}
    ids_second = {h.memory.id for h in second.hits}
    assert len(ids_first) == 2 and len(ids_second) == 2 and not ids_first & ids_second
    assert second.repeated >= 2


def test_tags_are_rewritten_token_exactly_for_ids_past_ten(world: World) -> None:
    result = searcher(world).search_memory("buys bakery counter", k=10)
    by_id = {h.memory.id: h.text for h in result.hits}
    assert by_id[world.memory_ids["bread"]] == "<character_1> buys a loaf of bread at the bakery counter."
    assert by_id[world.memory_ids["milk"]] == "<character_10> buys a bottle of milk at the bakery counter."
    assert all("face_" not in t and "voice_" not in t for t in by_id.values())


def test_a_named_character_restricts_the_search_to_its_memories(world: World) -> None:
    one = searcher(world).search_memory("what did <character_1> buy at the bakery", k=10)
    assert {h.memory.id for h in one.hits} == {
        world.memory_ids[k] for k in ("bread", "coat", "cake")
    }
    assert any("restricted to memories of <character_1>" in n for n in one.notes)
    ten = searcher(world).search_memory("what did <character_10> buy at the bakery", k=10)
    assert world.memory_ids["milk"] in {h.memory.id for h in ten.hits}
    assert world.memory_ids["bread"] not in {h.memory.id for h in ten.hits}


def test_equivalence_bookkeeping_is_never_shown(world: World) -> None:
    tools = searcher(world)
    result = tools.search_clip("CLIP_2", k=1)
    assert clip_indexes(result) == [2]
    assert world.memory_ids["equiv"] not in {h.memory.id for h in result.hits}
    assert not any("quivalence" in t for t in texts(result))


def test_before_clip_hides_every_later_memory(world: World) -> None:
    tools = searcher(world, before_clip=4)
    results = [tools.search_clip("buys bread at the bakery", k=2) for _ in range(4)]
    results += [tools.search_memory("bread milk cake coffee coins", k=20)]
    seen = [h.memory.clip_index for r in results for h in r.hits]
    assert seen and max(seen) <= 4
    late = tools.search_clip("what happens in CLIP_6", k=1)
    assert not late.hits and "after the question time" in late.notes[0]


def test_name_of_character_from_memories_respects_before_clip(world: World) -> None:
    alice = world.character(2)
    facts = searcher(world).search_memory(f"What is the name of <character_{alice}>?", k=5)
    assert any("called Alice" in f for f in facts.facts)
    assert world.memory_ids["name"] in {h.memory.id for h in facts.hits}
    late = "What is the name of <character_10>?"
    assert any("Zed" in f for f in searcher(world).search_memory(late, k=5).facts)
    early = searcher(world, before_clip=4).search_memory(late, k=5)
    assert not any("Zed" in f for f in early.facts) and not any("Zed" in t for t in texts(early))


def test_character_of_name_and_search_by_name(world: World) -> None:
    alice = world.character(2)
    found = searcher(world).search_clip("Which character is Alice?", k=2)
    assert f"Alice is <character_{alice}> (stated in memories)." in found.facts
    drink = searcher(world).search_memory("What coffee does Alice drink?", k=3)
    # the voice linked to Alice's face said it: the name reaches it through the character
    assert drink.hits[0].memory.id == world.memory_ids["alice_coffee"]
    assert drink.hits[0].text == f"<character_{alice}> says she always drinks black coffee."


def test_given_names_replace_tags_in_results(world: World) -> None:
    world.store.rename_entity(world.faces[world.face_with_character(1)], "Bob")
    result = searcher(world).search_memory("Bob bread", k=1)
    assert result.hits[0].text == "Bob buys a loaf of bread at the bakery counter."


def test_time_phrases_restrict_the_range(world: World) -> None:
    early = searcher(world).search_memory("buys at the bakery counter in the first 80 seconds", k=10)
    assert early.hits and max(h.memory.clip_index for h in early.hits) <= 2
    assert any(n.startswith("time range 0:00-1:20") for n in early.notes)
    late = searcher(world).search_memory("who buys bread after 4 minutes", k=10)
    assert {h.memory.clip_index for h in late.hits} == {9}


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what happened in the first ten minutes", 0.0, 600.0),
        ("who came after 5 minutes?", 300.0, None),
        ("between 2 and 4 minutes", 120.0, 240.0),
        ("from 1:00 to 2:30 who spoke", 60.0, 150.0),
        ("at 03:10 who spoke", 160.0, 220.0),
        ("during the first half an hour", 0.0, 1800.0),
        ("the store at the corner", None, None),
    ],
)
def test_time_phrase_parsing(query: str, start: float | None, end: float | None) -> None:
    _, got_start, got_end = extract_time_range(query)
    assert (got_start, got_end) == (start, end)


def test_intent_routing_is_not_by_substring(world: World) -> None:
    index = searcher(world).index
    assert parse_query("What is the name of <character_3>?", index).intent is Intent.NAME_OF
    assert parse_query("which character is Alice", index).intent is Intent.CHARACTER_OF
    assert parse_query("who is Alice?", index).intent is Intent.CHARACTER_OF
    assert parse_query("the character id card on the table", index).intent is Intent.CHARACTER_OF
    assert parse_query("what does Alice drink", index).intent is Intent.SEARCH


def test_a_restricted_search_embeds_what_is_asked_in_own_words_and_without_who(world: World) -> None:
    """Who is settled by the entity filter; the vector queries ask the rest as the person would (their speech is
    stored in the first person) and without the names (alias variants of the names as <face_i>/<voice_j> tags
    cost LoCoMo recall)."""
    from m3agent.control.retrieval.ranking import without_names

    asked: list[str] = []
    embed = world.embedder.embed

    def spy(texts: list[str]):  # type: ignore[no-untyped-def]
        asked.extend(texts)
        return embed(texts)

    world.embedder.embed = spy
    alice = world.character(2)
    drink = searcher(world).search_memory("What coffee does Alice's friend Alice drink?", k=3)
    assert drink.hits[0].text == f"<character_{alice}> says she always drinks black coffee."
    assert asked == ["What coffee does my friend I drink?", "What coffee does friend drink?"]
    asked.clear()
    searcher(world).search_memory("what did <character_1> buy at the bakery", k=3)
    assert asked == ["what did I buy at the bakery", "what did buy at the bakery"]
    assert without_names("Did ALICE's dog meet Alicent?", ["Alice"]) == "Did dog meet Alicent?"


@pytest.mark.parametrize(("question", "names", "own"), [
    ("What is Melanie's bowl a reminder of?", ["Melanie"], "What is my bowl a reminder of?"),
    ("Did ALICE's dog meet Alicent?", ["Alice"], "Did my dog meet Alicent?"),
    ("Where did she take her kids, Caroline?", ["Caroline"], "Where did I take my kids, I?"),
    ("What did Sam offer Evan for his yoga?", ["Evan", "Sam"], "What did I offer you for his yoga?"),
    ("Did <character_1> give <character_2>'s cat to Bob?", ["Bob"], "Did I give your cat to ?"),
    ("What does <voice_3> think of himself?", [], "What does I think of myself?"),
    ("What did Alice buy?", ["Zed"], "What did Alice buy?"),
])
def test_a_question_in_the_named_persons_own_words(question: str, names: list[str], own: str) -> None:
    """The first person named speaks ("I", "my"), a second is spoken to ("you", "your"), others drop out;
    pronouns turn first person only when one person is named (with two, "his" could be either)."""
    from m3agent.control.retrieval.ranking import in_own_words

    assert in_own_words(question, names) == own


def test_a_memory_beside_a_strong_hit_of_its_clip_moves_up() -> None:
    """Each memory gains a share of the best score among the *other* memories of its clip near the top; a
    clip's best memory gains its runner-up's; memories of clips with no hit near the top keep their score."""
    from m3agent.control.retrieval.ranking import Ranked, with_clip_context
    from m3agent.domain import Memory, MemoryKind

    def ranked(mid: int, clip: int, score: float) -> Ranked:
        memory = Memory(MemoryKind.EPISODIC, f"m{mid}", "v", clip, 0.0, 1.0, id=mid)
        return Ranked(memory, score, None, False)

    items = [ranked(1, 0, 1.0), ranked(2, 1, 0.9), ranked(3, 2, 0.8), ranked(4, 0, 0.4), ranked(5, 2, 0.5),
             ranked(6, 3, 0.7), ranked(7, 1, 0.1)]
    out = with_clip_context(items, weight=0.5, window=3)  # clips 0, 1, 2 lend; clip 3 (6th) does not
    scores = {r.memory.id: round(r.score, 6) for r in out}
    assert scores == {1: 1.0, 2: 0.9, 3: 0.8, 4: 0.9, 5: 0.9, 6: 0.7, 7: 0.55}
    assert [r.memory.id for r in out] == [1, 2, 4, 5, 3, 6, 7]  # ties by id
    wider = {r.memory.id: round(r.score, 6) for r in with_clip_context(items, weight=0.5, window=5)}
    assert wider[1] == 1.2 and wider[4] == 0.9 and wider[3] == 1.05  # the runner-up lends to its clip's best
    assert with_clip_context(items, weight=0.0) == items and with_clip_context([]) == []
