"""One definition of where a face is (issue 47): perception's position attribute, the entity graph's sightings and
the words of answers place a face by :mod:`m3agent.perception.attributes.place`, on both stores.

Before, the graph split the width at 0.4 / 0.6 and called a face background under 0.55 of the largest face at the
same time, while the attribute used thirds and 0.75 of the shot's main face: a face at 35 % of the width was "in
the centre" in a profile and "on the left" in a graph answer. Now the width splits at 3/8 and 5/8 everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from m3agent.control.people.words import described, sighting_place
from m3agent.domain import BBox, Clip, EntityKind, FaceObservation, ShotRecord, Video
from m3agent.graph.operators import EntityGraph
from m3agent.perception.attributes import place
from m3agent.perception.attributes.place import main_face_height
from m3agent.perception.attributes.position import frame_position, positions_in_frame
from store_helpers import unit_vectors

WIDTH, HEIGHT = 1280, 720
AT_35 = BBox(408, 200, 488, 300)  # centre x 448: 35 % of 1280 (the graph's 0.4 said left, the thirds centre)
MAIN = BBox(760, 100, 960, 400)  # centre x 860 (67 %: right); 300 px tall: the shot's main face
BEHIND_65 = BBox(200, 300, 300, 495)  # 195 px: 0.65 of the main face (0.55 said foreground, 0.75 says background)


def write(store: Any, frames: dict[float, list[BBox]], shots: list[tuple[float, float]] = ()) -> dict[BBox, int]:
    """Video v (frames of 1280x720 stored with it) with one face entity per distinct box, seen at the given times."""
    store.add_video(Video("v", "/v.mp4", 10.0, metadata={"width": WIDTH, "height": HEIGHT, "frame_width": WIDTH,
                                                          "frame_height": HEIGHT}))
    boxes = list(dict.fromkeys(b for found in frames.values() for b in found))
    with store.clip(Clip("v", 0, 0.0, 10.0)) as w:
        ids = {box: w.add_entity(EntityKind.FACE, [v]).id for box, v in zip(boxes, unit_vectors(len(boxes)),
                                                                            strict=True)}
        for time_s, found in frames.items():
            for box in found:
                w.add_face(FaceObservation(0, time_s, box, 0.99, entity_id=ids[box]))
        for start, end in shots:
            w.add_shot(ShotRecord("v", 0, start, end, start > 0, "live", 0.9))
    return ids


def graph_place(graph: EntityGraph, time_s: float, entity: int) -> tuple[str, str]:
    found = [s for s in graph.at("v", time_s).on_screen if s.entity_id == entity]
    assert len(found) == 1
    return found[0].horizontal, found[0].depth


def test_the_owner_splits_the_width_at_3_8_and_5_8_and_names_the_places() -> None:
    assert (place.LEFT, place.RIGHT) == (0.375, 0.625)
    assert [place.horizontal_place(c) for c in (-0.1, 1 / 3, 0.35, 0.375, 0.5, 0.6, 0.625, 2 / 3, 1.2)] == [
        "left", "left", "left", "centre", "centre", "centre", "right", "right", "right"]
    assert place.PLACE_WORDS == {"left": "on the left", "centre": "in the centre", "right": "on the right"}
    assert place.depth_place(0.74) == "background" and place.depth_place(0.75) == "foreground"
    assert place.depth_place(1.0, 0.05) == "background" and place.depth_place(1.0, None) == "foreground"


def test_a_face_at_35_percent_of_the_width_is_on_the_left_for_perception_the_graph_and_the_words(
        make_store: Callable[[], Any]) -> None:
    perceived = frame_position(AT_35, WIDTH, HEIGHT)
    assert perceived.horizontal == "left" and perceived.centre_x == 0.35
    store = make_store()
    ids = write(store, {1.0 + k / 2: [AT_35] for k in range(5)})
    graph = EntityGraph(store)
    assert graph_place(graph, 2.0, ids[AT_35]) == (perceived.horizontal, perceived.depth)
    sighting = graph.at("v", 2.0).on_screen[0]
    assert described(graph, sighting.person, sighting) == "the person on the left"
    assert sighting_place(sighting) == "on the left, in the foreground"


def test_a_face_at_65_percent_of_the_main_face_is_background_for_perception_and_the_graph(
        make_store: Callable[[], Any]) -> None:
    assert [p.depth for p in positions_in_frame([MAIN, BEHIND_65], WIDTH, HEIGHT)] == ["foreground", "background"]
    store = make_store()
    ids = write(store, {1.0 + k / 2: [MAIN, BEHIND_65] for k in range(5)})
    assert graph_place(EntityGraph(store), 2.0, ids[BEHIND_65]) == ("left", "background")
    assert graph_place(EntityGraph(store), 2.0, ids[MAIN]) == ("right", "foreground")


def test_the_graph_measures_depth_against_the_shots_main_face_as_perception_does(
        make_store: Callable[[], Any]) -> None:
    """At 3.0 s the main face was missed: alone in its frame, the face behind is still background, in the shot
    (0-5 s) where the main face was seen; in the next shot, where it is the only face, it is foreground."""
    frames = {t: [MAIN, BEHIND_65] for t in (1.0, 1.5, 2.0, 2.5)} | {3.0: [BEHIND_65]} | {6.0: [BEHIND_65]}
    reference = main_face_height([frames[t] for t in (1.0, 1.5, 2.0, 2.5, 3.0)])
    alone = positions_in_frame([BEHIND_65], WIDTH, HEIGHT, shot_face_height=reference)[0]
    assert alone.depth == "background"
    store = make_store()
    ids = write(store, frames, shots=[(0.0, 5.0), (5.0, 10.0)])
    graph = EntityGraph(store)
    assert graph_place(graph, 3.0, ids[BEHIND_65]) == ("left", alone.depth)
    assert graph_place(graph, 6.0, ids[BEHIND_65]) == ("left", "foreground")


@pytest.mark.parametrize("share", [0.05, 0.07])
def test_a_tiny_face_is_background_even_alone_in_the_graph_as_in_perception(
        make_store: Callable[[], Any], share: float) -> None:
    tall = round(share * HEIGHT)
    box = BBox(600, 100, 600 + tall, 100 + tall)
    store = make_store()
    ids = write(store, {1.0 + k / 2: [box] for k in range(5)})
    assert graph_place(EntityGraph(store), 2.0, ids[box])[1] == frame_position(box, WIDTH, HEIGHT).depth
