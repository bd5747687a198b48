"""The parent side of the local model's process (:mod:`m3agent.llm.worker`).

:class:`ModelProcess` starts the worker on the first request, sends one JSON line per
request and reads one back. When the worker dies (a native crash: SIGSEGV, SIGILL, SIGBUS,
or a kill), the request raises :class:`~m3agent.errors.ModelCrashError` naming the runtime,
the signal, the worker's last words and the fix; the next request starts a fresh worker.
Measured cost of the separation (docs/runtime.md): 0.3-0.6 s more start-up, no
measurable cost per request.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from m3agent.errors import ContextOverflowError, MissingExtraError, ModelCrashError, ModelError
from m3agent.llm import ChatReply, Message, Usage, text_messages
from m3agent.llm.schema import cap_strings, parse_reply

STDERR_LINES = 20
"""Lines of the worker's stderr kept to explain a crash."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """How errors name a worker's runtime: its title, the extra and package that install it, the fix of a
    model that does not load."""

    title: str
    extra: str
    package: str
    load_hint: str
    crash_hint: str | None = None
    """The fix of a crash; None: :class:`~m3agent.errors.ModelCrashError`'s own (llama.cpp's rebuild)."""


LLAMA_CPP = Runtime("llama.cpp", "local-llm", "llama-cpp-python",
                    "check that the file is a complete GGUF (`m3agent models pull NAME` re-verifies a packaged one)")


class ModelProcess:
    """One worker serving ``model_path``; not thread-safe (the chat backend holds a lock).

    ``worker``: the module run as ``python -m WORKER`` (:mod:`m3agent.llm.worker`, llama.cpp, by default;
    :mod:`m3agent.llm.openvino_worker` speaks the same protocol); ``runtime`` names it in errors."""

    def __init__(self, model_path: Path, options: dict[str, int | str], name: str, *,
                 worker: str = "m3agent.llm.worker", runtime: Runtime | None = None) -> None:
        self.model_path = model_path
        self.options = dict(options)
        self.name = name
        self.worker = worker
        self.runtime = runtime or LLAMA_CPP
        self.ready: dict[str, Any] = {}
        """The worker's ready line: load time, llama-cpp-python version, compiled CPU features."""
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs (tests and `ps` find it by this)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the worker wrote to stderr (what explains a crash)."""
        return list(self._stderr)

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the worker's reply; a dead worker raises ModelCrashError."""
        reply = self.exchange(message)
        raise_for(reply, self.name, self.runtime)
        return reply

    def exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the worker's reply line as it is, an error line included; a dead worker
        raises ModelCrashError (a resident process forwards the lines, :mod:`m3agent.llm.resident`)."""
        return self._exchange(self._started(), message)

    def chat(self, messages: Sequence[Message], schema: Mapping[str, Any] | None, *, max_string: int,
             max_tokens: int, temperature: float) -> tuple[ChatReply, dict[str, float]]:
        """One chat request to the worker (any runtime speaking this protocol): the reply, checked against
        ``schema``, and the worker's timings. Image and audio parts become visible placeholders."""
        started = time.perf_counter()
        request = {"messages": text_messages(messages),
                   "grammar_schema": json.dumps(cap_strings(schema, max_string)) if schema is not None else None,
                   "max_tokens": max_tokens, "temperature": temperature}
        out = self.request(request)
        text = str(out.get("text", ""))
        usage = Usage(int(out.get("prompt_tokens", 0)), int(out.get("completion_tokens", 0)), 1,
                      int(out.get("cached_tokens", 0)))
        parsed, error = parse_reply(text, schema) if schema is not None else (None, None)
        reply = ChatReply(text, parsed, error, usage, self.name, time.perf_counter() - started)
        return reply, dict(out.get("timings") or {})

    def close(self) -> None:
        """End the worker (closing its input ends it; a worker that hangs is killed)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc)

    def start(self) -> dict[str, Any]:
        """Start the worker and load the model unless it runs: its ready line, or its error line as it is (a
        missing runtime, a model that does not load); a worker that dies loading raises ModelCrashError."""
        if self._proc is not None and self._proc.poll() is None:
            return {"ready": self.ready}
        self._stderr.clear()
        worker = [sys.executable, "-m", self.worker, "--parent", str(os.getpid())]
        proc = subprocess.Popen(worker, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                errors="replace", bufsize=1)
        assert proc.stderr is not None
        threading.Thread(target=_drain, args=(proc.stderr, self._stderr), daemon=True).start()
        weakref.finalize(self, _stop, proc)
        self._proc = proc
        init = {"model_path": str(self.model_path), **self.options}
        reply = self._exchange(proc, init)
        if "ready" in reply:
            self.ready = dict(reply["ready"])
        return reply

    def _started(self) -> subprocess.Popen[str]:
        raise_for(self.start(), self.name, self.runtime)
        assert self._proc is not None
        return self._proc

    def _exchange(self, proc: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            raise self._crash(proc)
        reply = json.loads(line)
        return reply if isinstance(reply, dict) else {"error": "failed", "message": line[:200]}

    def _crash(self, proc: subprocess.Popen[str]) -> ModelCrashError:
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        self._proc = None
        return ModelCrashError(self.name, self.model_path, describe_exit(code), self.ready, list(self._stderr),
                               runtime=self.runtime.title, hint=self.runtime.crash_hint)


def describe_exit(code: int) -> str:
    """How a process ended, in words: ``killed by SIGSEGV (segmentation fault)`` or ``exit status 1``."""
    if code >= 0:
        return f"exit status {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"killed by signal {-code}"
    meaning = signal.strsignal(sig) or ""
    return f"killed by {sig.name} ({meaning.lower()})" if meaning else f"killed by {sig.name}"


def raise_for(reply: dict[str, Any], name: str, runtime: Runtime = LLAMA_CPP) -> None:
    kind = reply.get("error")
    if kind is None:
        return
    message = str(reply.get("message", ""))
    if kind == "missing":
        raise MissingExtraError(f"the local LLM runtime {runtime.title}", runtime.extra, package=runtime.package)
    if kind == "overflow":
        raise ContextOverflowError(f"{name}: {message}")
    if kind == "load":
        raise ModelError(f"{runtime.title} could not load {name}: {message}", hint=runtime.load_hint)
    raise ModelError(f"{name}: the local model failed: {message}")


def _drain(stream: IO[str], tail: collections.deque[str]) -> None:
    """Keep the last lines of the worker's stderr (and keep its pipe from filling)."""
    for line in stream:
        if line.strip():
            tail.append(line.rstrip())


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
