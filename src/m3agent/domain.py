"""Typed, frozen domain values passed between the stages.

Values carry data only; persistence lives in the store. Embeddings are
``numpy.ndarray`` of ``float32`` and are compared by identity, not value,
so these dataclasses use ``eq=False`` where an array is a field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from m3agent import tags

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]
else:
    Vector = Any


ControlMode = Literal["agent", "baseline", "grounded", "select"]
"""How a question is answered (:mod:`m3agent.control.modes`); the one list of modes."""
ControlModeSetting = Literal["auto", ControlMode]
"""A configured mode: a :data:`ControlMode`, or ``auto`` (chosen from the LLM at run time)."""
CONTROL_MODES: tuple[ControlMode, ...] = get_args(ControlMode)
CONTROL_MODE_SETTINGS: tuple[ControlModeSetting, ...] = get_args(ControlModeSetting)


class EntityKind(enum.StrEnum):
    """What an entity is an identity of."""

    FACE = "face"
    VOICE = "voice"


class MemoryKind(enum.StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"


class ClipStatus(enum.StrEnum):
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Video:
    """A source ingested into a memory. ``video_id`` is unique in a store and names one file: ``fingerprint``
    (:mod:`m3agent.media.fingerprint`; ``""`` for a stream, or a video stored before fingerprints) tells files
    apart."""

    video_id: str
    source: str
    duration_s: float | None = None
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    fingerprint: str = ""


@dataclass(frozen=True, slots=True)
class Clip:
    """A consecutive time window of a video; ``index`` counts from 0."""

    video_id: str
    index: int
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class BBox:
    """Pixel box, corners inclusive-exclusive: (x1, y1) top-left, (x2, y2) bottom-right."""

    x1: float
    y1: float
    x2: float
    y2: float

    @property
    def width(self) -> float:
        return self.x2 - self.x1

    @property
    def height(self) -> float:
        return self.y2 - self.y1

    @property
    def area(self) -> float:
        return max(0.0, self.width) * max(0.0, self.height)


@dataclass(frozen=True, slots=True, eq=False)
class FaceObservation:
    """One face seen in one frame of a clip.

    ``track`` groups observations of one clip that belong to one face track;
    ``embedding`` is set only for the crops chosen to represent the track.
    ``mouth_motion`` is the active-speaker cue of :mod:`m3agent.perception.asd`: how much
    the mouth moved, beyond the rest of the face, since the track's previous sampled frame
    (``None`` when not measured, e.g. on a track's first frame).
    """

    clip_index: int
    time_s: float
    bbox: BBox
    det_score: float
    quality: float = 0.0
    track: int = -1
    embedding: Vector | None = None
    crop_jpeg: bytes | None = None
    entity_id: int | None = None
    id: int = 0  # store row id (0 until stored); what ``split_entity`` takes
    mouth_motion: float | None = None


@dataclass(frozen=True, slots=True)
class MouthMotion:
    """Active-speaker cue: mouth movement of face track ``track`` between two sampled frames.

    ``motion`` is the mouth region's normalised change from ``start_s`` to ``end_s`` minus that
    of the upper face (eyes, brow), so head movement and lighting changes cancel out; at video rate
    it is the mouth's optical-flow speed relative to the head instead (per second; the median over a
    sampling interval, :mod:`m3agent.perception.asd_video`). It is comparable over time for one face,
    not between faces (see :mod:`m3agent.perception.asd`).
    """

    track: int
    start_s: float
    end_s: float
    motion: float


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    start_s: float
    end_s: float
    probability: float = 1.0


@dataclass(frozen=True, slots=True, eq=False)
class VoiceSegment:
    """A stretch of speech by one speaker, with its transcript (absolute seconds)."""

    clip_index: int
    start_s: float
    end_s: float
    text: str
    speaker: int = -1
    embedding: Vector | None = None
    words: tuple[Word, ...] = ()
    entity_id: int | None = None
    language: str = ""
    id: int = 0  # store row id (0 until stored); what ``split_entity`` takes


@dataclass(frozen=True, slots=True)
class CarriedTurn:
    """Speech of one of a clip's speakers (``speaker``: ``VoiceSegment.speaker``) that the diarizer heard in the
    previous clip's last seconds (absolute seconds): the evidence that this voice continues one heard there."""

    speaker: int
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class Entity:
    """A persistent face or voice identity. ``id`` is the number in ``<face_N>``/``<voice_N>``."""

    id: int
    kind: EntityKind
    name: str = ""
    first_clip: int | None = None
    last_clip: int | None = None
    video_id: str | None = None
    n_observations: int = 0

    @property
    def tag(self) -> str:
        return tags.format_tag(self.kind, self.id)


@dataclass(frozen=True, slots=True)
class EntityMerge:
    """A recorded merge: ``absorbed_id`` was folded into ``keep_id`` by ``source`` ("auto" or "manual")
    for the reason in ``evidence``; ``undone_at`` is set once it was undone (the absorbed id is back)."""

    id: int
    keep_id: int
    absorbed_id: int
    kind: str
    source: str
    evidence: str
    video_id: str | None = None
    clip_index: int | None = None
    created_at: str = ""
    undone_at: str | None = None


@dataclass(frozen=True, slots=True)
class MergedEntity:
    """What a merge in force kept of the entity it absorbed (its snapshot), so a page can still show who that
    was: its name then and its observations (face sightings or voice segments, now the kept entity's)."""

    merge_id: int
    kind: str
    name: str
    observations: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Character:
    """A group of entities that are one person; ``id`` is stable across refreshes."""

    id: int
    entity_ids: tuple[int, ...]
    name: str = ""

    @property
    def tag(self) -> str:
        return tags.character(self.id)


class LinkSource(enum.StrEnum):
    """Where a face-voice link comes from."""

    AV = "av"  # who is on screen while the voice speaks (identity/linking.py)
    LLM = "llm"  # stated by a memorization model, checked against the clip (memorize/links.py)
    IMPORT = "import"  # read from an imported memory graph (importers/)
    MANUAL = "manual"  # set by a person or a test


@dataclass(frozen=True, slots=True)
class FaceVoiceLink:
    """Evidence that face entity ``face_id`` and voice entity ``voice_id`` are one person.

    The roles are fixed by the fields, never by which id is smaller. The store
    keeps every link written as a log; the latest of a pair wins, confidence 0
    revokes, and a link counts for characters when its confidence reaches the
    ``perception.link_accept_confidence`` setting. ``evidence`` says in words
    what the link rests on (seconds on screen, the model's statement, a graph node).
    """

    face_id: int
    voice_id: int
    confidence: float = 1.0
    source: LinkSource = LinkSource.LLM
    evidence: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Memory:
    """An episodic event or semantic fact, naming people only by entity tags.

    ``id`` is 0 for a memory not yet stored. ``clip_index`` is the clip that
    first produced it; ``last_clip_index`` the clip that last confirmed it.
    """

    kind: MemoryKind
    text: str
    video_id: str
    clip_index: int
    start_s: float
    end_s: float
    entity_ids: tuple[int, ...] = ()
    weight: float = 1.0
    confidence: float = 1.0
    provenance: str = ""
    id: int = 0
    last_clip_index: int | None = None
    embedding: Vector | None = None


@dataclass(frozen=True, slots=True)
class ConsolidatedClip:
    """A clip whose episodic memories a model has turned into semantic memories
    (:mod:`m3agent.memorize.consolidation.consolidate`).

    ``notes`` say what was refused (facts citing memories that were not shown, ungrounded names...);
    ``seconds`` is the wall time the clip's consolidation took.
    """

    video_id: str
    clip_index: int
    model: str
    notes: tuple[str, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ForgottenConsolidation:
    """What :meth:`MemoryStore.forget_consolidation` took back of one video's consolidation: ``facts`` it wrote
    (deleted), ``clips`` no longer recorded as consolidated, ``restored`` memories that stay, their weight and
    last confirmed clip put back as they were before."""

    video_id: str
    facts: int = 0
    clips: int = 0
    restored: int = 0


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Restricts a search. ``None`` fields do not restrict.

    ``before_clip`` is inclusive: clips ``0..before_clip`` are visible.
    ``start_s``/``end_s`` keep memories whose span overlaps the range.
    """

    video_ids: tuple[str, ...] | None = None
    before_clip: int | None = None
    start_s: float | None = None
    end_s: float | None = None
    kinds: tuple[MemoryKind, ...] | None = None
    entity_ids: tuple[int, ...] | None = None
    exclude_clips: frozenset[tuple[str, int]] = frozenset()


@dataclass(frozen=True, slots=True)
class ScoredMemory:
    memory: Memory
    score: float


@dataclass(frozen=True, slots=True, eq=False)
class Frame:
    """A decoded video frame: RGB ``uint8`` array of shape (H, W, 3), upright, at absolute ``time_s``."""

    time_s: float
    image: Any


@dataclass(frozen=True, slots=True)
class VideoSource:
    """A local video file that can be decoded again: ``path``, and ``origin_s``, the stream time at
    media time 0 (clip times plus ``origin_s`` are the file's presentation times)."""

    path: str
    origin_s: float = 0.0


@dataclass(frozen=True, slots=True, eq=False)
class ClipMedia:
    """What the media stage hands to perception for one clip.

    ``audio`` is mono float32 at ``audio_rate`` Hz covering exactly
    ``clip.start_s .. clip.end_s`` (``None`` when the source has no audio);
    ``frames`` are sampled at the configured rate (empty without video).
    ``problems`` lists recoverable decode issues (e.g. a corrupt tail).
    ``source`` is the file to decode again for more frames (active speakers at video rate);
    ``None`` for a live or growing source, which cannot be read twice.
    ``context_audio`` is the audio just before ``clip.start_s`` (the previous clip's last seconds, same rate),
    which the diarizer hears with the clip so a voice that runs over the boundary stays one speaker; ``None``
    for a first clip. ``context_frame`` is the previous clip's last sampled frame, against which a cut on this
    clip's first frame is seen; ``None`` for a first clip.
    """

    clip: Clip
    frames: tuple[Frame, ...]
    audio: Any | None
    audio_rate: int = 16000
    width: int = 0
    height: int = 0
    problems: tuple[str, ...] = ()
    source: VideoSource | None = None
    context_audio: Any | None = None
    context_frame: Frame | None = None


@dataclass(frozen=True, slots=True, eq=False)
class FaceTrack:
    """Faces of one person followed through one clip; ``best`` holds the embedded exemplars."""

    clip_index: int
    track: int
    observations: tuple[FaceObservation, ...]
    best: tuple[FaceObservation, ...]

    @property
    def start_s(self) -> float:
        return self.observations[0].time_s

    @property
    def end_s(self) -> float:
        return self.observations[-1].time_s


class SenseStage(enum.StrEnum):
    """An optional scene-perception stage (``settings.senses``); each has one typed output in :class:`ClipSenses`."""

    SHOTS = "shots"
    TEXT = "text"
    OBJECTS = "objects"
    SOUNDS = "sounds"


@dataclass(frozen=True, slots=True)
class Shot:
    """One camera shot inside a clip (absolute seconds). ``cut`` is True when the shot starts at a detected
    scene change; a clip's first shot has ``cut=False`` (it may continue the previous clip's shot)."""

    start_s: float
    end_s: float
    cut: bool
    change: float = 0.0  # frame-difference score at the start boundary (0 when not a cut)
    split_screen: bool = False  # two pictures side by side, a seam down the middle in most of its frames


@dataclass(frozen=True, slots=True)
class ShotRecord:
    """A shot of a clip as the memory keeps it (absolute seconds, ``cut`` as in :class:`Shot`) with what it shows:
    ``kind`` ``still`` (a photo, a slide, a title card), ``live`` (video) or ``uncertain``, with ``confidence``
    in [0, 1], ``motion`` (the median share of changed pixels, ``None`` when unmeasured) and ``evidence``."""

    video_id: str
    clip_index: int
    start_s: float
    end_s: float
    cut: bool
    kind: str = "uncertain"
    confidence: float = 0.0
    motion: float | None = None
    evidence: str = ""


@dataclass(frozen=True, slots=True)
class EntityAttribute:
    """A measured description of one entity in one clip: ``name`` (the value of a
    :class:`~m3agent.perception.attributes.names.Attribute`: ``voice_register``, ``position``, ``depth``,
    ``apparent_gender``, ``apparent_age``, ``eyewear``) with its ``value`` (text), ``confidence`` in [0, 1],
    ``weight`` (the evidence behind it: voiced seconds, sightings, face crops; what combines rows over clips) and
    ``evidence`` in words. ``id`` is the store's row id (0 until stored)."""

    entity_id: int
    video_id: str
    clip_index: int
    name: str
    value: str
    confidence: float
    weight: float
    evidence: str = ""
    id: int = 0


@dataclass(frozen=True, slots=True)
class ScreenText:
    """One line of text read on screen and held from ``start_s`` to ``end_s`` (the last frame it was read on)."""

    text: str
    start_s: float
    end_s: float
    confidence: float
    bbox: BBox
    sightings: int = 1


@dataclass(frozen=True, slots=True)
class ObjectTrack:
    """Objects of one class seen from ``start_s`` to ``end_s``; ``count`` is the most seen in one frame."""

    label: str
    start_s: float
    end_s: float
    score: float
    count: int = 1
    sightings: int = 1


@dataclass(frozen=True, slots=True)
class SoundEvent:
    """A non-speech sound class (AudioSet display name, e.g. ``Music``) heard from ``start_s`` to ``end_s``."""

    label: str
    start_s: float
    end_s: float
    score: float


@dataclass(frozen=True, slots=True)
class StageSkip:
    """A scene stage that produced nothing for a clip, and why (the clip itself is still ingested)."""

    stage: SenseStage
    reason: str


@dataclass(frozen=True, slots=True)
class ClipSenses:
    """Outputs of the optional scene stages for one clip; a stage that did not run leaves its tuple empty."""

    shots: tuple[Shot, ...] = ()
    texts: tuple[ScreenText, ...] = ()
    objects: tuple[ObjectTrack, ...] = ()
    sounds: tuple[SoundEvent, ...] = ()
    skipped: tuple[StageSkip, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class ClipPerception:
    """Perception output of one clip, before cross-clip identity is assigned; ``carried``: where the clip's
    speakers were also heard in the previous clip's last seconds."""

    media: ClipMedia
    tracks: tuple[FaceTrack, ...]
    voices: tuple[VoiceSegment, ...]
    timings: dict[str, float] = field(default_factory=dict)
    senses: ClipSenses = field(default_factory=ClipSenses)
    carried: tuple[CarriedTurn, ...] = ()
