"""Measured attributes as part of the memory: measured on a perceived clip, grouped by entity, combined over
clips into a profile, and shot kinds joined to the graph's shots (both stores); then a real ingest of the
debate clip, whose people get their place, voice register and apparent gender."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.domain import (
    BBox,
    Clip,
    ClipMedia,
    ClipPerception,
    ClipSenses,
    EntityAttribute,
    EntityKind,
    FaceObservation,
    FaceTrack,
    Frame,
    Memory,
    MemoryKind,
    Shot,
    ShotRecord,
    Video,
    VoiceSegment,
)
from m3agent.graph.descriptions import combine_attributes, shot_kind
from m3agent.graph.operators import EntityGraph
from m3agent.graph.values import Person, Profile
from m3agent.perception.attributes.clip import entity_attributes, measure_clip
from m3agent.perception.attributes.names import STORED, Attribute, label_of
from store_helpers import clip_of, unit_vectors

RATE = 16000
WIDTH, HEIGHT = 640, 360
LEFT, RIGHT = BBox(40, 100, 140, 220), BBox(500, 100, 600, 220)  # same size: both foreground
CLIP = Clip("v", 0, 0.0, 6.0)


def tone(f0: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    wave = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 11))
    return (0.3 * wave / np.abs(wave).max()).astype(np.float32)


def perceived(images: list[np.ndarray] | None = None, shots: tuple[Shot, ...] = ()) -> ClipPerception:
    """A 6 s clip: a still picture at 2 fps with faces left (track 0) and right (track 1) in every frame, a low
    voice (120 Hz, speaker 0) in 0-3 s and a high one (230 Hz, speaker 1) in 3-6 s."""
    rng = np.random.default_rng(3)
    still = rng.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    times = [k / 2 for k in range(12)]
    frames = tuple(Frame(t, image) for t, image in zip(times, images or [still] * len(times), strict=True))
    audio = np.concatenate([tone(120.0, 3.0), tone(230.0, 3.0)])
    media = ClipMedia(CLIP, frames, audio, RATE, WIDTH, HEIGHT)
    tracks = tuple(FaceTrack(0, n, tuple(FaceObservation(0, t, box, 0.99, track=n) for t in times), ())
                   for n, box in enumerate((LEFT, RIGHT)))
    voices = (VoiceSegment(0, 0.2, 2.8, "low words", speaker=0), VoiceSegment(0, 3.2, 5.8, "high words", speaker=1))
    return ClipPerception(media, tracks, voices, senses=ClipSenses(shots=shots))


def identified(perception: ClipPerception) -> tuple[tuple[FaceTrack, ...], tuple[VoiceSegment, ...]]:
    """The clip as identity resolution leaves it: faces 1 (left) and 2 (right), voices 3 (low) and 4 (high)."""
    tracks = tuple(dataclasses.replace(t, observations=tuple(dataclasses.replace(o, entity_id=1 + t.track)
                                                             for o in t.observations)) for t in perception.tracks)
    voices = tuple(dataclasses.replace(v, entity_id=3 + v.speaker) for v in perception.voices)
    return tracks, voices


def test_a_clips_measures_become_one_row_per_entity_and_name() -> None:
    perception = perceived(shots=(Shot(0.0, 6.0, cut=False),))
    measures = measure_clip(perception, appearance=False)
    assert measures.skipped == ()
    rows, skipped = entity_attributes(measures, *identified(perception))
    assert skipped == []
    got = {(r.entity_id, r.name): r for r in rows}
    assert sorted(got) == [(1, "depth"), (1, "position"), (2, "depth"), (2, "position"),
                           (3, "voice_register"), (4, "voice_register")]
    assert (got[1, "position"].value, got[2, "position"].value) == ("left", "right")
    assert got[1, "position"].weight == 12 and got[1, "depth"].value == "foreground"
    low, high = got[3, "voice_register"], got[4, "voice_register"]
    assert (low.value, high.value) == ("low", "high") and low.confidence > 0.8
    assert 2.0 < low.weight <= 2.6 and re.match(r"median F0 1(19|2[0-2]) Hz", low.evidence), low.evidence
    assert all(r.video_id == "v" and r.clip_index == 0 and 0 <= r.confidence <= 1 for r in rows)
    [shot] = measures.shots
    assert (shot.kind, shot.start_s, shot.end_s, shot.cut) == ("still", 0.0, 6.0, False) and shot.confidence > 0.9


def test_unidentified_observations_give_no_rows_and_no_shot_stage_gives_no_shots() -> None:
    perception = perceived()
    rows, _ = entity_attributes(measure_clip(perception, appearance=False), perception.tracks, perception.voices)
    assert rows == []
    assert measure_clip(perception, appearance=False).shots == ()


def test_a_failing_estimator_is_a_recorded_skip_and_the_others_still_count() -> None:
    broken = [np.zeros((HEIGHT, WIDTH), dtype=np.float32)] * 12  # not RGB uint8: still/live cannot read it
    perception = perceived(images=broken, shots=(Shot(0.0, 6.0, cut=False),))
    measures = measure_clip(perception, appearance=False)
    assert [name for name, _ in measures.skipped] == ["still or live"]
    assert "ValueError" in measures.skipped[0][1] and measures.shots == ()
    rows, _ = entity_attributes(measures, *identified(perception))
    assert {r.name for r in rows} == {"position", "depth", "voice_register"}


def row(name: str, value: str, confidence: float, weight: float, clip: int = 0) -> EntityAttribute:
    return EntityAttribute(1, "v", clip, name, value, confidence, weight)


def test_rows_combine_by_weighted_vote_over_clips() -> None:
    combined = combine_attributes([
        row("position", "left", 0.9, 27), row("position", "right", 0.8, 3, clip=1),
        row("voice_register", "uncertain", 0.0, 2.0), row("voice_register", "low", 0.8, 6.0, clip=1),
        row("apparent_age", "40", 0.6, 3), row("apparent_age", "60", 1.0, 1, clip=1),
        row("apparent_gender", "male", 0.99, 3), row("depth", "foreground", 0.7, 0.0)])
    assert combined == (("voice", "low", 0.6), ("position", "left", 0.81), ("apparent gender", "male", 0.99),
                        ("apparent age", "40", 0.7))  # depth rests on no evidence: left out
    assert combine_attributes([row("voice_register", "uncertain", 0.0, 3.0)]) == (("voice", "uncertain", 0.0),)


def test_a_profile_describes_what_is_decided_in_one_phrase() -> None:
    person = Person(1, "<character_1>", "", (1,), (2,))
    profile = Profile(person, (), (("voice", "low", 0.8), ("position", "left", 0.9), ("depth", "background", 0.7),
                                   ("apparent gender", "male", 0.85), ("apparent age", "60", 0.3)))
    assert profile.describe() == "a low voice; usually on the left, in the background; appears male"
    assert profile.attribute(Attribute.VOICE_REGISTER) == ("low", 0.8) and profile.attribute(Attribute.EYEWEAR) is None
    assert profile.to_dict()["description"] == profile.describe()
    unsure = Profile(person, (), (("voice", "uncertain", 0.0), ("position", "centre", 0.4)))
    assert unsure.describe() == "" and unsure.describe(min_confidence=0.3) == "usually in the centre"


def test_one_attribute_enum_names_a_row_as_perception_stores_it_and_a_profile_labels_it() -> None:
    """Issue 47: the stored name, the profile's label and the lookup were three spellings in three modules (a
    profile was looked up by ``"voice"``, its rows stored as ``voice_register``); one member now carries them."""
    assert [a.value for a in Attribute] == ["voice_register", "position", "depth", "apparent_gender",
                                            "apparent_age", "eyewear", "clothes"]  # the stored names
    assert [a.label for a in Attribute] == ["voice", "position", "depth", "apparent gender", "apparent age",
                                            "eyewear", "clothes"]
    assert Attribute.APPARENT_AGE.numeric and not Attribute.APPARENT_GENDER.numeric
    assert label_of("apparent_gender") == "apparent gender" and label_of("skin_tone") == "skin tone"
    assert "voice_register" in STORED and "voice" not in STORED
    perception = perceived()
    rows, _ = entity_attributes(measure_clip(perception, appearance=False), *identified(perception))
    assert rows and all(type(r.name) is str and r.name in STORED for r in rows)  # plain strings, as stored
    rows = [r for r in rows if r.entity_id in (1, 3)]  # face 1 (left) and voice 3 (low): one person
    rows += [row("apparent_gender", "female", 0.9, 3), row("eyewear", "glasses", 0.4, 3)]
    profile = Profile(Person(1, "<character_1>", "", (1,), (3,)), (), combine_attributes(rows))
    assert profile.attribute(Attribute.APPARENT_GENDER) == ("female", 0.9)
    assert profile.attribute(Attribute.EYEWEAR) == ("glasses", 0.4)  # measured, below DESCRIBE_MIN: not described
    found = {a: profile.attribute(a) for a in Attribute}
    assert {a for a, v in found.items() if v is not None} == {Attribute(r.name) for r in rows}
    assert profile.describe() == "a low voice; usually on the left; appears female"
    dressed = Profile(profile.person, (), combine_attributes([*rows, row("clothes", "dark", 0.8, 1)]))
    assert dressed.attribute(Attribute.CLOTHES) == ("dark", 0.8)
    assert dressed.describe() == "a low voice; usually on the left; appears female; dark clothes"


def test_shot_kind_weighs_its_parts_by_overlap() -> None:
    records = [ShotRecord("v", 0, 0.0, 10.0, False, "still", 0.9), ShotRecord("v", 0, 10.0, 12.0, True, "live", 0.9),
               ShotRecord("v", 1, 12.0, 20.0, False, "uncertain")]
    assert shot_kind(records, 0.0, 10.0) == ("still", 0.9)
    assert shot_kind(records, 0.0, 12.0) == ("still", 0.75)
    assert shot_kind(records, 12.0, 20.0) == ("uncertain", 0.0)
    assert shot_kind(records, 30.0, 40.0) == (None, 0.0)


# -------------------------------------------------------------------- the graph, on both stores

def scene(store: Any) -> dict[str, int]:
    """Video v1, clips 0 and 1: face a on the left (10 sightings, then 2 on the right), its linked voice low in
    both clips; two stored shots per clip (still 0-10 s, then live), no shot summaries."""
    from m3agent.domain import FaceVoiceLink, LinkSource

    store.add_video(Video("v1", "/v1.mp4", 60.0, metadata={"width": 640, "height": 360}))
    vec = unit_vectors(2)
    with store.clip(clip_of("v1", 0)) as w:
        a = w.add_entity(EntityKind.FACE, [vec[0]]).id
        voice = w.add_entity(EntityKind.VOICE, [vec[1]]).id
        for k in range(10):
            w.add_face(FaceObservation(0, 1.0 + k, LEFT, 0.99, entity_id=a))
        w.add_voice(VoiceSegment(0, 2.0, 6.0, "hello", entity_id=voice))
        w.set_link(FaceVoiceLink(a, voice, 1.0, LinkSource.AV, "test"))
        w.add_attribute(EntityAttribute(a, "v1", 0, "position", "left", 0.95, 10))
        w.add_attribute(EntityAttribute(voice, "v1", 0, "voice_register", "low", 0.9, 3.1, "median F0 118 Hz"))
        w.add_attribute(EntityAttribute(a, "v1", 0, "apparent_gender", "male", 0.9, 3))
        w.add_shot(ShotRecord("v1", 0, 0.0, 10.0, False, "still", 0.95))
        w.add_shot(ShotRecord("v1", 0, 10.0, 30.0, True, "live", 0.9))
    with store.clip(clip_of("v1", 1)) as w:
        for k in range(2):
            w.add_face(FaceObservation(1, 31.0 + k, RIGHT, 0.99, entity_id=a))
        w.add_attribute(EntityAttribute(a, "v1", 1, "position", "right", 0.8, 2))
        w.add_attribute(EntityAttribute(voice, "v1", 1, "voice_register", "uncertain", 0.0, 1.0))
        w.add_attribute(EntityAttribute(a, "v1", 1, "eyewear", "none", 0.9, 3))
        w.add_shot(ShotRecord("v1", 1, 30.0, 60.0, False, "live", 0.8))
    return {"a": a, "voice": voice}


@pytest.fixture
def graph(make_store: Callable[[], Any]) -> tuple[EntityGraph, dict[str, int]]:
    store = make_store()
    return EntityGraph(store), scene(store)


def test_profile_combines_the_attributes_of_a_persons_face_and_voice(
        graph: tuple[EntityGraph, dict[str, int]]) -> None:
    g, ids = graph
    profile = g.profile(g.person_of_entity(ids["a"]))
    # voice: 0.9 * 3.1 s low against 1 s uncertain; position: 0.95 * 10 sightings left against 0.8 * 2 right
    assert profile.attributes == (("voice", "low", 0.68), ("position", "left", 0.792),
                                  ("apparent gender", "male", 0.9), ("eyewear", "none", 0.9))
    assert profile.describe() == "a low voice; usually on the left; appears male"
    assert profile.to_dict()["attributes"][0] == {"name": "voice", "value": "low", "confidence": 0.68}


def test_shots_carry_still_or_live_and_a_moment_shows_it(graph: tuple[EntityGraph, dict[str, int]]) -> None:
    g, ids = graph
    shots = g.shots("v1")  # no shot summaries: the stored shots, joined across the clip boundary
    assert [(s.start_s, s.end_s, s.opens_scene, s.kind) for s in shots] == [(0.0, 10.0, True, "still"),
                                                                           (10.0, 60.0, True, "live")]
    assert shots[0].kind_confidence == 0.95 and shots[1].kind_confidence == pytest.approx(0.84)
    assert [p.face_ids for p in shots[0].people] == [(ids["a"],)]
    moment = g.at("v1", 5.0)
    assert moment.shot is not None and moment.shot.kind == "still"
    assert moment.to_dict()["shot"]["kind"] == "still"


# -------------------------------------------------------------------- a real ingest

@pytest.fixture(scope="module")
def debate_memory(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from m3agent.pipeline import ingest_source
    from m3agent.settings import load_settings

    db = tmp_path_factory.mktemp("debate") / "debate.db"
    video = media_dir / "video" / "iianet_debate_trump_clinton.mp4"
    settings = load_settings(memory=str(db), perception={"asr_model": "tiny.en"})
    report = ingest_source(settings, str(video), show_progress=False)
    assert report.clips_done == 1 and not report.clips_failed
    assert not [p for p in report.problems if "attribute" in p], report.problems
    assert "attributes" in report.stage_seconds
    return db


@pytest.mark.slow
def test_debate_people_get_their_side_of_the_split_screen_and_a_voice_register(debate_memory: Path) -> None:
    from m3agent.perception.attributes.clip import appearance_available
    from m3agent.store import open_store

    with open_store(str(debate_memory), readonly=True, create=False) as store:
        faces = store.entities(EntityKind.FACE)
        voices = store.entities(EntityKind.VOICE)
        seen = store.faces("iianet_debate_trump_clinton")
        centres = {e.id: float(np.median([(f.bbox.x1 + f.bbox.x2) / 2 for f in seen if f.entity_id == e.id]))
                   for e in faces}
        rows = store.entity_attributes([e.id for e in faces + voices])
        g = EntityGraph(store)
        described = {e.id: g.profile(g.person_of_entity(e.id)) for e in faces}
        shots = g.shots("iianet_debate_trump_clinton")
    assert len(faces) == 2
    left = min(centres, key=centres.__getitem__)
    side = {e: "left" if e == left else "right" for e in centres}  # Trump left, Clinton right
    assert {r.entity_id: r.value for r in rows if r.name == "position"} == side
    assert all(r.value == "foreground" for r in rows if r.name == "depth")
    registers = {r.entity_id: r for r in rows if r.name == "voice_register"}
    assert set(registers) == {v.id for v in voices}, "every voice entity of the debate gets a register"
    assert all("median F0" in r.evidence and r.weight > 0 for r in registers.values())
    for face, where in side.items():
        value, confidence = described[face].attribute(Attribute.POSITION) or ("", 0.0)
        assert value == where and confidence > 0.5
        assert f"usually on the {where}" in described[face].describe()
    if appearance_available():  # Clinton (right) appears female, Trump (left) male
        gender = {r.entity_id: r.value for r in rows if r.name == "apparent_gender"}
        assert gender == {face: "female" if where == "right" else "male" for face, where in side.items()}
    eyewear = {r.entity_id: r.value for r in rows if r.name == "eyewear"}
    assert set(eyewear) == set(side) and "glasses" not in eyewear.values(), "neither debater wears glasses"
    assert shots and all(s.kind == "live" for s in shots), "a filmed debate is live video"


def test_a_recall_question_shows_what_the_described_person_said_first(
        graph: tuple[EntityGraph, dict[str, int]]) -> None:
    """"What does the woman say ..." keeps every memory but puts a man's words (by his measured gender) after the
    rest, and a named moment ("in the first scene") before what lies outside it."""
    from m3agent.control.modes.grounded import described_first
    from m3agent.control.results import Hit
    from m3agent.control.retrieval.rerank import Candidate
    from m3agent.graph.references import Reference

    g, ids = graph
    man = g.person_of_entity(ids["a"]).tag

    def said(text: str, start: float) -> Candidate:
        memory = Memory(kind=MemoryKind.EPISODIC, text=text, video_id="v1", clip_index=int(start // 30),
                        start_s=start, end_s=start + 2.0)
        return Candidate(text, Hit(memory, text), 1.0)

    his, theirs, later = (said(f'At 0:02 {man} says: "hello"', 2.0), said("At 0:40 <character_99> says: \"hi\"", 40.0),
                          said("On screen 0:50: EXIT", 50.0))
    order = described_first(g, "v1", Reference("woman"), [his, theirs, later])
    assert order == [theirs, later, his]  # unknown tags and lines without a speaker keep their place
    assert described_first(g, "v1", Reference("man"), [theirs, his]) == [theirs, his]  # he fits: order kept
    assert described_first(g, "v1", Reference("none", scene="first"), [later, his]) == [his, later]
    assert described_first(g, "v1", Reference("person"), [later, his]) == [later, his]  # nothing to check
    # "the man with glasses": he is measured without them, so his words go last although he is a man
    assert described_first(g, "v1", Reference("man", wears="glasses"), [his, theirs, later]) == [theirs, later, his]
    # "in the debate, what does the woman say": the scenes the question describes by content order like a moment;
    # a moment the plan names wins over them
    assert described_first(g, "v1", Reference("person"), [his, theirs, later], [(35.0, 45.0)]) == [theirs, his, later]
    assert described_first(g, "v1", Reference("person"), [later, theirs, his], [(0.0, 5.0), (48.0, 55.0)]) \
        == [later, his, theirs]
    assert described_first(g, "v1", Reference("none", scene="first"), [later, his], [(48.0, 55.0)]) == [his, later]
