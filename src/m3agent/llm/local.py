"""A packaged model on the local runtime that is faster on this CPU: ``local:qwen-1.5b``.

Measured on the same GGUF (docs/benchmarks.md, "OpenVINO GenAI on an AVX-512 VNNI CPU" and "Local runtimes: the
default on this CPU"): where the CPU has AVX-512 with VNNI, OpenVINO GenAI's prebuilt kernels evaluated prompts
2.7x faster than llama.cpp's prebuilt build (one AVX2 build, no dispatch) and grounded answers took 3.84 s at the
median against 6.41 s; on AVX2 CPUs the two evaluated prompts equally fast and llama.cpp wrote replies 2.3x
faster and kept its prompt prefixes on disk (OpenVINO's worker, 3 GB then, now holds about 2 GB: it gives back
its model file's pages, :mod:`m3agent.mapped_pages`). So ``auto`` (the setting
``local_runtime``) takes OpenVINO where the CPU reports ``avx512_vnni`` or AMX and ``openvino-genai`` is installed,
and llama.cpp everywhere else; ``llamacpp`` or ``openvino`` fix the choice. The spec's query options go to the
chosen backend, which ignores those it does not know.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m3agent.llm import ChatModel
    from m3agent.registry import BackendSpec

VNNI_FLAGS = frozenset({"avx512_vnni", "amx_int8"})
"""CPU flags (``/proc/cpuinfo``) under which OpenVINO's int8 kernels were measured faster."""


def cpu_flags(path: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags as Linux reports them; empty where it does not (other systems, no /proc)."""
    try:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def openvino_installed() -> bool:
    return importlib.util.find_spec("openvino_genai") is not None


def choose_runtime(setting: str, flags: frozenset[str] | None = None, installed: bool | None = None) -> str:
    """``llamacpp`` or ``openvino`` for ``setting`` (``auto`` decides by the CPU's flags and whether OpenVINO GenAI
    is installed; see the module)."""
    if setting in ("llamacpp", "openvino"):
        return setting
    vnni = bool(VNNI_FLAGS & (cpu_flags() if flags is None else flags))
    return "openvino" if vnni and (openvino_installed() if installed is None else installed) else "llamacpp"


def create(spec: BackendSpec, *, local_runtime: str | None = None, **kwargs: Any) -> ChatModel:
    """Factory for ``local:NAME`` (a packaged model) and ``local:/path/model.gguf``: the chosen runtime's backend."""
    from m3agent.settings import Settings

    runtime = choose_runtime(str(local_runtime or Settings.model_fields["local_runtime"].default))
    chosen = replace(spec, scheme=runtime, raw=spec.raw.replace("local:", f"{runtime}:", 1))
    if runtime == "openvino":
        from m3agent.llm import openvino

        return openvino.create(chosen, **kwargs)
    from m3agent.llm import llamacpp

    return llamacpp.create(chosen, **kwargs)
