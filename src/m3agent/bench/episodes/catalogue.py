"""The catalogue of annotated media pieces that generated evaluation episodes are made of.

``bench/data/catalogue_v1.json`` describes, by hand, every usable piece of ``../shared/media``: a video, a still
photo under an audio file, or a dark screen under an audio file; who is on screen (where, how they look, their
identity key shared across pieces), every voice heard, speech lines with times inside the piece, what the speech
is about, and how a question names the piece. Ground truth of a generated episode follows from these fields and
the order of its parts (:mod:`m3agent.bench.episodes.seeds`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from m3agent.bench.episodes.people_eval import EvalPart
from m3agent.errors import BenchmarkError

DEFAULT_CATALOGUE = "catalogue_v1"
PieceKind = Literal["video", "still", "dark"]
POSITIONS = ("left", "right", "center", "foreground", "background")
VOICE_KINDS = ("man", "woman", "unknown")


@dataclass(frozen=True, slots=True)
class OnScreen:
    """A person in the picture. ``voice`` None: never heard here; ``speaks`` None: not known whether they talk."""

    who: str
    name: str | None
    look: str
    position: str
    voice: str | None
    speaks: bool | None


@dataclass(frozen=True, slots=True)
class Voice:
    """A voice heard in the piece (on or off screen); ``kind`` man, woman or unknown."""

    who: str
    name: str | None
    kind: str


@dataclass(frozen=True, slots=True)
class Line:
    """Speech from ``start`` to ``end`` seconds into the piece; ``who`` None when the speaker is not certain,
    ``text`` "unknown" when only the turn is known."""

    start: float
    end: float
    who: str | None
    text: str


@dataclass(frozen=True, slots=True)
class Gist:
    """What the speech of a piece is about, and the words a right recall holds one of."""

    text: str
    keywords: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Piece:
    """One annotated piece (see the catalogue's ``about``); ``lines`` None when no transcript exists."""

    id: str
    kind: PieceKind
    duration_s: float
    live: bool
    split_screen: bool
    scene: str
    label: str
    cues: tuple[str, ...]
    people: tuple[OnScreen, ...]
    voices: tuple[Voice, ...]
    on_screen: int | None
    lines: tuple[Line, ...] | None
    gist: Gist | None
    sounds: tuple[str, ...]
    video: str | None = None
    image: str | None = None
    audio: str | None = None
    offset_s: float = 0.0
    seconds: float | None = None

    def files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.video, self.image, self.audio) if f is not None)

    def eval_part(self, part_id: str) -> EvalPart:
        """The part of an episode that plays this piece, in the form the episode builder takes."""
        return EvalPart(part_id, video=self.video, image=self.image, audio=self.audio, offset_s=self.offset_s,
                        seconds=self.seconds, people=self.scene)

    def seen(self, who: str) -> bool:
        return any(p.who == who for p in self.people)

    def heard(self, who: str) -> bool:
        return any(v.who == who for v in self.voices)


@dataclass(frozen=True, slots=True)
class Catalogue:
    name: str
    about: str
    pieces: tuple[Piece, ...]
    digest: str
    """The first 12 hex digits of the JSON's sha256: generated episodes are cached under it."""

    def piece(self, piece_id: str) -> Piece:
        for p in self.pieces:
            if p.id == piece_id:
                return p
        raise BenchmarkError(f"no piece {piece_id!r} in {self.name}")


def load_catalogue(name: str = DEFAULT_CATALOGUE) -> Catalogue:
    """The packaged catalogue ``name``, checked (unique ids, known kinds and positions, lines inside the piece)."""
    resource = resources.files("m3agent") / "bench" / "data" / f"{name}.json"
    if not resource.is_file():
        raise BenchmarkError(f"no catalogue {name!r}", hint=f"the packaged one is {DEFAULT_CATALOGUE!r}")
    text = resource.read_text(encoding="utf-8")
    raw = json.loads(text)
    pieces = tuple(_piece(p) for p in raw["pieces"])
    _check(pieces)
    return Catalogue(raw["name"], raw["about"], pieces, hashlib.sha256(text.encode()).hexdigest()[:12])


def _piece(raw: dict[str, Any]) -> Piece:
    lines = raw.get("lines", "unknown")
    gist = raw.get("gist")
    return Piece(
        id=raw["id"], kind=raw["kind"], duration_s=float(raw["duration_s"]), live=bool(raw["live"]),
        split_screen=bool(raw.get("split_screen", False)), scene=raw["scene"], label=raw["label"],
        cues=tuple(raw["cues"]), people=tuple(OnScreen(**p) for p in raw["people"]),
        voices=tuple(Voice(v["who"], v["name"], v["voice"]) for v in raw["voices"]), on_screen=raw["on_screen"],
        lines=None if lines == "unknown" else tuple(Line(**line) for line in lines),
        gist=None if gist is None else Gist(gist["text"], tuple(gist["keywords"])), sounds=tuple(raw["sounds"]),
        video=raw.get("video"), image=raw.get("image"), audio=raw.get("audio"),
        offset_s=float(raw.get("offset_s", 0.0)), seconds=raw.get("seconds"))


def _check(pieces: tuple[Piece, ...]) -> None:
    ids = [p.id for p in pieces]
    if len(set(ids)) != len(ids):
        raise BenchmarkError("the catalogue repeats a piece id")
    for p in pieces:
        wrong = [
            p.kind not in ("video", "still", "dark"),
            (p.kind == "video") != (p.video is not None),
            p.kind != "video" and p.audio is None,
            (p.kind == "still") != (p.image is not None),
            any(o.position not in POSITIONS for o in p.people),
            any(v.kind not in VOICE_KINDS for v in p.voices),
            any(not 0 <= line.start < line.end <= p.duration_s + 0.1 for line in p.lines or ()),
            not p.cues or not p.id.isidentifier(),
        ]
        if any(wrong):
            raise BenchmarkError(f"catalogue piece {p.id!r} is malformed (check {wrong.index(True)})")
