"""The multimodal memory writer: one structured call per clip to any OpenAI-compatible chat endpoint.

The model sees sampled frames, a labelled crop per face entity and the
tagged transcripts (optionally the voices' audio), and replies with
``prompts/memorize_mllm.json``: ``{"episodic": [str], "semantic": [str],
"equivalences": [{"face": int, "voice": int}]}``. The reply is validated
against the schema, then statement by statement (:mod:`.statements`): tags
outside the clip are dropped, never guessed.

A reply that is not schema-valid JSON (or whose every statement had to be
dropped) is answered with feedback and asked again, at most ``attempts``
calls per clip; then :class:`~m3agent.errors.MalformedReplyError` is raised,
so the pipeline records the clip as failed and retries it on the next run.

Endpoint quirks handled here or in :mod:`m3agent.llm.openai_compat`:

- structured output is negotiated (json_schema -> json_object + schema ->
  json_object -> prompt) and remembered per endpoint; the schema sticks to
  keywords OpenAI's strict mode accepts (no string lengths);
- vLLM caps media per prompt (``--limit-mm-per-prompt``, 1 image by default for
  some models) and answers "At most N image(s) may be provided": the writer
  lowers its image budget to N (faces first) and asks again; "audio" limits
  turn audio parts off; a context-length refusal halves the images;
- Ollama accepts only base64 data URLs for images (what is sent) and no audio;
  Gemini's OpenAI-compatible endpoint rejects some schema keywords with a 400
  (the client then steps down the structured-output ladder);
- a refusal of a modality as such (llama.cpp: "Vision is not supported by
  this model"; servers without audio input) turns it off and the clip is
  described from the transcripts; the note is reported with the output;
- text-only servers (llama.cpp with a text model, SmolLM2 in the tests) get a
  plain string message when ``frames=0`` and ``faces=0``;
- replies in the reference's key names (the released M3-Agent-Memorization
  model writes ``video_descriptions`` and ``high_level_conclusions`` with
  ``Equivalence: <face_x>, <voice_y>`` lines; API prompts ``episodic_memory``
  / ``semantic_memory``) are mapped onto this schema instead of retried;
- ``<think>...</think>`` blocks of reasoning models are stripped before parsing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, EndpointError, MalformedReplyError
from m3agent.llm import ChatReply, Usage
from m3agent.memorize.inputs import ClipInput, WriterOutput
from m3agent.memorize.writers.mllm_messages import MediaBudget, allowed_tags, build_messages
from m3agent.memorize.writers.perception import PerceptionWriter
from m3agent.memorize.writers.statements import Interpreted, interpret

if TYPE_CHECKING:
    from m3agent.llm import ChatModel
    from m3agent.llm.prompts import PromptSet
    from m3agent.registry import BackendSpec
    from m3agent.settings import MemorizeSettings, Settings

PROMPT = "memorize_mllm"
_LIMIT_RE = re.compile(r"at most (\d+) (image|audio|video)", re.IGNORECASE)
_CONTEXT_WORDS = ("context length", "context window", "maximum context", "too many tokens", "too long")
_MAX_SHRINKS = 4


@dataclass(frozen=True, slots=True)
class MLLMOptions:
    """What the writer sends and how hard it tries (see :class:`m3agent.settings.MemorizeSettings`)."""

    frames: int = 4
    frame_side: int = 512
    faces: int = 8
    audio: bool = False
    attempts: int = 3
    max_tokens: int = 1500
    temperature: float = 0.0
    keep_perception: bool = True
    memory_confidence: float = 0.8
    link_confidence: float = 0.6

    @classmethod
    def from_settings(cls, memorize: MemorizeSettings) -> MLLMOptions:
        return cls(frames=memorize.frames, frame_side=memorize.frame_side, faces=memorize.faces,
                   audio=memorize.audio, attempts=memorize.attempts, max_tokens=memorize.max_tokens,
                   keep_perception=memorize.keep_perception, link_confidence=memorize.llm_equivalence_confidence)


class MLLMWriter:
    """Memories of a clip from a multimodal chat model (plus the perception memories, by default)."""

    def __init__(self, chat: ChatModel, options: MLLMOptions | None = None) -> None:
        self.chat = chat
        self.options = options or MLLMOptions()
        self.budget = MediaBudget(self.options.frames, self.options.frame_side, self.options.faces, self.options.audio)
        self.provenance = f"mllm-writer/1:{chat.name}"
        self.notes: list[str] = []  # media the endpoint refused, reported once with the next output

    def write(self, clip_input: ClipInput) -> WriterOutput:
        inp = clip_input
        base = PerceptionWriter().write(inp).memories if self.options.keep_perception else ()
        if not (inp.tag_kinds() or inp.frames or any(s.text.strip() for s in inp.voices)):
            return WriterOutput(memories=base)  # nothing to look at: no call
        result, usage, attempts = self._ask(inp)
        notes, self.notes = self.notes, []
        return WriterOutput(memories=(*base, *result.memories), equivalences=result.equivalences,
                            dropped=(*notes, *result.dropped), usage=usage, attempts=attempts)

    def _ask(self, inp: ClipInput) -> tuple[Interpreted, Usage, int]:
        """Call until a usable reply (at most ``attempts`` calls), with feedback after each bad one."""
        from m3agent.llm.prompts import load_prompt_set

        prompts = load_prompt_set(PROMPT)
        kinds = inp.tag_kinds()
        usage, error = Usage(), ""
        feedback: list[dict[str, Any]] = []
        for attempt in range(1, self.options.attempts + 1):
            reply = self._call(inp, prompts, feedback)
            usage = usage + reply.usage
            parsed = reply.parsed if reply.parsed is not None else salvaged(reply.text, prompts.schema)
            if parsed is not None:
                result = interpret(parsed, inp.clip, kinds, provenance=self.provenance,
                                   confidence=self.options.memory_confidence,
                                   link_confidence=self.options.link_confidence)
                if _usable(result) or attempt == self.options.attempts:
                    return result, usage, attempt
                error = "every statement was dropped: " + "; ".join(result.dropped[:3])
            else:
                error = reply.error or "the reply was empty"
            feedback = [{"role": "assistant", "content": reply.text[:4000] or "(empty reply)"},
                        {"role": "user", "content": prompts.render("feedback", error=error, tags=allowed_tags(inp))}]
        clip = inp.clip
        raise MalformedReplyError(
            f"clip {clip.index} of {clip.video_id!r}: {self.chat.name} gave no usable memories in "
            f"{self.options.attempts} attempts; last problem: {error}",
            hint="the clip is recorded as failed and retried on the next run; if it keeps failing, "
                 "use a stronger model or an endpoint with JSON-schema output",
        )

    def _call(self, inp: ClipInput, prompts: PromptSet, feedback: list[dict[str, Any]]) -> ChatReply:
        """One request; shrinks the media and asks again when the endpoint refuses their amount."""
        schema = prompts.schema
        for _ in range(_MAX_SHRINKS):
            messages = [*build_messages(inp, prompts, self.budget), *feedback]
            try:
                return self.chat.chat(messages, schema=schema, max_tokens=self.options.max_tokens,
                                      temperature=self.options.temperature)
            except EndpointError as exc:
                smaller = shrunk(self.budget, exc.message)
                if smaller is None:
                    raise
                self.notes.append(f"{self.chat.name} refused the media ({exc.message[:160]}); now sending "
                                  f"images={smaller.images}, audio={smaller.audio}")
                self.budget = smaller
        messages = [*build_messages(inp, prompts, self.budget), *feedback]
        return self.chat.chat(messages, schema=schema, max_tokens=self.options.max_tokens,
                              temperature=self.options.temperature)


def _usable(result: Interpreted) -> bool:
    """A reply is usable unless it offered statements and every one of them had to be dropped."""
    return bool(result.memories or result.equivalences or result.offered == 0)


def shrunk(budget: MediaBudget, message: str) -> MediaBudget | None:
    """A smaller media budget that answers an endpoint's refusal, or ``None`` when the refusal is not about media.

    "At most N image(s)/audio(s)" sets that limit; a refusal of audio or of images as such
    ("Vision is not supported by this model", "input_audio is not supported") turns that
    modality off; a context-length refusal halves the images.
    """
    current = budget.frames + budget.faces if budget.images is None else budget.images
    text = message.lower()
    limit = _LIMIT_RE.search(message)
    if limit is not None:
        count, modality = int(limit.group(1)), limit.group(2).lower()
        if modality == "audio":
            return dataclasses.replace(budget, audio=False) if budget.audio else None
        return dataclasses.replace(budget, images=count) if count < current else None
    if any(word in text for word in _CONTEXT_WORDS):
        return dataclasses.replace(budget, images=current // 2) if current > 0 else None
    if budget.audio and "audio" in text:
        return dataclasses.replace(budget, audio=False)
    if current > 0 and any(word in text for word in ("image", "vision", "multimodal")):
        return dataclasses.replace(budget, images=0)
    return None


_ALIASES = {  # reply keys of the reference's prompts and of the released M3-Agent-Memorization model
    "episodic": ("episodic", "video_descriptions", "video_description", "episodic_memory", "episodic_memories"),
    "semantic": ("semantic", "high_level_conclusions", "semantic_memory", "semantic_memories"),
    "equivalences": ("equivalences",),
}


def salvaged(text: str, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A reply in the reference's key names (``video_descriptions``/``high_level_conclusions``,
    ``episodic_memory``/``semantic_memory``) mapped onto ours, if it then matches ``schema``."""
    from m3agent.llm.schema import extract_json, validate

    try:
        value = extract_json(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    mapped: dict[str, Any] = {key: next((value[a] for a in names if a in value), []) for key, names in _ALIASES.items()}
    if not any(mapped.values()) or validate(mapped, schema):
        return None
    return mapped


def create(spec: BackendSpec, *, settings: Settings | None = None, chat: ChatModel | None = None,
           **_: Any) -> MLLMWriter:
    """Factory of ``mllm`` (endpoint from ``settings.writer_llm``) and ``mllm:openai://host/v1?model=M``."""
    from m3agent.llm import create_chat_model, endpoint_options

    if chat is None:
        endpoint = spec.raw.partition(":")[2].strip() or (settings.writer_llm if settings else None)
        if not endpoint:
            raise ConfigError(
                "the mllm memory writer needs a chat endpoint",
                hint="set writer_llm (--writer-llm / M3AGENT_WRITER_LLM) to openai://host:port/v1?model=NAME, "
                     "e.g. a vLLM server running Qwen2.5-Omni",
            )
        keys = endpoint_options(settings) if settings else {}
        chat = create_chat_model(endpoint, **keys)
    options = MLLMOptions.from_settings(settings.memorize) if settings else MLLMOptions()
    return MLLMWriter(chat, options)
