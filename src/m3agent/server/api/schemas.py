"""Request and response bodies of the REST API (their JSON Schemas are the OpenAPI document)."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

from m3agent.domain import ClipStatus, ControlModeSetting, EntityKind, MemoryKind

T = TypeVar("T")
VIDEO_ID = r"^[^/\x00]+$"  # ids appear in API paths, so no slash
MAX_ID = 2**62  # ids are SQLite INTEGERs; larger path values are refused as invalid, not looked up
MAX_TEXT = 2000  # longest question or search query
MAX_NAME = 200  # longest name or video id
MAX_SOURCE = 4096  # longest path or URL
NOT_BLANK = r"\S"  # text fields must hold more than spaces


class Page(BaseModel, Generic[T]):
    """One page of a list: ``items[offset : offset + limit]`` of ``total``."""

    items: list[T]
    total: int
    offset: int
    limit: int


class Problem(BaseModel):
    """Every error answer: what went wrong and what to do next."""

    error: str
    message: str
    hint: str


class Health(BaseModel):
    """The API can serve (``/health``): a read store could be borrowed within ``server.ready_wait_s``."""

    status: Literal["ok"]
    version: str


class Readiness(BaseModel):
    """The memory can be read (``/ready``): what it holds, its embedding model and the ingest jobs running."""

    ready: bool
    memory: str
    videos: int
    embedding_model: str | None = Field(description="name/dimension of the stored vectors; null before any")
    jobs_active: int = Field(description="ingest jobs queued or running")
    search_workers: int = Field(0, description="search worker processes answering searches now "
                                "(server.search_workers, started once the vector index is saved)")
    indexes_building: list[str] = Field(default_factory=list, description="search indexes still being built in "
                                        "the background (\"vector graph\", \"keyword index\"); searches are "
                                        "answered meanwhile, only slower")


class VideoOut(BaseModel):
    """A video in the memory with its ingest progress."""

    video_id: str
    source: str
    duration_s: float | None
    title: str
    clips_done: int
    clips_recorded: int
    playable: bool = Field(description="the source file can be streamed by GET /api/videos/{id}/media")


class ClipOut(BaseModel):
    """A recorded clip of a video; ``reason`` says why it failed or was skipped."""

    index: int
    start_s: float
    end_s: float
    status: ClipStatus
    reason: str


class VideoDetail(VideoOut):
    """A video with its clips and how many memories it holds."""

    clips: list[ClipOut]
    memories: int


class MemoryOut(BaseModel):
    """A memory: an episodic event of one clip, or a semantic fact, with its time span and entities."""

    id: int
    kind: MemoryKind
    video_id: str
    clip: int
    start_s: float
    end_s: float
    text: str = Field(description="the memory with tags rewritten to characters and their names")
    raw_text: str = Field(description="the memory as stored, with <face_N>/<voice_N> tags")
    entities: list[int]
    weight: float
    confidence: float


class FaceGroup(BaseModel):
    """The sightings of one face entity in a clip (``entity`` null: not identified)."""

    entity: int | None
    character: int | None
    observations: int
    first_s: float
    last_s: float


class VoiceLine(BaseModel):
    """One transcribed voice segment of a clip with its speaker (``entity`` null: not identified)."""

    id: int = Field(description="the segment id (its audio: GET /api/voices/{id}/audio)")
    start_s: float
    end_s: float
    entity: int | None
    character: int | None
    text: str


class ClipDetail(BaseModel):
    """One clip as the memory holds it: its memories, faces and voices."""

    video_id: str
    clip: int
    status: ClipStatus
    reason: str
    memories: list[MemoryOut]
    faces: list[FaceGroup]
    voices: list[VoiceLine]


class EntityOut(BaseModel):
    """A face or voice identity (``<face_N>``/``<voice_N>``) and the character it belongs to, if any."""

    id: int
    tag: str
    kind: EntityKind
    name: str
    video_id: str | None
    first_clip: int | None
    last_clip: int | None
    observations: int
    character: int | None = None


class ObservationOut(BaseModel):
    """One face sighting or voice segment of an entity; its ``id`` is what a split takes."""

    id: int
    video_id: str
    clip_index: int
    start_s: float
    end_s: float
    text: str = ""
    media_url: str | None = Field(None, description="this sighting's face crop (JPEG) or this segment's snippet "
                                  "(WAV); null when none was kept")


class EntityDetail(EntityOut):
    """An entity with its observations: the ids a split takes, and how many crops or snippets it has."""

    media: int = Field(description="face crops (JPEG) or voice snippets (WAV) available, numbered from 0")
    observations_list: list[ObservationOut]


class CharacterOut(BaseModel):
    """A person: the face and voice entities linked into one ``<character_N>``, named by its members."""

    id: int
    tag: str
    name: str
    entities: list[int]


class Appearance(BaseModel):
    """A clip where a character is seen or heard."""

    video_id: str
    clip_index: int
    start_s: float
    end_s: float


class CharacterDetail(CharacterOut):
    """A character with its members, facts, event count and appearances across videos."""

    members: list[EntityOut]
    facts: list[MemoryOut] = Field(description="semantic memories about the character")
    events: int = Field(description="episodic memories naming the character")
    appearances: list[Appearance] = Field(description="clips where a face or voice of the character occurs")


class Rename(BaseModel):
    """The new name of an entity or character (not blank)."""

    name: str = Field(min_length=1, max_length=MAX_NAME, pattern=NOT_BLANK, description="the new name")


class Merge(BaseModel):
    """The entity folded into the one in the path (the same person recognised twice)."""

    absorb: int = Field(ge=0, le=MAX_ID, description="the entity folded into this one")


class Link(BaseModel):
    """A face and a voice a person knows to be one person (a link made by hand, confidence 1)."""

    face: int = Field(ge=0, le=MAX_ID, description="the face entity (the N of <face_N>)")
    voice: int = Field(ge=0, le=MAX_ID, description="the voice entity (the N of <voice_N>)")


class MergeOut(BaseModel):
    """A recorded entity merge (``source`` auto or manual); ``undone_at`` is set once it was undone."""

    id: int
    keep: int
    absorbed: int
    kind: EntityKind
    source: str = Field(description="auto (identity resolution) or manual")
    evidence: str
    video_id: str | None
    clip_index: int | None
    created_at: str
    undone_at: str | None


class Split(BaseModel):
    """The observations moved to a new entity (two people taken for one)."""

    observation_ids: list[int] = Field(min_length=1, max_length=10000,
                                       description="face/voice observation ids moved to a new entity")

    @model_validator(mode="after")
    def _ids_in_range(self) -> Split:
        if any(not 0 <= i <= MAX_ID for i in self.observation_ids):
            raise ValueError("observation ids are non-negative integers")
        return self


class ConsolidationFailure(BaseModel):
    """A failed consolidation attempt waiting for its retry."""

    video_id: str | None = Field(description="the video whose consolidation failed; null: the model or the store")
    error: str
    hint: str | None
    failures: int = Field(description="failed attempts in a row")
    retry_in_s: float = Field(description="seconds until it is tried again")


class ForgottenConsolidationOut(BaseModel):
    """What a redo of a video's consolidation took back first."""

    video_id: str
    facts: int = Field(description="facts it had written, deleted")
    clips: int = Field(description="clips no longer recorded as consolidated")
    restored: int = Field(description="memories kept, their weight and last confirmed clip put back")


class ConsolidationReportOut(BaseModel):
    """What one video's consolidation did so far (``rtf``: wall seconds per media second of its clips)."""

    video_id: str
    model: str
    clips_consolidated: int
    clips_already: int
    skipped: int = Field(description="clips the pre-check found nothing fact-like in (no model call made)")
    calls: int
    facts_written: int
    reinforced: int
    contradicted: int
    dropped: list[str] = Field(description="why proposed facts were not written")
    prompt_tokens: int
    cached_tokens: int = Field(description="prompt tokens the backend served from its prefix cache")
    completion_tokens: int
    media_seconds: float
    wall_seconds: float
    forgotten: ForgottenConsolidationOut | None
    rtf: float


class ConsolidationStatus(BaseModel):
    """Semantic consolidation while the server is idle (``server.consolidate_when_idle``)."""

    enabled: bool = Field(description="a consolidation model is configured and idle consolidation is on")
    model: str | None = Field(description="memorize.consolidate_llm, else llm")
    state: Literal["off", "idle", "running", "failed"] = Field(
        description="off: no model or disabled; idle: nothing pending; failed: waiting for a retry")
    video_id: str | None = Field(description="the video of the current or last unit")
    pending_clips: int = Field(description="stored clips of every video not consolidated yet")
    units_done: int = Field(description="units consolidated since the server started")
    last_report: ConsolidationReportOut | None = Field(description="the current or last video's consolidation so far")
    last_error: str | None
    failures: list[ConsolidationFailure] = Field(description="what failed and waits for its retry")
    updated_at: float | None = Field(description="UNIX time of the last change of state")


class JobRequest(BaseModel):
    """Ingest a server-side file (inside ``server.allowed_folders``) or a network source; exactly one."""

    path: str | None = Field(None, max_length=MAX_SOURCE, description="a file inside an allowed folder")
    url: str | None = Field(None, max_length=MAX_SOURCE, description="http(s)/rtsp/rtmp/srt/... source")
    video_id: str | None = Field(None, min_length=1, max_length=MAX_NAME, pattern=VIDEO_ID,
                                 description="default: the file name stem (of the URL's path for a URL)")
    max_clips: int | None = Field(None, ge=1, le=1_000_000, description="stop after this many new clips")
    perception_only: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> JobRequest:
        if (self.path is None) == (self.url is None):
            raise ValueError("give exactly one of path and url")
        return self


class SearchRequest(BaseModel):
    """A memory search with the agent's tools' filters: one video, clips up to one, by memory or by clip."""

    query: str = Field(min_length=1, max_length=MAX_TEXT, pattern=NOT_BLANK)
    k: int = Field(10, ge=1, le=200, description="memories returned")
    video_id: str | None = Field(None, max_length=MAX_NAME, description="search one video only")
    before_clip: int | None = Field(None, ge=0, le=MAX_ID, description="hide clips after this one (inclusive)")
    tool: Literal["search_memory", "search_clip"] = Field(
        "search_memory", description="memories by relevance, or whole clips by their best memory")


class AskRequest(BaseModel):
    """A question, optionally about one video up to one clip; ``mode``/``rounds`` override the settings."""

    question: str = Field(min_length=1, max_length=MAX_TEXT, pattern=NOT_BLANK)
    video_id: str | None = Field(None, max_length=MAX_NAME)
    before_clip: int | None = Field(None, ge=0, le=MAX_ID)
    mode: ControlModeSetting | None = Field(None, description="default: control.mode of the settings")
    rounds: int | None = Field(None, ge=1, le=20)


class ForgetRequest(BaseModel):
    """Exactly one of the three; everything derived from it is deleted too."""

    video: str | None = Field(None, min_length=1, max_length=MAX_NAME)
    entity: int | None = Field(None, ge=0, le=MAX_ID)
    memory: int | None = Field(None, ge=0, le=MAX_ID)

    @model_validator(mode="after")
    def _exactly_one(self) -> ForgetRequest:
        if sum(v is not None for v in (self.video, self.entity, self.memory)) != 1:
            raise ValueError("give exactly one of video, entity, memory")
        return self


class Forgotten(BaseModel):
    """What was deleted, with everything derived from it."""

    deleted: Literal["video", "entity", "memory"]
    id: str

