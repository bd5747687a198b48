"""The installed llama.cpp runtime is portable: no AMX kernels, no native CPU flags, an explicit baseline.

The AMX crash of a natively compiled llama.cpp (Intel Sapphire Rapids class CPUs) cannot be
reproduced on the AMD machines where this runs, so this inspection is the guard: it reads the
compiler command lines the set-up's build records in every object (``-frecord-gcc-switches``),
the symbol tables, and the machine code itself (no AMX tile instruction, no AVX-512 register).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from m3agent.llm.runtime_build import inspect_library, inspect_runtime, runtime_folder
from m3agent.llm.runtime_check import RuntimeCheck, portability_problems, rates

LLAMA = "llama-cpp-python is not installed (pip install 'm3agent[local-llm]', or make setup)"
AMX_INSTRUCTIONS = re.compile(r"\b(ldtilecfg|sttilecfg|tileloadd\w*|tilestored|tdpb\w+|tdpfp16ps|tilezero)\b")
AVX512_REGISTERS = re.compile(r"%zmm\d|%k[1-7]\b")


def _runtime() -> Path:
    folder = runtime_folder()
    if folder is None:
        pytest.skip(LLAMA)
    return folder


def test_the_installed_runtime_records_a_portable_build() -> None:
    build = inspect_runtime(_runtime())
    assert build is not None and build.libraries, "no shared library in llama_cpp/lib"
    assert build.problems() == [], build.problems()
    assert portability_problems(build) == []
    cpu = [lib for lib in build.libraries if "ggml-cpu" in lib.path.name]
    assert cpu and all(lib.recorded for lib in cpu), "the CPU kernels recorded their compiler flags"
    isa = set(build.instruction_sets())
    if platform.machine() in ("x86_64", "AMD64"):
        with_avx2 = "avx2" in Path("/proc/cpuinfo").read_text().split()
        assert ("-mavx2" in isa) == with_avx2, isa
        assert not {f for f in isa if f.startswith(("-mavx512", "-mamx", "-mavxvnni"))}, isa


def test_the_cpu_kernels_hold_no_amx_or_avx512_instruction() -> None:
    """Disassembled, not trusted from flags: an AMX tile instruction or a zmm register anywhere is a failure."""
    folder = _runtime()
    objdump = shutil.which("objdump")
    if objdump is None or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("needs objdump (binutils) on x86-64")
    libraries = [p for p in folder.iterdir() if "ggml" in p.name and ".so" in p.name and not p.is_symlink()]
    assert libraries
    for library in libraries:
        code = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True,
                              check=True).stdout
        assert not AMX_INSTRUCTIONS.search(code), f"AMX instruction in {library.name}"
        assert not AVX512_REGISTERS.search(code), f"AVX-512 register in {library.name}"


def _compile(tmp_path: Path, flags: list[str], source: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    src = tmp_path / "k.c"
    src.write_text(source)
    out = tmp_path / "libk.so"
    subprocess.run([cc, "-shared", "-fPIC", "-frecord-gcc-switches", *flags, str(src), "-o", str(out)], check=True)
    return out


def test_the_inspection_sees_native_flags_and_amx_symbols(tmp_path: Path) -> None:
    """The detector itself, on a library built here the wrong way: native flags and an AMX kernel's name."""
    lib = _compile(tmp_path, ["-march=native", "-O2"], "int ggml_backend_amx_mul_mat(int x) { return x * 2; }\n")
    found = inspect_library(lib)
    assert found.native and found.amx and found.amx_symbols == ("ggml_backend_amx_mul_mat",)
    clean = inspect_library(_compile(tmp_path, ["-O2"], "int ggml_vec_dot(int x) { return x + 1; }\n"))
    assert clean.recorded and not clean.native and not clean.amx


def test_a_library_without_recorded_flags_is_not_called_portable(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    (tmp_path / "k.c").write_text("int f(int x) { return x; }\n")
    folder = tmp_path / "lib"
    folder.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", str(tmp_path / "k.c"), "-o", str(folder / "libggml-cpu.so")], check=True,
                   env={**os.environ, "CFLAGS": ""})
    build = inspect_runtime(folder)
    assert build is not None
    assert any("not recorded" in p for p in build.problems())
    assert portability_problems(build) == [], "unknown flags are a warning, not a proven AMX build"


def test_the_check_reports_its_speed_and_what_an_answer_costs_at_it() -> None:
    """The rates come from llama.cpp's counters; a grounded answer is 350 prompt tokens and 20 reply tokens."""
    prompt, reply = rates({"prompt_evaluated": 488, "prompt_ms": 9760.0, "generated": 9, "generate_ms": 900.0})
    assert (prompt, reply) == (pytest.approx(50.0), pytest.approx(10.0))
    assert rates({"prompt_evaluated": 0, "prompt_ms": 0.0}) == (0.0, 0.0), "no counters: no rate, no division"
    check = RuntimeCheck("m", "47", 488, 12.0, 2.0, "0.3.36", ("-mavx2",), prompt, reply)
    assert check.answer_seconds() == pytest.approx(350 / 50 + 20 / 10)
    assert ("prompts 50 tokens/s, replies 10.0 tokens/s: a grounded answer (350 new prompt tokens, 20 written) takes"
            " at least 9 s") in check.summary()
    silent = RuntimeCheck("m", "47", 488, 12.0, 2.0, "0.3.36", ("-mavx2",))
    assert silent.answer_seconds() is None and "tokens/s" not in silent.summary()
