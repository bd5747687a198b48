"""The one person count (:meth:`EntityGraph.count_people`), from the graph and through ``/api/videos/{id}/count``:
faces count, a voice linked to a face counts as that person (even off screen), a voice linked to no face counts
only when some of its speech has no face on screen.

The memory: faces A and B seen 0:02-0:08; A's linked voice at 0:03-0:05 and again at 0:10-0:11 with nobody on
screen; voice U1 (linked to no face) at 0:05-0:07 over both faces; voice U2 (linked to no face) at 0:13-0:15
over a dark screen."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import (
    BBox,
    Clip,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    ShotRecord,
    Video,
    VoiceSegment,
)
from m3agent.graph.operators import EntityGraph
from m3agent.store import open_store

LEFT, RIGHT = BBox(100, 200, 300, 460), BBox(900, 200, 1100, 460)


def write(path: Path) -> dict[str, int]:
    store = open_store(str(path))
    faces, voices = np.eye(128, dtype=np.float32), np.eye(256, dtype=np.float32)
    with store:
        store.add_video(Video("room", "/nowhere/room.mp4", 20.0, metadata={"width": 1280, "height": 720}))
        with store.clip(Clip("room", 0, 0.0, 20.0)) as w:
            a, b = (w.add_entity(EntityKind.FACE, [faces[i]]).id for i in (0, 1))
            voice_a, u1, u2 = (w.add_entity(EntityKind.VOICE, [voices[i]]).id for i in (0, 1, 2))
            for k in range(13):
                for entity, box in ((a, LEFT), (b, RIGHT)):
                    w.add_face(FaceObservation(0, 2.0 + k / 2, box, 0.99, entity_id=entity))
            for start, end, entity in ((3.0, 5.0, voice_a), (10.0, 11.0, voice_a), (5.0, 7.0, u1), (13.0, 15.0, u2)):
                w.add_voice(VoiceSegment(0, start, end, "words", entity_id=entity))
            w.set_link(FaceVoiceLink(a, voice_a, 1.0, LinkSource.AV, "test"))
    return {"a": a, "b": b, "voice_a": voice_a, "u1": u1, "u2": u2}


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    path = tmp_path_factory.mktemp("count") / "memory.db"
    return path, write(path)


def test_two_faces_a_linked_voice_and_a_voice_over_a_dark_screen_are_three(
        room: tuple[Path, dict[str, int]]) -> None:
    path, ids = room
    with open_store(str(path)) as store:
        graph = EntityGraph(store)
        whole = graph.count_people("room", 0.0, 20.0)
        a, u1, u2 = (graph.person_of_entity(ids[k]) for k in ("a", "u1", "u2"))
        assert whole.distinct == 3
        assert [p.character_id for p in whole.not_counted] == [u1.character_id]
        assert u2 in whole.counted and a in whole.counted and len(whole.heard) == 3
        assert graph.count_people("room", 5.0, 7.0).distinct == 2  # U1 over A and B: not a third person
        assert graph.count_people("room", 12.0, 16.0).counted == (u2,)  # nobody on screen: the voice is someone
        assert graph.count_people("room", 9.5, 11.5).counted == (a,)  # A's linked voice, A off screen
        assert graph.count_people("room", 17.0, 20.0).distinct == 0


def test_the_api_counts_by_the_same_rule(room: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
    from fastapi.testclient import TestClient

    from m3agent.server.app import create_app
    from m3agent.settings import load_settings

    path, ids = room
    settings = load_settings(memory=str(path), llm="none", server={"data_dir": str(tmp_path / "server")})
    with TestClient(create_app(settings, mcp=False, inspector=False), base_url="http://127.0.0.1") as client:
        body = client.get("/api/videos/room/count").json()
        with open_store(str(path)) as store:
            graph = EntityGraph(store)
            expected = graph.count_people("room", 0.0, 20.0)
            u1 = graph.person_of_entity(ids["u1"])
        assert body["distinct"] == 3 == len(body["people"])
        assert body["not_counted"] == [u1.label] and len(body["heard"]) == 3
        assert [p["character_id"] for p in body["people"]] == sorted(p.character_id for p in expected.counted)
        assert client.get("/api/videos/room/count", params={"start": "0:05", "end": "0:07"}).json()["distinct"] == 2


def test_a_face_sampled_across_a_cut_is_not_counted_in_the_other_shot(tmp_path: Path) -> None:
    """Faces are sampled every half second, so the slack that lets an instant catch a nearby sample reaches one
    sample into the next shot: a shot's count (the timeline's "live · N") held its neighbours' people. The slack
    stops at a cut; a sample at the cut belongs to the shot the cut opens."""
    path = tmp_path / "cut.db"
    store = open_store(str(path))
    faces = np.eye(128, dtype=np.float32)
    with store:
        store.add_video(Video("cut", "/nowhere/cut.mp4", 10.0, metadata={"width": 1280, "height": 720}))
        with store.clip(Clip("cut", 0, 0.0, 10.0)) as w:
            a, b = (w.add_entity(EntityKind.FACE, [faces[i]]).id for i in (0, 1))
            for k in range(10):
                w.add_face(FaceObservation(0, k / 2, LEFT, 0.99, entity_id=a))  # 0.0-4.5: the first shot
                w.add_face(FaceObservation(0, 5.0 + k / 2, RIGHT, 0.99, entity_id=b))  # 5.0-9.5: the second
            w.add_shot(ShotRecord("cut", 0, 0.0, 5.0, False, "live", 0.9))
            w.add_shot(ShotRecord("cut", 0, 5.0, 10.0, True, "live", 0.9))
    with open_store(str(path)) as store:
        graph = EntityGraph(store)
        first, second = graph.person_of_entity(a), graph.person_of_entity(b)
        assert graph.count_people("cut", 0.0, 5.0).counted == (first,)
        assert graph.count_people("cut", 5.0, 10.0).counted == (second,)
        assert graph.count_people("cut", 4.8, 4.8).counted == (first,)  # 4.5 is near; 5.0 is past the cut
        assert graph.count_people("cut", 5.0, 5.0).counted == (second,)
        assert [s.person for s in graph.at("cut", 4.8).on_screen] == [first]
        assert [s.person for s in graph.at("cut", 0.0, 5.0).on_screen] == [first]
        assert graph.count_people("cut", 4.0, 6.0).distinct == 2  # an interval across the cut holds both
