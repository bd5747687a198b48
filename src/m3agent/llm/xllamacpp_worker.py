"""The prebuilt llama.cpp runtime's process: ``python -m m3agent.llm.xllamacpp_worker`` answers chat requests with
``xllamacpp`` (llama.cpp's own server compiled into a wheel: no compiler at set-up), in the protocol of
:mod:`m3agent.llm.worker`, so that :class:`~m3agent.llm.model_process.ModelProcess` serves it unchanged and a
native crash is an error in the parent, not its end.

The first line in is ``{"model_path", "n_ctx", "n_threads", "seed"}`` (optionally ``n_threads_batch``, ``n_batch``,
``n_ubatch``, ``prompt_cache_mb``: the server's RAM cache of earlier prompts' states, ``adapt_threads``, and
``state_dir`` with ``prompt_states_mb``: the on-disk states of fixed prompt prefixes), answered by ``{"ready":
{...}}`` or an error line; then chat requests and token continuations exactly as :mod:`m3agent.llm.worker` reads
them. Differences from that worker, each forced by the server: threads are fitted to the free cores once, when
the model loads (the server fixes them there); a JSON schema is turned into a grammar by llama.cpp itself; a
continuation that ends on a stop token reports the first of ``stop_tokens`` (the others are excluded from
sampling, so that the reported one is the one sampled).

The server also answers HTTP on 127.0.0.1 at a free port; it is given a random key, known only to this
process, which uses the port for what the Python binding lacks (rendering the chat template, tokenizing, saving
and restoring the prefix states). The server writes a state file in llama.cpp's own format, and aborts the process
on reading a damaged one, so each file has its size and SHA-256 beside it and is restored only when both match.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import secrets
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from m3agent.llm.prefix_states import CHECKSUM_SUFFIX, MIN_PREFIX_TOKENS, evict, fixed_prefix, folder_for
from m3agent.llm.worker import Answerer, free_cores, serve, threads_for

STATE_SUFFIX = ".state"


def main() -> int:
    """Serve requests until stdin ends; the exit status is 0 unless the first line was unusable."""
    return serve(_answerer)


def _answerer(init: dict[str, Any]) -> tuple[Answerer | None, dict[str, Any]]:
    session, ready = _load(init)
    return (None if session is None else session.answer), ready


def _xllamacpp() -> Any:
    return importlib.import_module("xllamacpp")


def _load(init: dict[str, Any]) -> tuple[Session | None, dict[str, Any]]:
    """The loaded session and the ready line, or ``None`` and the error line."""
    started = time.perf_counter()
    try:
        xl = _xllamacpp()
    except ImportError as exc:
        return None, {"error": "missing", "message": str(exc)}
    threads = {"threads": int(init.get("n_threads") or 1),
               "threads_batch": int(init.get("n_threads_batch") or os.cpu_count() or 1)}
    if int(init.get("adapt_threads", 1)):
        free = free_cores()
        threads = {k: threads_for(v, free) for k, v in threads.items()}
    key = secrets.token_hex(16)
    states = _state_folder(init, xl)
    params = _params(xl, init, threads, key, states)
    try:
        server = xl.Server(params)
    except (ValueError, RuntimeError, OSError) as exc:
        return None, {"error": "load", "message": f"{init['model_path']}: {exc}"}
    version = str(getattr(xl, "__version__", "?"))
    ready = {"load_s": round(time.perf_counter() - started, 3), "version": version,
             "system_info": str(xl.get_system_info()), "library": os.path.dirname(xl.__file__ or ""),
             "runtime": "xllamacpp"}
    capacity = int(init.get("prompt_states_mb", 0)) << 20
    return Session(server, key, int(init["n_ctx"]), int(init.get("seed", 0)), threads, states, capacity), \
        {"ready": ready}


def _state_folder(init: dict[str, Any], xl: Any) -> Path | None:
    """Where this model's prefix states are kept (``state_dir``, ``prompt_states_mb``), None when off."""
    root, capacity_mb = init.get("state_dir"), int(init.get("prompt_states_mb", 0))
    if not root or capacity_mb <= 0:
        return None
    settings = {k: init.get(k) for k in ("n_ctx", "seed", "n_threads_batch", "n_batch", "n_ubatch")}
    try:
        folder = folder_for(Path(root), Path(init["model_path"]), settings, f"xllamacpp {xl.__version__}")
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, AttributeError):
        return None
    return folder


def _params(xl: Any, init: dict[str, Any], threads: dict[str, int], key: str, states: Path | None) -> Any:
    """The server's settings: one slot, the context and threads asked for, no warm-up, no automatic fitting (it
    probes memory for seconds), the key, the prefix-state folder. Flash attention stays off, as in the compiled
    runtime: with it on, a prompt evaluated whole and the same prompt resumed from a cached state gave different
    greedy replies (SmolLM2, a near tie); with it off both gave the compiled runtime's reply."""
    params = xl.CommonParams()
    params.model.path = str(init["model_path"])
    params.n_ctx = int(init["n_ctx"])
    params.n_parallel = 1
    params.cpuparams.n_threads = threads["threads"]
    params.cpuparams_batch.n_threads = threads["threads_batch"]
    for name in ("n_batch", "n_ubatch"):
        if init.get(name):
            setattr(params, name, int(init[name]))
    params.sampling.seed = int(init.get("seed", 0))
    params.cache_ram_mib = int(init.get("prompt_cache_mb", 0))
    params.flash_attn_type = xl.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    params.warmup = False
    params.fit_params = False
    params.api_keys = [key]
    params.endpoint_slots = states is not None
    if states is not None:
        params.slot_save_path = str(states) + os.sep
    return params


class Session:
    """The loaded server and what this process knows of its cache: answers one request at a time."""

    def __init__(self, server: Any, key: str, n_ctx: int, seed: int, threads: dict[str, int],
                 states: Path | None, capacity_bytes: int) -> None:
        self.server = server
        self.key = key
        self.n_ctx = n_ctx
        self.seed = seed
        self.threads = threads
        self.states = states
        self.capacity_bytes = capacity_bytes
        self.current: str | None = None
        """The prefix (by file name) the server's one slot holds now. Only that one is "held": a state restored into
        the slot replaces what was there without the server's RAM cache keeping it, so a prefix held before
        another was restored is restored again from its file (2,446 tokens evaluated again took 33-40 s, one
        question in four on a generated episode; docs/benchmarks.md, Accuracy and answer latency against episode
        length)."""

    # requests ---------------------------------------------------------------
    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """One chat completion (or token continuation); the server's errors become error lines."""
        try:
            if "tokens" in request:
                return self._continue(request)
            return self._chat(request)
        except (ValueError, RuntimeError) as exc:  # a schema llama.cpp cannot make a grammar of, a bad request
            return {"error": "failed", "message": str(exc)}

    def _chat(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = request["messages"]
        prefix = self._prepare_prefix(messages)
        body: dict[str, Any] = {"messages": messages, "max_tokens": int(request["max_tokens"]),
                                "temperature": float(request["temperature"]), "seed": self.seed,
                                "cache_prompt": True}
        out, failed = _send(self.server.handle_chat_completions, body, request)
        if failed is not None:
            return failed
        usage = out.get("usage") or {}
        prompt, cached = int(usage.get("prompt_tokens", 0)), _cached(out)
        timings = _timings(out)
        evaluated = prefix.pop("evaluated", {})
        if evaluated:  # the prefix was evaluated for this call: counted as its own, as the compiled runtime does
            cached = max(0, cached - int(evaluated["prompt_evaluated"]))
            timings = {k: v + evaluated.get(k, 0) for k, v in timings.items()}
        return {"text": out["choices"][0]["message"].get("content") or "", "prompt_tokens": prompt,
                "completion_tokens": int(usage.get("completion_tokens", 0)), "cached_tokens": min(prompt, cached),
                "timings": timings | self.threads | prefix}

    def _continue(self, request: dict[str, Any]) -> dict[str, Any]:
        """Sample after ``tokens`` as they stand, plain (no top-k, top-p, min-p or penalties) but for the grammar
        of ``grammar_schema``; the sampled ids, ending with the first stop token when a stop ended them."""
        tokens = [int(t) for t in request["tokens"]]
        limit = int(request["max_tokens"])
        self.current = None  # the slot takes these tokens, whatever prefix it held
        if len(tokens) + limit > self.n_ctx:
            return {"error": "overflow", "message": f"{len(tokens)} tokens + {limit} to sample exceed the context "
                    f"window of {self.n_ctx} tokens"}
        stops = [int(t) for t in request.get("stop_tokens") or ()]
        body: dict[str, Any] = {
            "prompt": tokens, "max_tokens": limit, "temperature": float(request["temperature"]),
            "seed": int(request.get("seed", 0)), "top_k": 0, "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0,
            "repeat_penalty": 1.0, "logprobs": 1, "cache_prompt": True,
            "logit_bias": [[t, False] for t in stops[1:]]}
        out, failed = _send(self.server.handle_completions, body, request)
        if failed is not None:
            return failed
        choice = out["choices"][0]
        sampled = [int(item["id"]) for item in ((choice.get("logprobs") or {}).get("content") or [])]
        if choice.get("finish_reason") == "stop" and stops and len(sampled) < limit:
            sampled.append(stops[0])
        return {"tokens": sampled, "prompt_tokens": len(tokens), "cached_tokens": min(len(tokens), _cached(out)),
                "timings": _timings(out) | self.threads}

    # prefix states ----------------------------------------------------------
    def _prepare_prefix(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Put the messages' fixed prefix (the chat template up to the last user message's content) in the
        server's slot from disk, or evaluate it and save it; its size and whether it was loaded, for the call's
        timings (with ``evaluated``: the counters of evaluating it). Any failure only costs the saving: the call
        evaluates as before."""
        if self.states is None:
            return {}
        try:
            prefix = fixed_prefix(messages, self._tokens)
            if len(prefix) < MIN_PREFIX_TOKENS:
                return {}
            how, evaluated = self._prepare(prefix)
        except (OSError, ValueError, KeyError) as exc:  # URLError is an OSError
            print(f"m3agent xllamacpp worker: prompt prefix state unusable, evaluating in full: {exc}",
                  file=sys.stderr)
            return {}
        return {"prefix_tokens": float(len(prefix)), "prefix_loaded": float(how == "loaded"), "evaluated": evaluated}

    def _tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        """``messages`` rendered with the model's chat template and tokenized, by the server."""
        prompt = self._post("/apply-template", {"messages": messages})["prompt"]
        tokens = self._post("/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
        return [int(t) for t in tokens]

    def _prepare(self, prefix: list[int]) -> tuple[str, dict[str, float]]:
        """``held`` (the slot holds it), ``loaded`` (from its file) or ``saved`` (evaluated and written, with the
        evaluation's counters)."""
        assert self.states is not None
        name = _file_name(prefix)
        if name == self.current:
            return "held", {}
        self.current = None
        path = self.states / name
        if path.is_file():
            if _intact(path) and self._restore(name, len(prefix)):
                self.current = name
                with contextlib.suppress(OSError):
                    os.utime(path)  # recently used: kept longest
                return "loaded", {}
            with contextlib.suppress(OSError):
                path.unlink()
        evaluated = self.server.handle_completions({"prompt": prefix, "max_tokens": 1, "temperature": 0.0,
                                                    "cache_prompt": True})
        if _error(evaluated) is not None:
            return "failed", {}
        partial = self.states / (name + ".partial")
        saved = self._slot("save", partial.name)
        if int(saved.get("n_saved", -1)) == len(prefix):
            _write_checksum(partial, path)
            os.replace(partial, path)
            evict(self.states.parent, self.capacity_bytes)
        else:
            with contextlib.suppress(OSError):
                partial.unlink()
        self.current = name
        counters = _timings(evaluated)
        return "saved", {"prompt_evaluated": counters["prompt_evaluated"], "prompt_ms": counters["prompt_ms"]}

    def _restore(self, name: str, tokens: int) -> bool:
        """Load the slot from the file ``name``; False when the server refuses it (a damaged or foreign file)."""
        try:
            restored = self._slot("restore", name)
        except urllib.error.HTTPError as exc:
            print(f"m3agent xllamacpp worker: prompt prefix state {name} refused ({exc}), evaluating it again",
                  file=sys.stderr)
            return False
        return int(restored.get("n_restored", -1)) == tokens

    def _slot(self, action: str, filename: str) -> dict[str, Any]:
        return self._post(f"/slots/0?action={action}", {"filename": filename})

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.server.listening_address + path, data=json.dumps(body).encode("utf-8"),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as reply:
            value = json.loads(reply.read())
        if not isinstance(value, dict):
            raise ValueError(f"unexpected reply from the model server's {path}")
        return value


def json_grammar(schema: str) -> str:
    """The grammar of replies valid under the JSON ``schema`` (its JSON text), for llama.cpp's llguidance.

    Its JSON grammar lets whitespace be any run of spaces and newlines, and the model then pretty-prints: measured,
    a two-fact reply took 57 tokens indented against 40 on one line, and replies cut by ``max_tokens`` no longer
    parsed. One optional space between tokens is what llama-cpp-python's grammar allows (39 tokens there)."""
    value = json.loads(schema)
    if isinstance(value, dict):
        value = {**value, "x-guidance": {"whitespace_flexible": True, "whitespace_pattern": " ?"}}
    return "%llguidance {}\nstart: %json " + json.dumps(value)


def _digest(path: Path) -> tuple[int, str]:
    data = path.read_bytes()
    return len(data), hashlib.sha256(data).hexdigest()


def _write_checksum(written: Path, final: Path) -> None:
    """Record ``written``'s size and digest beside ``final``, the name it is about to take."""
    size, digest = _digest(written)
    record = final.parent / (final.name + CHECKSUM_SUFFIX)
    record.write_text(json.dumps({"bytes": size, "sha256": digest}), encoding="ascii")


def _intact(path: Path) -> bool:
    """Whether ``path`` is the file its record describes (a damaged or unrecorded one is removed)."""
    record = path.parent / (path.name + CHECKSUM_SUFFIX)
    try:
        expected = json.loads(record.read_text(encoding="ascii"))
        if _digest(path) == (int(expected["bytes"]), str(expected["sha256"])):
            return True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    print(f"m3agent xllamacpp worker: prompt prefix state {path.name} is damaged, evaluating it again",
          file=sys.stderr)
    for stale in (path, record):
        with contextlib.suppress(OSError):
            stale.unlink()
    return False


def _file_name(prefix: list[int]) -> str:
    digest = hashlib.sha256(json.dumps(prefix).encode("ascii")).hexdigest()[:24]
    return digest + STATE_SUFFIX


def _send(handle: Callable[[dict[str, Any]], Any], body: dict[str, Any], request: dict[str, Any]
          ) -> tuple[dict[str, Any], dict[str, Any] | None]:  # fmt: skip
    """``body`` through one of the server's handlers, under the grammar of the request's ``grammar_schema`` if any:
    the reply, and its error line when it is an error."""
    if request.get("grammar_schema"):
        body = {**body, "grammar": json_grammar(request["grammar_schema"])}
    out = handle(body)
    return out, _error(out)


def _cached(out: dict[str, Any]) -> int:
    """Prompt tokens the server took from its cache instead of evaluating."""
    return int(((out.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0))


def _error(out: Any) -> dict[str, Any] | None:
    """The error line for a server reply that is an error (``overflow`` for a prompt over the context window)."""
    if not isinstance(out, dict):
        return {"error": "failed", "message": f"unexpected reply: {str(out)[:200]}"}
    error = out.get("error")
    if error is None:
        return None
    detail = error if isinstance(error, dict) else {"message": str(error)}
    if detail.get("type") == "exceed_context_size_error":
        return {"error": "overflow", "message": f"the prompt ({detail.get('n_prompt_tokens', '?')} tokens) does not "
                f"fit the context window of {detail.get('n_ctx', '?')} tokens"}
    return {"error": "failed", "message": str(detail.get("message", error))}


def _timings(out: dict[str, Any]) -> dict[str, float]:
    """The server's counters of the call: prompt tokens evaluated (not reused) and generated, with milliseconds."""
    t = out.get("timings") or {}
    return {"prompt_evaluated": int(t.get("prompt_n", 0)), "prompt_ms": round(float(t.get("prompt_ms", 0.0)), 1),
            "generated": int(t.get("predicted_n", 0)), "generate_ms": round(float(t.get("predicted_ms", 0.0)), 1)}


if __name__ == "__main__":
    sys.exit(main())
