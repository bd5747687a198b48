"""``local:``: a packaged model or GGUF on the local runtime measured faster on this CPU (OpenVINO GenAI where
the CPU has AVX-512 VNNI or AMX and the runtime is installed, llama.cpp elsewhere), and the setting that fixes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from m3agent.llm import CHAT_MODELS, create_chat_model
from m3agent.llm.llamacpp import LlamaCppChat
from m3agent.llm.local import choose_runtime, cpu_flags
from m3agent.llm.openvino import OpenVinoChat
from m3agent.llm.spec import ModelSpec

ZEN4 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512bw"})
HASWELL = frozenset({"avx2", "fma", "f16c"})


@pytest.mark.parametrize(("setting", "flags", "installed", "runtime"), [
    ("auto", ZEN4, True, "openvino"),
    ("auto", ZEN4, False, "llamacpp"),  # not installed: never chosen
    ("auto", HASWELL, True, "llamacpp"),  # AVX2: llama.cpp is as fast at prompts and faster at replies
    ("auto", frozenset({"avx2", "amx_int8", "amx_tile"}), True, "openvino"),
    ("auto", frozenset(), True, "llamacpp"),  # flags unknown (no /proc): the default runtime
    ("llamacpp", ZEN4, True, "llamacpp"),
    ("openvino", HASWELL, False, "openvino"),  # fixed: a missing package is the backend's clear error
])
def test_the_runtime_is_chosen_by_the_cpu_and_the_setting(setting: str, flags: frozenset[str], installed: bool,
                                                          runtime: str) -> None:
    assert choose_runtime(setting, flags, installed) == runtime


def test_cpu_flags_are_read_from_proc_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(info) == frozenset({"fpu", "avx2", "avx512_vnni"})
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    assert cpu_flags(arm) == frozenset({"fp", "asimd"})
    assert cpu_flags(tmp_path / "absent") == frozenset()


def test_local_builds_the_chosen_backend(tmp_path: Path) -> None:
    assert "local" in CHAT_MODELS.names() and ModelSpec.parse("local:qwen-1.5b").local
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    spec = f"local:{gguf}?n_ctx=512"
    llama = create_chat_model(spec, cache_dir=tmp_path, local_runtime="llamacpp")
    openvino = create_chat_model(spec, cache_dir=tmp_path, local_runtime="openvino")
    assert isinstance(llama, LlamaCppChat) and isinstance(openvino, OpenVinoChat)
    assert llama.context_tokens == openvino.context_tokens == 512, "the spec's options reach the chosen backend"
