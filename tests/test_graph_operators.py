"""The entity-graph operators on both stores: appearances, moments with frame positions, shots in order,
co-presence, counts and profiles, from a small scene written through the clip writer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from m3agent.domain import (
    BBox,
    Clip,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    Memory,
    MemoryKind,
    ShotRecord,
    Video,
    VoiceSegment,
)
from m3agent.errors import NotFoundError
from m3agent.graph.operators import EntityGraph, merge_spans
from m3agent.graph.values import Role
from m3agent.memorize.scene_memories import PROVENANCE
from store_helpers import unit_vectors

LEFT_BIG = BBox(100, 200, 300, 460)  # centre x 200 of 1280: left; 260 px tall
RIGHT_SMALL = BBox(1000, 300, 1060, 370)  # centre x 1030: right; 70 px tall: background beside the big face


Embed = Callable[[str], Any]


def random_vector(text: str) -> Any:
    return unit_vectors(1, seed=len(text))[0]


def build(store: Any, embed: Embed = random_vector, shots: Sequence[ShotRecord] = (),
          said: Sequence[tuple[float, str]] = ()) -> dict[str, int]:
    """Video v1 (1280x720), clips 0 (0-30 s) and 1 (30-60 s). Face A (left, big) is seen 1-10 s and 40-45 s and
    its linked voice speaks 2-6 s and 41-44 s; face B (right, small) is seen 1-5 s; an unlinked voice C speaks
    50-52 s. Shot summaries: 0-12 (opens), 12-30 (cut) continued by 30-48 in clip 1, 48-60 (cut); ``shots``
    are stored with their clips (none by default: a memory stored with measured attributes off); ``said``: speech
    memories (start, words) of voice A before 30 s, of voice C after, each 2 s long."""
    def scene_memory(clip: Clip, text: str, start: float, end: float, entities: tuple[int, ...] = ()) -> Memory:
        return Memory(kind=MemoryKind.EPISODIC, text=text, video_id=clip.video_id, clip_index=clip.index,
                      start_s=start, end_s=end, entity_ids=entities, provenance=PROVENANCE, embedding=embed(text))

    store.add_video(Video("v1", "/v1.mp4", 60.0, metadata={"width": 1280, "height": 720}))
    vec = unit_vectors(3)
    first, second = Clip("v1", 0, 0.0, 30.0), Clip("v1", 1, 30.0, 60.0)
    with store.clip(first) as w:
        a = w.add_entity(EntityKind.FACE, [vec[0]]).id
        b = w.add_entity(EntityKind.FACE, [vec[1]]).id
        voice_a = w.add_entity(EntityKind.VOICE, [vec[2]]).id
        for k in range(19):
            w.add_face(FaceObservation(0, 1.0 + k / 2, LEFT_BIG, 0.99, entity_id=a))
        for k in range(9):
            w.add_face(FaceObservation(0, 1.0 + k / 2, RIGHT_SMALL, 0.95, entity_id=b))
        w.add_voice(VoiceSegment(0, 2.0, 6.0, "hello there", entity_id=voice_a))
        w.set_link(FaceVoiceLink(a, voice_a, 1.0, LinkSource.AV, "test"))
        w.add_memory(scene_memory(first, 'On screen 0:03–0:09: "Breaking news"', 3.0, 9.0))
        w.add_memory(scene_memory(first, "Shot 0:00–0:12: on screen <face_1>.", 0.0, 12.0, (a, b)))
        w.add_memory(scene_memory(first, "Scene change at 0:12: a new shot starts.", 12.0, 12.0))
        w.add_memory(scene_memory(first, "Shot 0:12–0:30 (after a scene change): objects: chair.", 12.0, 30.0))
        for shot in (r for r in shots if r.clip_index == first.index):
            w.add_shot(shot)
        _say(w, first, voice_a, [(t, text) for t, text in said if t < 30.0], embed)
    with store.clip(second) as w:
        for k in range(11):
            w.add_face(FaceObservation(1, 40.0 + k / 2, LEFT_BIG, 0.99, entity_id=a))
        w.add_voice(VoiceSegment(1, 41.0, 44.0, "and again", entity_id=voice_a))
        voice_c = w.add_entity(EntityKind.VOICE, [vec[1]]).id
        w.add_voice(VoiceSegment(1, 50.0, 52.0, "someone else", entity_id=voice_c))
        w.add_memory(scene_memory(second, "Shot 0:30–0:48: on screen <face_1>.", 30.0, 48.0, (a,)))
        w.add_memory(scene_memory(second, "Shot 0:48–1:00 (after a scene change): speaking <voice_9>.", 48.0,
                                  60.0, (voice_c,)))
        for shot in (r for r in shots if r.clip_index == second.index):
            w.add_shot(shot)
        _say(w, second, voice_c, [(t, text) for t, text in said if t >= 30.0], embed)
    return {"a": a, "b": b, "voice_a": voice_a, "voice_c": voice_c}


def _say(writer: Any, clip: Clip, voice: int, said: Sequence[tuple[float, str]], embed: Embed) -> None:
    for start, words in said:
        text = f'At {int(start) // 60}:{int(start) % 60:02d} <voice_{voice}> says: "{words}"'
        writer.add_memory(Memory(kind=MemoryKind.EPISODIC, text=text, video_id=clip.video_id, clip_index=clip.index,
                                 start_s=start, end_s=start + 2.0, entity_ids=(voice,), embedding=embed(text)))


@pytest.fixture
def graph(make_store: Callable[[], Any]) -> tuple[EntityGraph, dict[str, int]]:
    store = make_store()
    ids = build(store)
    return EntityGraph(store), ids


def test_appearances_join_face_and_voice_of_one_person(graph: tuple[EntityGraph, dict[str, int]]) -> None:
    g, ids = graph
    person = g.person_of_entity(ids["voice_a"])
    assert set(person.entity_ids) == {ids["a"], ids["voice_a"]}
    spans = [(a.start_s, a.end_s, a.role) for a in g.appearances(person)]
    assert spans == [(1.0, 10.0, Role.BOTH), (40.0, 45.0, Role.BOTH)]
    voice_only = g.person_of_entity(ids["voice_c"])
    assert [(a.start_s, a.end_s, a.role) for a in g.appearances(voice_only)] == [(50.0, 52.0, Role.VOICE)]
    profile = g.profile(person)
    assert profile.first is not None and profile.last is not None
    assert (profile.first.start_s, profile.last.start_s) == (1.0, 40.0)
    assert profile.to_dict()["first"]["span"] == "0:01–0:10"


def test_a_moment_says_who_is_where_and_who_speaks(graph: tuple[EntityGraph, dict[str, int]]) -> None:
    g, ids = graph
    moment = g.at("v1", 3.0)
    where = {s.entity_id: (s.horizontal, s.depth) for s in moment.on_screen}
    assert where == {ids["a"]: ("left", "foreground"), ids["b"]: ("right", "background")}
    assert [(u.entity_id, u.text) for u in moment.speaking] == [(ids["voice_a"], "hello there")]
    assert moment.scene == ('On screen 0:03–0:09: "Breaking news"',)
    assert moment.shot is not None and moment.shot.index == 0
    assert g.at("v1", 20.0).on_screen == () and g.at("v1", 20.0).speaking == ()


def test_shots_are_ordered_and_a_shot_cut_by_a_clip_boundary_is_one(
        graph: tuple[EntityGraph, dict[str, int]]) -> None:
    g, _ = graph
    shots = g.shots("v1")
    assert [(s.start_s, s.end_s, s.opens_scene) for s in shots] == [(0.0, 12.0, True), (12.0, 48.0, True),
                                                                     (48.0, 60.0, True)]
    assert g.next_shot(shots[0]) == shots[1] and g.previous_shot(shots[0]) is None
    assert g.next_shot(shots[2]) is None
    assert g.shot_at("v1", 35.0) == shots[1]


def test_a_stored_shot_says_whether_it_opens_a_scene_and_the_summary_what_it_holds(
        make_store: Callable[[], Any]) -> None:
    """Issue 47: whether a shot opens a scene is read from the stored shot rows, not parsed out of its summary's
    words (the summary is read only for what the shot holds). Here the stored 48 s shot is no cut, though its
    summary says so: the rows win, and it continues the shot before."""
    store = make_store()
    build(store, shots=[ShotRecord("v1", 0, 0.0, 12.0, False, "live", 0.9),
                        ShotRecord("v1", 0, 12.0, 30.0, True, "live", 0.9),
                        ShotRecord("v1", 1, 30.0, 48.0, False, "still", 0.9),
                        ShotRecord("v1", 1, 48.0, 60.0, False, "still", 0.9)])
    shots = EntityGraph(store).shots("v1")
    assert [(s.start_s, s.end_s, s.opens_scene) for s in shots] == [(0.0, 12.0, True), (12.0, 60.0, True)]
    assert shots[1].summary.startswith("objects: chair; on screen <face_1>; speaking") and len(shots[1].memory_ids) == 3


def test_together_and_counts(graph: tuple[EntityGraph, dict[str, int]]) -> None:
    g, ids = graph
    a = g.person_of_entity(ids["a"])
    company = g.together(a)
    assert [(c.person.face_ids, c.spans) for c in company] == [((ids["b"],), (("v1", 1.0, 5.0),))]
    count = g.count_people("v1", 0.0, 30.0)
    assert count.distinct == 2 and len(count.heard) == 1
    assert g.count_people("v1", 49.0, 53.0).distinct == 1
    assert g.count_people("v1", 20.0, 30.0).distinct == 0


def test_people_are_found_by_tag_id_or_given_name(graph: tuple[EntityGraph, dict[str, int]]) -> None:
    g, ids = graph
    person = g.person_of_entity(ids["a"])
    assert g.person(f"<voice_{ids['voice_a']}>") == person == g.person(person.tag) == g.person(person.character_id)
    g.store.rename_entity(ids["a"], "Ann")
    assert EntityGraph(g.store).person("ann").name == "Ann"
    with pytest.raises(NotFoundError):
        g.person("<character_999>")


def test_merge_spans_joins_close_spans_only() -> None:
    assert merge_spans([(5, 6), (0, 1), (2.5, 3)], gap=1.9) == [(0, 3), (5, 6)]
    assert merge_spans([], gap=1.0) == []
