"""Local chat with OpenVINO GenAI on the CPU, in a process of its own; a schema constrains the reply to valid JSON.

``openvino:qwen-1.5b`` / ``openvino:qwen-0.5b`` open the packaged GGUF models (:mod:`m3agent.llm.packaged`),
``openvino:/path/model.gguf`` any GGUF of an architecture OpenVINO GenAI reads (llama, qwen2, qwen3). Why a second
local runtime: ``pip install openvino-genai`` is a prebuilt wheel (no compiler, no compile at set-up), and it
evaluates prompts faster than the portable llama.cpp build on some CPUs (docs/benchmarks.md, "Local runtimes:
llama.cpp against OpenVINO GenAI"). The first use of a model converts it once into OpenVINO's format under the
cache folder (:mod:`m3agent.llm.openvino_worker`); the model loads on the first call, not at construction.
Text only: image and audio parts become visible placeholders, as with ``llamacpp:``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, MissingExtraError, ModelError
from m3agent.llm import ChatReply, Message
from m3agent.llm.model_process import ModelProcess, Runtime
from m3agent.llm.resident import process_for

if TYPE_CHECKING:
    from m3agent.registry import BackendSpec

PREPARED_FOLDER = "openvino"
"""Under the cache folder: each GGUF converted to OpenVINO's format, in a folder named by the GGUF's identity."""
PRECISIONS = ("f32", "bf16", "f16")
"""``precision=`` values: the CPU plugin's ``INFERENCE_PRECISION_HINT``."""
KV_CACHES = ("u8", "f16", "f32")
"""``kv_cache=`` values: the CPU plugin's ``KV_CACHE_PRECISION``."""
OPENVINO = Runtime(
    "OpenVINO GenAI", "openvino", "openvino-genai",
    "OpenVINO GenAI reads GGUF files of the llama, qwen2 and qwen3 architectures; check the file "
    "(`m3agent models pull NAME` re-verifies a packaged one), delete its converted copy under the cache folder's "
    f"{PREPARED_FOLDER}/ to convert it again, or use the llama.cpp runtime (--llm llamacpp:NAME)",
    "reinstall the runtime (pip install --force-reinstall 'm3agent[openvino]'); if only one model crashes, delete "
    f"its converted copy under the cache folder's {PREPARED_FOLDER}/; or use the llama.cpp runtime "
    "(--llm llamacpp:NAME), an endpoint (--llm openai://HOST:PORT/v1?model=NAME) or no model (--llm none)")


class OpenVinoChat:
    """Chat completion with a local GGUF model run by OpenVINO GenAI in a process of its own (the protocol of
    :mod:`m3agent.llm.worker`). One call at a time; greedy at temperature 0.

    ``n_threads``: CPU threads (fixed when the model loads: OpenVINO cannot change them per call, so unlike
    ``llamacpp:`` they do not shrink to the cores left free). ``n_ctx``: the context window callers size their
    prompts by; a longer prompt is refused (:class:`~m3agent.errors.ContextOverflowError`) as llama.cpp does.
    ``prefix_cache_mb`` (0, the default: measured no faster on 2 cores): OpenVINO's paged KV cache with prefix
    reuse, which skips the evaluation of a prompt prefix already seen. ``precision`` (``f32``, ``bf16``, ``f16``)
    and ``kv_cache`` (``u8``, ``f16``, ``f32``): the CPU plugin's inference precision and KV-cache precision, empty
    for the plugin's own choice (bf16 on a CPU with AVX-512 BF16 or AMX, a u8 cache). ``prepared_dir``: where the
    converted model is kept (see :func:`prepared_folder`)."""

    def __init__(self, model_path: Path, *, prepared_dir: Path, n_ctx: int = 4096, n_threads: int = 2,
                 max_string: int = 240, prefix_cache_mb: int = 0, precision: str = "", kv_cache: str = "",
                 keep_alive_s: float = 0.0) -> None:
        if not model_path.is_file():
            raise ModelError(f"model file not found: {model_path}", hint="give an existing .gguf path")
        self.model_path = model_path
        self.name = model_path.stem
        self.max_string = max_string
        self.context_tokens = n_ctx
        """The context window (prompt + reply), read by callers that size their prompts (the agent loop)."""
        for name, value, allowed in (("precision", precision, PRECISIONS), ("kv_cache", kv_cache, KV_CACHES)):
            if value and value not in allowed:
                raise ConfigError(f"openvino: {name}={value!r} is not one of {', '.join(allowed)}",
                                  hint=f"leave {name} out for the CPU plugin's own choice")
        self._options: dict[str, int | str] = {"prepared_dir": str(prepared_dir), "n_ctx": n_ctx,
                                               "n_threads": n_threads, "prefix_cache_mb": prefix_cache_mb,
                                               "precision": precision, "kv_cache": kv_cache}
        self.timings: dict[str, float] = {}
        """The last call's counts: ``prompt_evaluated`` tokens with ``prompt_ms`` (to the first reply token) and
        ``generated`` tokens with ``generate_ms`` (after the first), as OpenVINO measured them."""
        self.keep_alive_s = keep_alive_s
        """Seconds the model stays loaded after the last call, for the next process (:mod:`m3agent.llm.resident`)."""
        self._process: ModelProcess | None = None
        self._lock = threading.Lock()

    @property
    def process(self) -> ModelProcess:
        """The model's process (started by the first call)."""
        if self._process is None:
            require_openvino()
            self._process = process_for(self.model_path, self._options, self.name,
                                        worker="m3agent.llm.openvino_worker", runtime=OPENVINO,
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

    def close(self) -> None:
        """End the model's process (it also ends with this object or the program)."""
        if self._process is not None:
            self._process.close()


def require_openvino() -> None:
    """Fail early, with the install command, when openvino-genai is absent (found, not imported: the import
    happens in the model's process)."""
    if importlib.util.find_spec("openvino_genai") is None:
        raise MissingExtraError("the OpenVINO GenAI runtime", "openvino", package="openvino-genai")


def prepared_folder(root: Path, gguf: Path) -> Path:
    """The folder of ``gguf``'s converted model under ``root``: named by the file's name, size and modification
    time and the installed OpenVINO GenAI's version, so a changed file or another version converts afresh."""
    stat = gguf.stat()
    version = _openvino_version()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{version}".encode()).hexdigest()
    return root / f"{gguf.stem}-{key[:12]}"


def _openvino_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openvino-genai")
    except PackageNotFoundError:
        return "?"


def create(spec: BackendSpec, *, cache_dir: Path | None = None, keep_alive_s: float = 0.0,
           **kwargs: Any) -> OpenVinoChat:
    """Factory for ``openvino:qwen-1.5b`` / ``openvino:qwen-0.5b`` (packaged models, looked up under ``cache_dir``)
    and ``openvino:/path/model.gguf`` (``?n_ctx=&n_threads=&max_string=&prefix_cache_mb=&precision=&kv_cache=``);
    converted models are kept under ``cache_dir``/:data:`PREPARED_FOLDER`."""
    from m3agent.llm import packaged
    from m3agent.settings import Settings

    target = spec.target
    if not target:
        raise ConfigError("openvino: needs a model", hint="use openvino:qwen-1.5b, openvino:qwen-0.5b or "
                          "openvino:/path/model.gguf")
    known = ("n_ctx", "n_threads", "max_string", "prefix_cache_mb")
    options: dict[str, Any] = {k: int(v) for k, v in spec.params.items() if k in known}
    options.update({k: str(v) for k, v in spec.params.items() if k in ("precision", "kv_cache")})
    folder = Path(cache_dir or Settings.model_fields["cache_dir"].default).expanduser()
    title = ""
    if target.endswith(".gguf") or "/" in target:
        path = Path(target).expanduser()
    else:
        model = packaged.lookup(target)
        path, title = packaged.verified_path(model, folder), f"{model.name} ({model.title}, OpenVINO)"
    if not path.is_file():
        raise ModelError(f"model file not found: {path}", hint="give an existing .gguf path")
    chat = OpenVinoChat(path, prepared_dir=prepared_folder(folder / PREPARED_FOLDER, path), keep_alive_s=keep_alive_s,
                        **options)
    if title:
        chat.name = title
    return chat
