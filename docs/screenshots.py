"""The README's screenshots of the inspector (the People page and a video page's timeline), from synthetic data.

The shared test media are licensed and may not appear in the README, so everything shown here is made by this
script: a 30-second cartoon cooking show and a 12-second market visit (PIL drawings of people on coloured sets,
shot changes, a title card, humming "voices" with syllable rhythm, applause as noise), encoded with PyAV
(H.264 + AAC, so the browser's player plays it), and a memory written through the store's normal write API:
videos, clips, face entities with observations and crops cut from the very frames, voice entities with their
segments and WAV snippets, face-voice links, names, measured attributes, shots, shot summaries, utterances and
facts. The real app (:func:`m3agent.server.app.create_app`) serves it on 127.0.0.1 and headless Chromium
(Selenium, as tests/browser_helpers.py drives it) takes the pictures, written to ``docs/images/`` as palette
PNGs under ~200 KB.

    .venv/bin/python docs/screenshots.py [--keep DIR]

Needs the server extra, selenium, and Debian's chromium + chromium-driver. ``--keep DIR`` leaves the video and
the memory there (served with DIR in ``server.allowed_folders``, they show the same inspector); by default they
go to a temporary folder. The drawing is deterministic, so a rerun gives the same pictures up to the browser's fonts.
"""

from __future__ import annotations

import argparse
import io
import math
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image, ImageDraw

    from m3agent.store.protocol import ClipWriter

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
W, H = 1280, 720
FPS = 10
RATE = 48_000  # the video's audio
SNIPPET_RATE = 16_000  # the stored voice snippets
SAMPLE_S = 0.5  # faces are observed every half second, as ingest samples them
MAX_BYTES = 200_000
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


# the cast ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Look:
    """How a cartoon person is drawn."""

    skin: tuple[int, int, int]
    hair: tuple[int, int, int]
    shirt: tuple[int, int, int]
    style: str  # "bun", "short", "long", "cap"
    glasses: bool = False


@dataclass(frozen=True, slots=True)
class Role:
    """One person of the memory: a name ("" for someone the memory has not named), a look (None: only heard),
    a voice pitch (None: never speaks) and what is measured of them."""

    key: str
    name: str
    look: Look | None
    pitch_hz: float | None
    attributes: tuple[tuple[str, str, float], ...]  # (stored name, value, confidence)


CAST = (
    Role("maya", "Maya Ortiz", Look((224, 172, 134), (60, 35, 25), (214, 69, 65), "bun"), 215.0,
         (("position", "left", 0.9), ("apparent_gender", "female", 0.93), ("apparent_age", "34", 0.8),
          ("voice_register", "high", 0.85))),
    Role("tom", "Tom Becker", Look((238, 200, 170), (150, 150, 150), (255, 255, 255), "short", True), 112.0,
         (("position", "right", 0.86), ("apparent_gender", "male", 0.95), ("apparent_age", "52", 0.82),
          ("eyewear", "glasses", 0.9), ("voice_register", "low", 0.88))),
    Role("priya", "Priya Nair", Look((150, 100, 70), (20, 20, 30), (60, 140, 200), "long"), None,
         (("position", "right", 0.8), ("apparent_gender", "female", 0.9), ("apparent_age", "27", 0.76))),
    Role("guest", "", Look((200, 150, 110), (90, 60, 30), (90, 160, 90), "cap"), None,
         (("depth", "background", 0.92), ("apparent_gender", "male", 0.74))),
    Role("narrator", "", None, 98.0, (("voice_register", "low", 0.9),)),
    Role("vendor", "", Look((230, 190, 150), (235, 235, 235), (240, 170, 60), "bun", True), 180.0,
         (("position", "right", 0.91), ("apparent_gender", "female", 0.9), ("apparent_age", "63", 0.7),
          ("eyewear", "glasses", 0.85))),
)
ROLES = {r.key: r for r in CAST}


@dataclass(frozen=True, slots=True)
class Placed:
    """A person in a shot: where the head's centre is (pixels) and how big (head height in pixels)."""

    key: str
    x: int
    y: int
    size: int


@dataclass(frozen=True, slots=True)
class Shot:
    start_s: float
    end_s: float
    kind: str  # "live" or "still"
    set: str  # the background drawn
    people: tuple[Placed, ...]
    objects: tuple[str, ...] = ()
    sounds: tuple[str, ...] = ()
    text: str = ""


@dataclass(frozen=True, slots=True)
class Line:
    key: str
    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True, slots=True)
class Episode:
    video_id: str
    title: str
    duration_s: float
    shots: tuple[Shot, ...]
    lines: tuple[Line, ...]
    facts: tuple[tuple[str, str], ...]  # (person key, fact)


SHOW = Episode(
    "sunday-kitchen-12", "Sunday Kitchen, episode 12", 30.0,
    (Shot(0.0, 9.0, "live", "kitchen", (Placed("maya", 420, 300, 150), Placed("tom", 860, 290, 160)),
          objects=("pot", "cutting board")),
     Shot(9.0, 16.0, "live", "closeup", (Placed("tom", 430, 320, 230), Placed("priya", 930, 340, 190)),
          objects=("bowl",)),
     Shot(16.0, 21.0, "still", "card", (), text="Tomato soup · 20 minutes · serves 4"),
     Shot(21.0, 30.0, "live", "wide", (Placed("guest", 150, 170, 56), Placed("maya", 330, 360, 120),
                                       Placed("tom", 640, 350, 125), Placed("priya", 950, 365, 115)),
          objects=("pot", "table"), sounds=("applause",))),
    (Line("maya", 0.8, 3.8, "Welcome back to Sunday Kitchen. Today Tom Becker shows us his tomato soup."),
     Line("tom", 4.5, 8.5, "Thanks, Maya. It all starts with ripe tomatoes and a lot of patience."),
     Line("tom", 9.5, 14.0, "Priya, could you pass me the basil? Just a handful, thank you."),
     Line("narrator", 16.5, 20.5, "Roast the tomatoes for twenty minutes, then blend them with the stock."),
     Line("maya", 22.0, 26.0, "That smells wonderful. We will be right back after the break.")),
    (("maya", "is the host of Sunday Kitchen"), ("tom", "is a chef who cooks a tomato soup with basil"),
     ("priya", "assists Tom Becker in the kitchen")),
)
MARKET = Episode(
    "market-visit", "A visit to the market", 12.0,
    (Shot(0.0, 12.0, "live", "market", (Placed("maya", 400, 320, 170), Placed("vendor", 880, 330, 165)),
          objects=("tomatoes", "crate")),),
    (Line("maya", 1.0, 4.0, "These tomatoes look perfect for the soup."),
     Line("vendor", 4.8, 9.5, "Picked this morning. Take the red ones, they are the sweetest.")),
    (("maya", "buys tomatoes at the market"),),
)
EPISODES = (SHOW, MARKET)


# drawing ----------------------------------------------------------------------------------------------------
def _font(size: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.truetype(FONT, size)
    except OSError:
        return ImageFont.load_default()


def draw_set(draw: ImageDraw.ImageDraw, name: str, text: str) -> None:
    """The background of a shot."""
    if name == "card":
        draw.rectangle((0, 0, W, H), fill=(32, 70, 52))
        draw.rounded_rectangle((140, 220, W - 140, H - 220), 30, outline=(240, 220, 160), width=6)
        font = _font(54)
        box = draw.textbbox((0, 0), text, font=font)
        draw.text(((W - box[2]) / 2, (H - box[3]) / 2), text, fill=(250, 240, 210), font=font)
        return
    if name == "market":
        draw.rectangle((0, 0, W, H), fill=(150, 200, 235))
        for i in range(8):  # awning stripes
            draw.rectangle((i * 160, 0, i * 160 + 80, 110), fill=(220, 60, 60))
            draw.rectangle((i * 160 + 80, 0, i * 160 + 160, 110), fill=(245, 245, 240))
        draw.rectangle((0, 560, W, H), fill=(140, 95, 55))
        for i in range(26):
            x = 40 + i * 48
            draw.ellipse((x, 585, x + 40, 625), fill=(210, 40, 35))
        return
    wall = {"kitchen": (246, 226, 190), "closeup": (236, 214, 176), "wide": (240, 222, 186)}[name]
    draw.rectangle((0, 0, W, H), fill=wall)
    for x in range(0, W, 80):  # tiles
        draw.line((x, 0, x, 420), fill=(226, 204, 168), width=2)
    for y in range(0, 420, 80):
        draw.line((0, y, W, y), fill=(226, 204, 168), width=2)
    draw.rectangle((0, 540, W, H), fill=(120, 80, 50))  # the counter
    draw.rectangle((0, 530, W, 545), fill=(90, 60, 40))
    if name != "closeup":
        draw.ellipse((560, 470, 720, 560), fill=(120, 120, 130))  # a pot
        draw.rectangle((570, 500, 710, 555), fill=(120, 120, 130))
        draw.rectangle((180, 560, 380, 580), fill=(200, 160, 110))  # a board
    else:
        draw.ellipse((620, 560, 820, 640), fill=(250, 250, 250))  # a bowl
        draw.ellipse((650, 570, 790, 610), fill=(200, 60, 40))


def draw_person(draw: ImageDraw.ImageDraw, look: Look, p: Placed, mouth_open: float) -> tuple[int, int, int, int]:
    """A cartoon person with the head centred at ``p``; returns the face's box (x1, y1, x2, y2)."""
    s = p.size
    hw, hh = int(s * 0.38), s // 2
    x, y = p.x, p.y
    draw.rounded_rectangle((x - int(s * 0.8), y + int(s * 0.55), x + int(s * 0.8), y + int(s * 2.4)),
                           int(s * 0.3), fill=look.shirt, outline=_darker(look.shirt), width=3)
    draw.rectangle((x - s // 8, y + hh - 6, x + s // 8, y + int(s * 0.62)), fill=look.skin)  # neck
    if look.style == "long":
        draw.rounded_rectangle((x - hw - 12, y - hh + 10, x + hw + 12, y + int(s * 0.6)), 30, fill=look.hair)
    draw.ellipse((x - hw, y - hh, x + hw, y + hh), fill=look.skin)
    if look.style == "bun":
        draw.ellipse((x - s // 6, y - hh - s // 5, x + s // 6, y - hh + s // 10), fill=look.hair)
        draw.chord((x - hw, y - hh, x + hw, y + hh // 3), 180, 360, fill=look.hair)
    elif look.style == "cap":
        draw.chord((x - hw - 4, y - hh - 6, x + hw + 4, y + hh // 4), 180, 360, fill=(50, 90, 170))
        draw.rectangle((x - hw - 4, y - hh // 4 - 6, x + hw + s // 4, y - hh // 4 + 2), fill=(50, 90, 170))
    else:
        draw.chord((x - hw, y - hh, x + hw, y + hh // 4), 180, 360, fill=look.hair)
    eye_y, eye_dx, eye_r = y - s // 14, int(hw * 0.42), max(2, s // 28)
    for dx in (-eye_dx, eye_dx):
        draw.ellipse((x + dx - eye_r, eye_y - eye_r, x + dx + eye_r, eye_y + eye_r), fill=(30, 30, 40))
        if look.glasses:
            r = eye_r * 3
            draw.ellipse((x + dx - r, eye_y - r, x + dx + r, eye_y + r), outline=(30, 30, 40), width=max(2, s // 60))
    if look.glasses:
        draw.line((x - eye_dx + eye_r * 3, eye_y, x + eye_dx - eye_r * 3, eye_y), fill=(30, 30, 40), width=2)
    mouth_w, mouth_y = int(hw * 0.55), y + int(hh * 0.45)
    opening = max(2, int(s * 0.09 * mouth_open))
    if mouth_open > 0.05:
        draw.ellipse((x - mouth_w // 2, mouth_y - opening // 2, x + mouth_w // 2, mouth_y + opening // 2 + 2),
                     fill=(120, 30, 40))
    else:
        draw.arc((x - mouth_w // 2, mouth_y - s // 10, x + mouth_w // 2, mouth_y + s // 16), 20, 160,
                 fill=(120, 30, 40), width=max(2, s // 50))
    return x - hw, y - hh, x + hw, y + hh


def _darker(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    r, g, b = colour
    return int(r * 0.7), int(g * 0.7), int(b * 0.7)


def speaking(episode: Episode, key: str, t: float) -> float:
    """How open ``key``'s mouth is at ``t`` (0 when silent): the syllable rhythm of the audio."""
    for line in episode.lines:
        if line.key == key and line.start_s <= t <= line.end_s:
            return syllables(t - line.start_s)
    return 0.0


def syllables(t: float) -> float:
    """An envelope in [0, 1] at about four syllables a second, with short pauses between words."""
    pause = 1.0 if math.sin(2 * math.pi * 0.37 * t) > -0.6 else 0.35
    return float(abs(math.sin(2 * math.pi * 2.1 * t)) ** 0.7 * pause)


def render(episode: Episode, t: float) -> tuple[Image.Image, dict[str, tuple[int, int, int, int]]]:
    """The frame at ``t`` and each visible person's face box."""
    from PIL import Image, ImageDraw

    shot = shot_at(episode, t)
    image = Image.new("RGB", (W, H))
    draw = ImageDraw.Draw(image)
    draw_set(draw, shot.set, shot.text)
    boxes = {}
    for placed in sorted(shot.people, key=lambda p: p.size):  # the small, far ones first
        look = ROLES[placed.key].look
        assert look is not None
        sway = Placed(placed.key, placed.x + int(4 * math.sin(t * 1.3 + placed.x)), placed.y, placed.size)
        boxes[placed.key] = draw_person(draw, look, sway, speaking(episode, placed.key, t))
    return image, boxes


def shot_at(episode: Episode, t: float) -> Shot:
    return next((s for s in episode.shots if s.start_s <= t < s.end_s), episode.shots[-1])


# audio -----------------------------------------------------------------------------------------------------
def soundtrack(episode: Episode, rate: int) -> np.ndarray:
    """Mono float samples: each line hummed at its speaker's pitch with the syllable rhythm, applause as noise."""
    import numpy as np

    n = int(episode.duration_s * rate)
    out = np.zeros(n, dtype=np.float32)
    rng = np.random.default_rng(7)
    for line in episode.lines:
        pitch = ROLES[line.key].pitch_hz
        assert pitch is not None
        a, b = int(line.start_s * rate), int(line.end_s * rate)
        t = np.arange(b - a) / rate
        f0 = pitch * (1 + 0.08 * np.sin(2 * np.pi * 0.9 * t))  # intonation
        phase = 2 * np.pi * np.cumsum(f0) / rate
        voice = sum(np.sin(k * phase) / k for k in range(1, 6))
        envelope = np.array([syllables(x) for x in t[::160]]).repeat(160)[: len(t)]
        out[a:b] += (0.12 * voice * envelope).astype(np.float32)
    for shot in episode.shots:
        if "applause" in shot.sounds:
            a, b = int((shot.end_s - 3.0) * rate), int(shot.end_s * rate)
            claps = rng.normal(0, 1, b - a) * (rng.random(b - a) < 0.02)
            out[a:b] += (0.3 * np.convolve(claps, np.exp(-np.arange(200) / 40), "same")).astype(np.float32)
    return np.clip(out, -1, 1)


def encode(episode: Episode, path: Path) -> dict[str, list[tuple[float, tuple[int, int, int, int], bytes]]]:
    """Write ``episode`` as H.264 + AAC to ``path``; returns each person's sampled face boxes and crops."""
    import av
    import numpy as np

    seen: dict[str, list[tuple[float, tuple[int, int, int, int], bytes]]] = {}
    with av.open(str(path), "w", options={"movflags": "+faststart"}) as container:
        video = container.add_stream("libx264", rate=FPS, options={"crf": "30", "preset": "veryfast"})
        video.width, video.height, video.pix_fmt = W, H, "yuv420p"
        audio = container.add_stream("aac", rate=RATE, layout="mono")
        for i in range(int(episode.duration_s * FPS)):
            t = i / FPS
            image, boxes = render(episode, t)
            if abs(t / SAMPLE_S - round(t / SAMPLE_S)) < 1e-6:
                for key, box in boxes.items():
                    seen.setdefault(key, []).append((t, box, crop(image, box)))
            frame = av.VideoFrame.from_ndarray(np.asarray(image), format="rgb24")
            for packet in video.encode(frame):
                container.mux(packet)
        for packet in video.encode(None):
            container.mux(packet)
        samples = soundtrack(episode, RATE)
        step = 1024
        for start in range(0, len(samples), step):
            chunk = samples[start:start + step]
            sound = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="fltp", layout="mono")
            sound.sample_rate, sound.pts = RATE, start
            for packet in audio.encode(sound):
                container.mux(packet)
        for packet in audio.encode(None):
            container.mux(packet)
    return seen


def crop(image: Image.Image, box: tuple[int, int, int, int]) -> bytes:
    """The face's crop as ingest keeps it: the box widened by a fifth, as JPEG."""
    x1, y1, x2, y2 = box
    pad_x, pad_y = (x2 - x1) // 5, (y2 - y1) // 5
    part = image.crop((max(0, x1 - pad_x), max(0, y1 - pad_y), min(W, x2 + pad_x), min(H, y2 + pad_y)))
    buffer = io.BytesIO()
    part.resize((112, int(112 * part.height / part.width))).save(buffer, "JPEG", quality=88)
    return buffer.getvalue()


# the memory ------------------------------------------------------------------------------------------------
def write_memory(memory: Path, folder: Path) -> dict[str, int]:
    """Encode both episodes into ``folder`` and write the memory at ``memory`` through the store's write API;
    returns each person's first entity id (their face, else their voice), by cast key."""
    import numpy as np

    from m3agent.domain import Clip, EntityKind, FaceVoiceLink, LinkSource, Video
    from m3agent.embed.hashing import HashingEmbedder
    from m3agent.store import open_store

    embedder = HashingEmbedder(256)
    faces, voices = np.eye(128, dtype=np.float32), np.eye(256, dtype=np.float32)
    store = open_store(str(memory))
    store.set_embedding_model(embedder.name, embedder.dim)
    ids: dict[str, dict[str, int]] = {}
    with store:
        for episode in EPISODES:
            path = folder / f"{episode.video_id}.mp4"
            seen = encode(episode, path)
            store.add_video(Video(episode.video_id, str(path), duration_s=episode.duration_s,
                                  metadata={"width": W, "height": H, "title": episode.title}))
            with store.clip(Clip(episode.video_id, 0, 0.0, episode.duration_s)) as w:
                new: list[tuple[str, int, bool]] = []  # (person, entity, is a voice)
                for key in dict.fromkeys([*seen, *(line.key for line in episode.lines)]):
                    role, mine = ROLES[key], ids.setdefault(key, {})
                    if key in seen and "face" not in mine:
                        mine["face"] = w.add_entity(EntityKind.FACE, [faces[len(ids)]], role.name).id
                        new.append((key, mine["face"], False))
                    if "voice" not in mine and any(line.key == key for line in episode.lines):
                        mine["voice"] = w.add_entity(EntityKind.VOICE, [voices[len(ids)]], role.name).id
                        new.append((key, mine["voice"], True))
                        if "face" in mine:
                            w.set_link(FaceVoiceLink(mine["face"], mine["voice"], 0.92, LinkSource.AV,
                                                     "on screen with moving lips while the voice speaks"))
                write_clip(w, episode, seen, ids, embedder, voices)
                for key, entity, is_voice in new:  # measured once, where the person is first met
                    for name, value, confidence in ROLES[key].attributes:
                        if (name == "voice_register") == is_voice:
                            add_attribute(w, entity, episode.video_id, name, value, confidence)
    return {key: values.get("face", values.get("voice", 0)) for key, values in ids.items()}


def add_attribute(w: ClipWriter, entity: int, video_id: str, name: str, value: str, confidence: float) -> None:
    from m3agent.domain import EntityAttribute

    w.add_attribute(EntityAttribute(entity, video_id, 0, name, value, confidence, 8.0, "synthetic"))


def write_clip(w: ClipWriter, episode: Episode, seen: dict[str, list[tuple[float, tuple[int, int, int, int], bytes]]],
               ids: dict[str, dict[str, int]], embedder: Any, voices: np.ndarray) -> None:
    """The clip's face observations, voice segments with snippets, shots, shot summaries, utterances and facts."""
    from m3agent.domain import BBox, FaceObservation, Memory, MemoryKind, ShotRecord, VoiceSegment
    from m3agent.media.snippets import wav_bytes
    from m3agent.memorize.writers.perception import PROVENANCE as SPEECH
    from m3agent.memorize.scene_memories import PROVENANCE as SCENE
    from m3agent.memorize.scene_memories import span
    from m3agent.text import clock

    def face(key: str) -> str:
        return f"<face_{ids[key]['face']}>"

    def voice(key: str) -> str:
        return f"<voice_{ids[key]['voice']}>"

    def remember(kind: MemoryKind, text: str, start: float, end: float, entities: tuple[int, ...],
                 provenance: str) -> None:
        w.add_memory(Memory(kind, text, episode.video_id, 0, start, end, entities, provenance=provenance,
                            embedding=embedder.embed([text])[0]))

    for key, sightings in seen.items():
        for t, (x1, y1, x2, y2), jpeg in sightings:
            w.add_face(FaceObservation(0, t, BBox(x1, y1, x2, y2), 0.98, quality=min(0.95, (y2 - y1) / 240),
                                       track=ids[key]["face"], crop_jpeg=jpeg, entity_id=ids[key]["face"]))
    audio = soundtrack(episode, SNIPPET_RATE)
    for line in episode.lines:
        entity = ids[line.key]["voice"]
        w.add_voice(VoiceSegment(0, line.start_s, line.end_s, line.text, speaker=entity,
                                 embedding=voices[entity % 256], entity_id=entity),
                    wav_bytes(audio[int(line.start_s * SNIPPET_RATE):int(line.end_s * SNIPPET_RATE)], SNIPPET_RATE))
        remember(MemoryKind.EPISODIC, f'At {clock(line.start_s)} {voice(line.key)} says: "{line.text}"',
                 line.start_s, line.end_s, (entity,), SPEECH)
    for i, shot in enumerate(episode.shots):
        w.add_shot(ShotRecord(episode.video_id, 0, shot.start_s, shot.end_s, i > 0, shot.kind, 0.9))
        parts = []
        people = [p for p in sorted(shot.people, key=lambda p: p.x) if p.key in ids and "face" in ids[p.key]]
        if people:
            parts.append("on screen " + ", ".join(f"{face(p.key)} ({place(p)})" for p in people))
        speakers = list(dict.fromkeys(line.key for line in episode.lines
                                      if line.start_s < shot.end_s and line.end_s >= shot.start_s))
        if speakers:
            parts.append("speaking " + ", ".join(voice(k) for k in speakers))
        if shot.text:
            parts.append(f'text "{shot.text}"')
        if shot.objects:
            parts.append("objects: " + ", ".join(shot.objects))
        if shot.sounds:
            parts.append("sounds: " + ", ".join(shot.sounds))
        opening = " (after a scene change)" if i > 0 else ""
        entities = tuple(ids[p.key]["face"] for p in people) + tuple(ids[k]["voice"] for k in speakers)
        remember(MemoryKind.EPISODIC, f"Shot {span(shot.start_s, shot.end_s)}{opening}: " + "; ".join(parts) + ".",
                 shot.start_s, shot.end_s, entities, SCENE)
        if shot.text:
            remember(MemoryKind.EPISODIC, f'On screen {span(shot.start_s, shot.end_s)}: "{shot.text}"',
                     shot.start_s, shot.end_s, (), SCENE)
    for key, fact in episode.facts:
        entity = ids[key]["face"]
        remember(MemoryKind.SEMANTIC, f"{face(key)} {fact}.", 0.0, episode.duration_s, (entity,), "synthetic")


def place(p: Placed) -> str:
    depth = "in the background" if p.size < 80 else ""
    across = "on the left" if p.x < 0.4 * W else "on the right" if p.x > 0.6 * W else "in the centre"
    return f"{across}, {depth}" if depth else across


# serving and the pictures ---------------------------------------------------------------------------------
@contextmanager
def serving(memory: Path, folder: Path, data: Path) -> Iterator[str]:
    """The real app on a free port of 127.0.0.1 (uvicorn in a thread); yields its base URL."""
    import uvicorn

    from m3agent.server.app import create_app
    from m3agent.settings import load_settings

    settings = load_settings(memory=str(memory), llm="none", embedder="hash",
                             server={"allowed_folders": [str(folder)], "data_dir": str(data),
                                     "consolidate_when_idle": False})
    server = uvicorn.Server(uvicorn.Config(create_app(settings, mcp=False), host="127.0.0.1", port=0,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def browser(width: int, height: int) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not binary or not driver:
        raise SystemExit("needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                "--hide-scrollbars", "--mute-audio", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(driver))


def until(driver: Any, script: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not driver.execute_script(script):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the page never satisfied: {script}")
        time.sleep(0.1)


IMAGES_LOADED = "return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"


def people_page(driver: Any, url: str, out: Path) -> None:
    driver.get(f"{url}/people")
    until(driver, f"return document.querySelectorAll('.people-cards .person').length == {len(CAST)}")
    until(driver, IMAGES_LOADED)
    time.sleep(0.5)
    save(driver, out)


def timeline_page(driver: Any, url: str, out: Path, at_s: float) -> None:
    driver.get(f"{url}/videos/{SHOW.video_id}")
    until(driver, "return document.getElementById('player').readyState >= 2")
    driver.execute_script("document.getElementById('player').currentTime = arguments[0]", at_s)
    until(driver, f"return document.getElementById('swimlanes').dataset.t == '{at_s:g}'")
    until(driver, IMAGES_LOADED)
    time.sleep(1.0)
    driver.execute_script("document.getElementById('swimlanes').scrollIntoView({block: 'end'})")
    time.sleep(0.3)
    save(driver, out)


def save(driver: Any, out: Path) -> None:
    """The window as a PNG, quantised to a palette until it is under :data:`MAX_BYTES`."""
    from PIL import Image

    image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    for colours in (256, 128, 96, 64):
        buffer = io.BytesIO()
        image.quantize(colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            buffer, "PNG", optimize=True)
        if buffer.tell() <= MAX_BYTES:
            break
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buffer.getvalue())
    print(f"{out}: {image.width}x{image.height}, {buffer.tell() // 1024} KB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, help="write the videos and the memory here and keep them")
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder of the PNGs (default docs/images)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = (args.keep or Path(tmp)).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        memory = folder / "memory.db"
        if memory.exists():
            raise SystemExit(f"{memory} exists: give --keep an empty folder")
        write_memory(memory, folder)
        with serving(memory, folder, Path(tmp) / "server") as url:
            driver = browser(1280, 900)
            try:
                people_page(driver, url, args.out / "inspector-people.png")
                driver.set_window_size(1280, 1000)
                timeline_page(driver, url, args.out / "inspector-timeline.png", 5.0)
            finally:
                driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
