"""The graph write rules on a real SQLite store with the real MiniLM embedder.

Semantic facts reinforce a near-duplicate of the same people, are inserted
otherwise, and weaken what they contradict; episodic memories are always
inserted; nothing of a later clip is consulted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from m3agent.domain import EntityKind, FaceVoiceLink, LinkSource, MemoryKind
from m3agent.embed.hashing import HashingEmbedder
from m3agent.errors import ConfigError
from m3agent.memorize.consolidation.relations import Relation, canonical, relation, slot_of
from m3agent.memorize.rules import WriteRules
from m3agent.store.sqlite.store import SQLiteStore
from test_memorize_world import add_entities, clip_of, minilm, new_store, semantic_rows, write


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with new_store(tmp_path, minilm()) as opened:
        yield opened


@pytest.fixture
def people(store: SQLiteStore) -> tuple[int, int, int]:
    """A face, a voice and another face, first seen in clip 0."""
    face, voice, other = add_entities(store, clip_of(0), [EntityKind.FACE, EntityKind.VOICE, EntityKind.FACE])
    return face, voice, other


def test_paraphrased_fact_reinforces_the_existing_one(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    _, voice, _ = people
    first = write(store, clip_of(1), [f"<voice_{voice}> is worried about the budget."], voices=[voice])
    assert first.semantic == 1
    stats = write(store, clip_of(2), [f"<voice_{voice}> is concerned about the budget."], voices=[voice])
    assert (stats.reinforced, stats.semantic) == (1, 0)
    [fact] = semantic_rows(store)
    assert fact.text == f"<voice_{voice}> is worried about the budget."
    assert (fact.weight, fact.clip_index, fact.last_clip_index) == (2.0, 1, 2)


def test_a_different_fact_or_other_people_are_inserted(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    face, voice, _ = people
    write(store, clip_of(1), [f"<voice_{voice}> likes playing tennis."], voices=[voice])
    other_sport = write(store, clip_of(2), [f"<voice_{voice}> likes playing football."], voices=[voice])
    other_person = write(store, clip_of(3), [f"<face_{face}> likes playing tennis."], faces=[face])
    assert other_sport.semantic == 1 and other_person.semantic == 1
    assert other_sport.reinforced == other_person.reinforced == 0
    assert all(m.weight == 1.0 for m in semantic_rows(store)) and len(semantic_rows(store)) == 3


def test_contradicting_name_weakens_the_old_fact_and_keeps_both(store: SQLiteStore,
                                                                people: tuple[int, int, int]) -> None:
    _, voice, _ = people
    write(store, clip_of(1), [f"<voice_{voice}>'s name is Ann."], voices=[voice])
    write(store, clip_of(2), [f"<voice_{voice}>'s name is Ann."], voices=[voice])  # weight 2
    stats = write(store, clip_of(3), [f"<voice_{voice}>'s name is Bob."], voices=[voice])
    assert (stats.contradicted, stats.semantic) == (1, 1)
    ann, bob = semantic_rows(store)
    assert (ann.weight, ann.clip_index, ann.last_clip_index) == (1.5, 1, 2)
    assert (bob.weight, bob.clip_index, bob.last_clip_index) == (1.0, 3, 3)
    # "is called Bob" is the same fact as "name is Bob": it reinforces Bob and weakens Ann again
    again = write(store, clip_of(4), [f"<voice_{voice}> is called Bob."], voices=[voice])
    assert (again.reinforced, again.contradicted, again.semantic) == (1, 1, 0)
    ann, bob = semantic_rows(store)
    assert (ann.weight, bob.weight, bob.last_clip_index) == (1.0, 2.0, 4)
    for clip in (5, 6, 7):
        write(store, clip_of(clip), [f"<voice_{voice}>'s name is Bob."], voices=[voice])
    assert semantic_rows(store)[0].weight == pytest.approx(0.1)  # floored, never deleted


def test_negated_fact_contradicts(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    face, _, _ = people
    write(store, clip_of(1), [f"<face_{face}> likes coffee."], faces=[face])
    stats = write(store, clip_of(2), [f"<face_{face}> does not like coffee."], faces=[face])
    assert (stats.contradicted, stats.semantic, stats.reinforced) == (1, 1, 0)
    old, new = semantic_rows(store)
    assert old.weight == 0.5 and new.weight == 1.0


def test_facts_are_compared_person_by_person_across_face_and_voice(store: SQLiteStore,
                                                                  people: tuple[int, int, int]) -> None:
    face, voice, _ = people
    link = FaceVoiceLink(face, voice, confidence=0.9, source=LinkSource.AV)
    write(store, clip_of(1), [f"<face_{face}>'s name is Ann."], faces=[face], voices=[voice], av=[link])
    stats = write(store, clip_of(2), [f"<voice_{voice}>'s name is Ann.", f"<voice_{voice}>'s job is nurse."],
                  faces=[face], voices=[voice])
    assert (stats.reinforced, stats.semantic) == (1, 1)
    contra = write(store, clip_of(3), [f"<voice_{voice}> is called Beth."], voices=[voice])
    assert contra.contradicted == 1  # found through the face's facts, not only the voice's
    ann = next(m for m in semantic_rows(store) if m.text.endswith("Ann."))
    assert ann.entity_ids == (face,) and ann.weight == 1.5


def test_a_fact_repeated_within_one_clip_counts_once(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    _, voice, _ = people
    write(store, clip_of(1), [f"<voice_{voice}> works at a bakery."], voices=[voice])
    stats = write(store, clip_of(2), [f"<voice_{voice}> works at a bakery."] * 2
                  + [f"<voice_{voice}> works at the bakery."], voices=[voice])
    assert (stats.reinforced, stats.repeated, stats.semantic) == (1, 2, 0)
    [fact] = semantic_rows(store)
    assert fact.weight == 2.0


def test_later_clips_are_never_consulted(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    """Clip 3 is written after clip 5 (a retried failure): clip 5's fact is invisible to it."""
    _, voice, _ = people
    write(store, clip_of(5), [f"<voice_{voice}> owns a red bicycle."], voices=[voice])
    write(store, clip_of(4), [f"<voice_{voice}>'s name is Ann."], voices=[voice])
    write(store, clip_of(6), [f"<voice_{voice}>'s name is Ann."], voices=[voice])
    stats = write(store, clip_of(3), [f"<voice_{voice}> owns a red bicycle.", f"<voice_{voice}>'s name is Bob."],
                  voices=[voice])
    assert (stats.semantic, stats.reinforced, stats.contradicted) == (2, 0, 0)
    weights = {(m.clip_index, m.text.split()[-1]): m.weight for m in semantic_rows(store)}
    assert weights[(5, "bicycle.")] == 1.0 and weights[(4, "Ann.")] == 2.0


def test_episodic_memories_are_always_inserted(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    face, _, _ = people
    text = f"<face_{face}> opens the fridge."
    first = write(store, clip_of(1), [text, text], faces=[face], kind=MemoryKind.EPISODIC)
    second = write(store, clip_of(2), [text], faces=[face], kind=MemoryKind.EPISODIC)
    assert first.episodic == 2 and second.episodic == 1 and second.reinforced == 0
    assert len(store.memories("v1")) == 3


def test_facts_naming_nobody_merge_among_themselves(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    face, _, _ = people
    write(store, clip_of(1), ["The meeting takes place in a small conference room."])
    stats = write(store, clip_of(2), ["The meeting takes place in a small conference room.",
                                      f"<face_{face}> takes place in a small conference room."], faces=[face])
    assert (stats.reinforced, stats.semantic) == (1, 1)


def test_merge_threshold_is_a_setting(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    _, voice, _ = people
    write(store, clip_of(1), [f"<voice_{voice}> likes playing tennis."], voices=[voice])
    loose = WriteRules(merge_similarity=0.7)
    stats = write(store, clip_of(2), [f"<voice_{voice}> likes playing football."], voices=[voice], rules=loose)
    assert stats.reinforced == 1


def test_writing_with_another_embedder_asks_to_reembed(store: SQLiteStore, people: tuple[int, int, int]) -> None:
    _, voice, _ = people
    with pytest.raises(ConfigError, match="all-MiniLM") as info:
        write(store, clip_of(1), [f"<voice_{voice}> sings."], voices=[voice], embedder=HashingEmbedder(64))
    assert "re-embed" in info.value.hint
    assert store.memories("v1") == [] and [c.index for c, _, _ in store.clips("v1")] == [0]


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        ("<voice_7>'s name is Ann.", "<voice_7>'s name is Bob.", Relation.CONTRADICTS),
        ("<voice_7>'s name is Ann Lee.", "<voice_7>'s name is Ann.", Relation.SAME),
        ("<voice_7> is called Ann.", "<face_3>'s name is Ann.", Relation.SAME),  # one character
        ("<voice_7>'s job is nurse.", "<voice_7> works as a doctor.", Relation.CONTRADICTS),
        ("<voice_7> is 30 years old.", "<voice_7>'s age is 31.", Relation.CONTRADICTS),
        ("<voice_7>'s favourite food is pizza.", "<voice_7>'s favorite food is sushi.", Relation.CONTRADICTS),
        ("<voice_7>'s name is not Ann.", "<voice_7>'s name is Ann.", Relation.CONTRADICTS),
        ("<face_3> doesn't like coffee.", "<face_3> likes coffee.", Relation.CONTRADICTS),
        ("<face_3> never drinks coffee.", "<face_3> drinks coffee.", Relation.CONTRADICTS),
        ("<face_9> has no car.", "<face_9> has a car.", Relation.CONTRADICTS),
        ("<face_3> likes coffee.", "<face_3> likes tea.", Relation.UNRELATED),
        ("<face_9>'s friend is Bob.", "<face_9>'s friend is Tom.", Relation.UNRELATED),  # not single-valued
        ("<face_9> is a teacher.", "<face_9> is a doctor.", Relation.UNRELATED),  # left to similarity
        ("<face_9> does not like coffee.", "<face_3> likes coffee.", Relation.UNRELATED),  # other people
        ("<voice_7>'s name is Ann.", "<face_9>'s name is Bob.", Relation.UNRELATED),
    ],
)
def test_contradiction_detector(new: str, old: str, expected: Relation) -> None:
    same_person = {3: 1, 7: 1, 9: 2}
    assert relation(canonical(new, same_person), canonical(old, same_person)) is expected


def test_attribute_slots() -> None:
    slot = slot_of(canonical("<voice_7>'s Full Name is Ann Lee.", {}))
    assert slot is not None and (slot.subject, slot.attribute, slot.value) == (("<voice_7>",), "name", "ann lee")
    assert slot_of(canonical("<face_1> and <voice_2>'s boss is <face_5>.", {})).subject == ("<face_1>", "<voice_2>")
    assert slot_of("<face_1> likes long walks.") is None
