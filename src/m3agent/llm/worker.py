"""The local model's own process: ``python -m m3agent.llm.worker`` loads a GGUF with llama-cpp-python
and answers chat requests, one JSON line in, one JSON line out.

Why a process of its own: llama.cpp is native code. A crash in it (a kernel compiled for
another CPU, a malformed user GGUF) kills the process it runs in; here that is this worker,
and the parent (:mod:`m3agent.llm.model_process`) turns the death into a clear error while
every stored clip and the consolidation records stay intact.

Protocol (stdout carries only protocol lines; anything native code prints goes to stderr):
the first line in is ``{"model_path", "n_ctx", "n_threads", "seed"}`` (optionally ``n_threads_batch``,
``n_batch``, ``n_ubatch``, ``prompt_cache_mb``, ``adapt_threads``, ``lazy_grammar`` (default on:
:mod:`m3agent.llm.lazy_grammar`), and ``state_dir`` with ``prompt_states_mb``:
the on-disk states of fixed prompt prefixes, :mod:`m3agent.llm.prefix_states`), answered by
``{"ready": {...}}`` or ``{"error": KIND, "message": ...}``; then each
``{"messages", "grammar_schema" | null, "max_tokens", "temperature"}`` is answered by
``{"text", "prompt_tokens", "completion_tokens", "cached_tokens", "timings"}`` or an error (``cached_tokens``:
prompt tokens not evaluated again, served by the kept state of an earlier prompt's prefix; ``timings``:
llama.cpp's own count and milliseconds of the prompt tokens it evaluated and of the generated tokens, and the
threads the call used: with ``adapt_threads`` (default on) no more than the cores free when it started). Error
kinds: ``missing``
(llama-cpp-python not installed), ``load``, ``overflow`` (prompt over the context window),
``failed``. A request with ``tokens`` instead of ``messages`` (``{"tokens", "max_tokens", "temperature",
"stop_tokens", "seed"}``) continues that token sequence as it stands, with no chat template and no grammar, and is
answered by ``{"tokens", "prompt_tokens", "cached_tokens", "timings"}``: the sampled token ids, the last one a stop
token unless ``max_tokens`` cut the reply (training samples rollouts so, :mod:`m3agent.train.expert`, and trains
on exactly those ids). The worker ends when its input ends (its parent closed it), or within a second of its
parent's death, even mid-request.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from m3agent.llm import lazy_grammar
from m3agent.llm.prefix_states import PrefixStates, folder_for

CONTEXT_OPTIONS = ("n_threads_batch", "n_batch", "n_ubatch")
"""Optional llama.cpp context settings passed through when given (llama-cpp-python's defaults otherwise)."""


Answerer = Callable[[dict[str, Any]], dict[str, Any]]
"""A loaded model's handler: one request line in, one reply line out."""


def main() -> int:
    """Serve requests until stdin ends; the exit status is 0 unless the first line was unusable."""
    return serve(_answerer)


def serve(load: Callable[[dict[str, Any]], tuple[Answerer | None, dict[str, Any]]]) -> int:
    """The protocol loop every runtime's worker runs: end with the parent, read the first line and ``load`` the model
    from it (its handler and the ready line, or ``None`` and the error line), then answer each line until stdin
    ends. The exit status is 0 unless the first line was unusable."""
    _exit_with_parent(_parent(sys.argv[1:]))
    out = _protocol_stream()
    init = _read(sys.stdin)
    if init is None:
        return 2
    answer, ready = load(init)
    _write(out, ready)
    if answer is None:
        return 0
    while (request := _read(sys.stdin)) is not None:
        _write(out, answer(request))
    return 0


def _answerer(init: dict[str, Any]) -> tuple[Answerer | None, dict[str, Any]]:
    """llama-cpp-python's model, its grammars and prefix states, as a handler."""
    llama, ready = _load(init)
    if llama is None:
        return None, ready
    grammars: dict[str, Any] = {}
    states = _prefix_states(llama, init)
    return lambda request: _answer(llama, grammars, request, init, states), ready


def _parent(args: list[str]) -> int:
    """The pid given as ``--parent PID`` (the process that started this one, named before this one ran, so its
    death during our start-up is seen), else the current parent."""
    if len(args) == 2 and args[0] == "--parent" and args[1].isdigit():
        return int(args[1])
    return os.getppid()


def _exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """End this process within ``every_s`` of its parent's death. Closing stdin only ends the worker between
    requests; a killed ingest's worker would otherwise evaluate its prompt to the end for nobody, minutes of
    CPU on a busy machine. (Not prctl's parent-death signal: it follows the thread that started the worker,
    and a server starts it from a short-lived answer thread.)"""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _protocol_stream() -> IO[str]:
    """A private copy of stdout for protocol lines; fd 1 then points at stderr, so that native code
    printing to stdout cannot corrupt the protocol."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


def _read(stream: IO[str]) -> dict[str, Any] | None:
    line = stream.readline()
    if not line:
        return None
    value = json.loads(line)
    return value if isinstance(value, dict) else None


def _write(stream: IO[str], value: dict[str, Any]) -> None:
    stream.write(json.dumps(value) + "\n")
    stream.flush()


def _load(init: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The loaded model and the ready line, or ``None`` and the error line."""
    started = time.perf_counter()
    try:
        llama_cpp = _llama_cpp()
    except ImportError as exc:
        return None, {"error": "missing", "message": str(exc)}
    options = {k: int(init[k]) for k in ("n_ctx", "n_threads", "seed")}
    options |= {k: int(init[k]) for k in CONTEXT_OPTIONS if init.get(k)}
    try:
        llama = llama_cpp.Llama(model_path=str(init["model_path"]), verbose=False, **options)
    except (ValueError, RuntimeError, OSError) as exc:
        return None, {"error": "load", "message": str(exc)}
    if int(init.get("lazy_grammar", 1)):  # greedy replies under a grammar check only the chosen token
        lazy_grammar.install(llama_cpp, llama)
    cache_mb = int(init.get("prompt_cache_mb", 0))
    if cache_mb > 0:  # states by prompt prefix: alternating system prompts are each evaluated once
        llama.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=cache_mb << 20))
        llama.save_state = _lean_save_state(llama_cpp, llama)
    info = llama_cpp.llama_print_system_info()
    ready = {"load_s": round(time.perf_counter() - started, 3), "version": getattr(llama_cpp, "__version__", "?"),
             "system_info": info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info),
             "library": os.path.dirname(getattr(llama_cpp, "__file__", "") or "")}
    return llama, {"ready": ready}


def _lean_save_state(llama_cpp: Any, llama: Any) -> Any:
    """``llama.save_state`` keeping one row of the logits, for the worker's RAM cache of model states.

    llama-cpp-python saves the state after every completion, with a copy of its whole logits buffer (a batch of
    512 x the vocabulary: 311 MB for Qwen2.5, 0.29 s a call on 2 cores), which the cache's size does not count:
    a few states took the worker from 2 to 3.7 GB. A restored state is decoded again before anything is sampled,
    so one row is all it needs (the row is broadcast back)."""
    import ctypes

    def save_state() -> Any:
        size = int(llama_cpp.llama_state_get_size(llama._ctx.ctx))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(llama._ctx.ctx, buffer, size))
        if written > size:
            raise RuntimeError("Failed to copy llama state data")
        return llama_cpp.LlamaState(scores=llama._scores[-1:].copy(), input_ids=llama.input_ids.copy(),
                                    n_tokens=llama.n_tokens, llama_state=bytes(memoryview(buffer)[:written]),
                                    llama_state_size=written, seed=llama._seed)

    return save_state


def _prefix_states(llama: Any, init: dict[str, Any]) -> PrefixStates | None:
    """The on-disk states of fixed prompt prefixes (``state_dir``, ``prompt_states_mb``; None when off)."""
    root, capacity_mb = init.get("state_dir"), int(init.get("prompt_states_mb", 0))
    if not root or capacity_mb <= 0:
        return None
    settings = {k: init.get(k) for k in ("n_ctx", "seed", *CONTEXT_OPTIONS)}
    try:
        folder = folder_for(Path(root), Path(init["model_path"]), settings, str(_llama_cpp().__version__))
    except (OSError, AttributeError):
        return None
    return PrefixStates(folder, capacity_mb << 20)


def _prepare_prefix(llama: Any, states: PrefixStates | None, messages: list[dict[str, Any]]) -> dict[str, float]:
    """Put the messages' fixed prefix in the context from disk (or evaluate and save it); its size and whether
    it was loaded, for the call's timings. Any failure only costs the saving: the call evaluates as before."""
    if states is None:
        return {}
    try:
        prefix = states.fixed_prefix(llama, messages)
        how = states.prepare(llama, prefix)
    except (AttributeError, TypeError, ValueError, RuntimeError, OSError) as exc:
        print(f"m3agent worker: prompt prefix state unusable, evaluating in full: {exc}", file=sys.stderr)
        return {}
    return {"prefix_tokens": float(len(prefix)), "prefix_loaded": float(how == "loaded")}


def free_cores(window_s: float = 0.1) -> float | None:
    """Cores left idle by every process over the next ``window_s`` (Linux ``/proc/stat``); ``None`` elsewhere."""
    def idle_and_total() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields[:8])  # idle + iowait; user..steal

    try:
        idle0, total0 = idle_and_total()
        time.sleep(window_s)
        idle1, total1 = idle_and_total()
    except (OSError, ValueError, IndexError):
        return None
    cores = os.cpu_count() or 1
    return cores * (idle1 - idle0) / (total1 - total0) if total1 > total0 else None


def threads_for(configured: int, free: float | None) -> int:
    """Threads for a call: ``configured`` while that many cores are free, else the free ones (at least 1).

    llama.cpp's threads meet after every layer, so one thread that loses its core to another process holds
    up the others: measured with the 1.5B on 2 cores, 2 threads generated 11.6 tokens/s on free cores and
    1.0 with one busy process beside them, 1 thread 7.2-7.9 either way (docs/benchmarks.md, Answer latency)."""
    if free is None:
        return configured
    return max(1, min(configured, int(free + 0.5)))


def _set_threads(llama_cpp: Any, llama: Any, init: dict[str, Any]) -> dict[str, int]:
    """Fit this call's generation and prompt threads to the cores free now (``adapt_threads``, on by default)."""
    generate = int(init.get("n_threads") or 1)
    batch = int(init.get("n_threads_batch") or os.cpu_count() or 1)
    if int(init.get("adapt_threads", 1)):
        free = free_cores()
        generate, batch = threads_for(generate, free), threads_for(batch, free)
    llama_cpp.llama_set_n_threads(llama.ctx, generate, batch)
    return {"threads": generate, "threads_batch": batch}


def _answer(llama: Any, grammars: dict[str, Any], request: dict[str, Any], init: dict[str, Any],
            states: PrefixStates | None = None) -> dict[str, Any]:
    """One chat completion (or token continuation); llama-cpp-python's errors become error lines (a crash ends the
    process)."""
    schema = request.get("grammar_schema")
    llama_cpp = _llama_cpp()
    threads = _set_threads(llama_cpp, llama, init)
    llama_cpp.llama_perf_context_reset(llama.ctx)
    if "tokens" in request:
        return _continue(llama_cpp, llama, request, threads, _grammar(grammars, schema) if schema else None)
    prefix = _prepare_prefix(llama, states, request["messages"])
    try:
        grammar = _grammar(grammars, schema) if schema else None
        out = llama.create_chat_completion(messages=request["messages"], grammar=grammar,
                                           max_tokens=int(request["max_tokens"]),
                                           temperature=float(request["temperature"]))
    except ValueError as exc:  # llama-cpp-python's only report of a prompt over the context window
        kind = "overflow" if "context window" in str(exc) else "failed"
        return {"error": kind, "message": str(exc)}
    except RuntimeError as exc:
        return {"error": "failed", "message": str(exc)}
    usage = out.get("usage") or {}
    prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    perf = llama_cpp.llama_perf_context(llama.ctx)  # counted since the reset above
    prompt_evaluated = int(perf.n_p_eval) + int(perf.n_eval) - completion
    return {"text": out["choices"][0]["message"].get("content") or "", "prompt_tokens": prompt,
            "completion_tokens": completion, "cached_tokens": min(prompt, max(0, prompt - prompt_evaluated)),
            "timings": _timings(perf) | threads | prefix | lazy_grammar.counts(llama)}


def _continue(llama_cpp: Any, llama: Any, request: dict[str, Any], threads: dict[str, int],
              grammar: Any = None) -> dict[str, Any]:
    """Sample up to ``max_tokens`` tokens after ``tokens`` at ``temperature`` (0: greedy) with the ``seed``, plain
    (no top-k, top-p, min-p or penalties: the distribution a trainer assumes) but for ``grammar`` (the reply
    schema's, when the request names one: only tokens it allows), stopping after a stop token. The
    longest prefix shared with the previous request is not evaluated again (a rollout's next round, or the next
    rollout of the same prompt)."""
    tokens = [int(t) for t in request["tokens"]]
    limit = int(request["max_tokens"])
    if len(tokens) + limit > int(llama.n_ctx()):
        return {"error": "overflow", "message": f"{len(tokens)} tokens + {limit} to sample exceed the context "
                f"window of {llama.n_ctx()} tokens"}
    stops = {int(t) for t in request.get("stop_tokens") or ()}
    llama.set_seed(int(request.get("seed", 0)))
    sampled: list[int] = []
    try:
        for token in llama.generate(tokens, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0,
                                    temp=float(request["temperature"]), repeat_penalty=1.0, grammar=grammar):
            sampled.append(int(token))
            if int(token) in stops or len(sampled) >= limit:
                break
    except RuntimeError as exc:
        return {"error": "failed", "message": str(exc)}
    perf = llama_cpp.llama_perf_context(llama.ctx)
    evaluated = int(perf.n_p_eval) + int(perf.n_eval) - max(0, len(sampled) - 1)
    return {"tokens": sampled, "prompt_tokens": len(tokens),
            "cached_tokens": min(len(tokens), max(0, len(tokens) - evaluated)), "timings": _timings(perf) | threads}


def _timings(perf: Any) -> dict[str, float]:
    """llama.cpp's counters since the last reset: prompt tokens evaluated (not reused) and generated, with their
    milliseconds (what the rest of a call's time is not: sampling, the grammar, Python)."""
    return {"prompt_evaluated": int(perf.n_p_eval), "prompt_ms": round(float(perf.t_p_eval_ms), 1),
            "generated": int(perf.n_eval), "generate_ms": round(float(perf.t_eval_ms), 1)}


def _grammar(grammars: dict[str, Any], schema: str) -> Any:
    """The GBNF grammar of a JSON schema (given as its JSON text), built once per schema."""
    if schema not in grammars:
        grammars[schema] = _llama_cpp().LlamaGrammar.from_json_schema(schema, verbose=False)
    return grammars[schema]


def _llama_cpp() -> Any:
    """llama-cpp-python, untyped: its stubs disagree with the keyword options passed through."""
    return importlib.import_module("llama_cpp")


if __name__ == "__main__":
    sys.exit(main())
