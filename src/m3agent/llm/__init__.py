"""Chat models behind one small protocol, chosen by spec from :data:`CHAT_MODELS`.

Specs: ``openai://host:port/v1?model=NAME`` or ``http(s)://host/v1?model=NAME``
(any OpenAI-compatible server: vLLM, Ollama, llama.cpp server, hosted APIs),
``llamacpp:smollm2``, ``llamacpp:qwen-0.5b`` / ``llamacpp:qwen-1.5b`` (assembled by
``m3agent models pull``) or ``llamacpp:/path/model.gguf`` (local llama-cpp-python),
``openvino:qwen-1.5b`` / ``openvino:/path/model.gguf`` (the same GGUF models on OpenVINO GenAI),
``scripted:`` (replays given replies; deterministic tests and demos).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from m3agent.registry import Registry

if TYPE_CHECKING:
    from m3agent.settings import Settings

Message = Mapping[str, Any]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": ...}``.

``content`` is a string, or (multimodal, for OpenAI-compatible endpoints) a
list of OpenAI content parts: ``{"type": "text", "text": ...}``,
``{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..."}}``,
``{"type": "input_audio", "input_audio": {"data": BASE64, "format": "wav"}}``.
Text-only backends flatten parts with :func:`flatten_content`.
"""

MEDIA_PLACEHOLDERS = {"image_url": "[image omitted: this model reads text only]",
                      "input_audio": "[audio omitted: this model reads text only]"}


def flatten_content(content: Any) -> str:
    """The text of a message's ``content``: a string as is; parts joined by newlines, each
    image or audio part replaced by a visible placeholder (never silently dropped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    lines = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            lines.append(str(part.get("text", "")))
        else:
            lines.append(MEDIA_PLACEHOLDERS.get(str(kind), f"[{kind or 'unknown'} part omitted]"))
    return "\n".join(lines)


def text_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """``messages`` with every ``content`` flattened to a string (for text-only backends)."""
    return [{**{k: str(v) for k, v in m.items() if k != "content"}, "content": flatten_content(m.get("content"))}
            for m in messages]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens spent; ``calls`` counts model requests (retries excluded); ``cached_tokens``: prompt tokens
    the model did not evaluate again (a kept prefix), where the backend says (llama.cpp), else 0."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
            self.cached_tokens + other.cached_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "calls": self.calls,
        }


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A model reply. With a schema, ``parsed`` holds the schema-valid JSON value,
    or is ``None`` and ``error`` says why the text did not match."""

    text: str
    parsed: Any = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    latency_s: float = 0.0


@runtime_checkable
class ChatModel(Protocol):
    """A chat-completion model. ``name`` is for reports only."""

    @property
    def name(self) -> str: ...

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> ChatReply:
        """Complete ``messages``; with ``schema``, constrain or instruct the reply to match it."""
        ...


def context_window(chat: ChatModel | None) -> int | None:
    """The model's context window in tokens when the backend knows it (a local llama.cpp model), else ``None``
    (an endpoint does not say; its server refuses an over-long prompt)."""
    window = getattr(chat, "context_tokens", None)
    return window if isinstance(window, int) and window > 0 else None


CHAT_MODELS: Registry[ChatModel] = Registry("chat model")
_OPENAI = "m3agent.llm.openai_compat:create"
CHAT_MODELS.register("openai", _OPENAI, "OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server, APIs)")
CHAT_MODELS.register("http", _OPENAI, "OpenAI-compatible endpoint, http base URL")
CHAT_MODELS.register("https", _OPENAI, "OpenAI-compatible endpoint, https base URL")
CHAT_MODELS.register("llamacpp", "m3agent.llm.llamacpp:create", "local llama-cpp-python: smollm2 or a .gguf")
CHAT_MODELS.register("openvino", "m3agent.llm.openvino:create",
                     "local OpenVINO GenAI (prebuilt wheel, extra [openvino]): qwen-1.5b, qwen-0.5b or a .gguf")
CHAT_MODELS.register("local", "m3agent.llm.local:create",
                     "a packaged model or .gguf on the local runtime faster on this CPU (setting local_runtime)")
CHAT_MODELS.register("scripted", "m3agent.llm.scripted:create", "replays given replies (tests, demos)")


def create_chat_model(spec: str, **kwargs: Any) -> ChatModel:
    """Build a chat model from ``spec``; backends ignore keyword arguments they do not use."""
    return CHAT_MODELS.create(spec, **kwargs)


def chat_model_from_settings(settings: Settings, spec: str | None = None, *, resident: bool = False) -> ChatModel:
    """The control LLM of ``settings`` (or ``spec``), with its API key and timeout. ``resident``: a local model
    stays loaded for ``settings.model_keep_alive_s`` after the last call, for the next short-lived process
    (:mod:`m3agent.llm.resident`; ``m3agent ask``); long-lived callers keep a worker of their own."""
    from m3agent.errors import ConfigError

    chosen = spec or settings.llm
    if not chosen:
        raise ConfigError(
            "no LLM configured",
            hint="pass --llm openai://host:port/v1?model=NAME (or llamacpp:smollm2), or set M3AGENT_LLM",
        )
    keep_alive_s = settings.model_keep_alive_s if resident else 0.0
    return create_chat_model(chosen, **endpoint_options(settings), cache_dir=settings.resolved_cache_dir(),
                             keep_alive_s=keep_alive_s)


def endpoint_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of chat backends from ``settings``: API key, total timeout, reply size cap (endpoints), the
    llama.cpp runtime (local models)."""
    return {"api_key": settings.api_key, "timeout_s": settings.request_timeout_s,
            "max_reply_bytes": int(settings.max_reply_mb * 2**20), "llamacpp_runtime": settings.llamacpp_runtime,
            "local_runtime": settings.local_runtime}
