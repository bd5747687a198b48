"""What the installed llama.cpp runtime was compiled for, read from its library files (no import).

A llama.cpp compiled with the compiler's native flags carries the build machine's kernels;
on Intel CPUs with AMX its AMX matrix kernels crash on the first batched prompt (upstream
llama.cpp issue #20824). ``scripts/setup.sh`` compiles a portable build (AVX2 baseline,
no AVX-512, no AMX, ``GGML_NATIVE=OFF``) with ``-frecord-gcc-switches``, so every object's
compiler command line is kept in the ELF section ``.GCC.command.line``. :func:`inspect_runtime`
reads those lines and the symbol names. Not portable: a library compiled for one CPU
(GCC records ``-march=native`` as that CPU's name, e.g. ``-march=znver3``), with ``-mamx-*``
or ``-mavx512*``, or holding ``ggml_backend_amx_*`` symbols. A library that recorded no lines
at all was compiled some other way: its flags are unknown.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from m3agent.packages import package_dir

GENERIC_ARCH = re.compile(r"^(x86-64(-v[234])?|i[3-6]86|armv\d+(\.\d+)?-a(\+[a-z0-9]+)*|rv64\w*)$")
"""``-march`` values that name an instruction-set level, not a CPU. GCC records ``-march=native`` expanded to
the build machine's CPU (``-march=znver3`` ... or ``-march=sapphirerapids -mamx-tile ...``), so any other
value means the library was compiled for one CPU."""
AMX_FLAGS = ("-mamx",)
AVX512_FLAGS = ("-mavx512",)
AMX_SYMBOL = b"ggml_backend_amx"
RECORD_SECTION = ".GCC.command.line"
STRING_TABLES = (".dynstr", ".strtab")


@dataclass(frozen=True, slots=True)
class LibraryBuild:
    """One shared library: the compiler flags it recorded and the AMX symbols it carries."""

    path: Path
    flags: frozenset[str]
    amx_symbols: tuple[str, ...]

    @property
    def recorded(self) -> bool:
        return bool(self.flags)

    @property
    def native(self) -> bool:
        """Compiled for one CPU: ``-march=`` names a CPU (how GCC records ``native``), or ``-mcpu=`` is set."""
        for flag in self.flags:
            option, _, value = flag.partition("=")
            if option == "-mcpu" or (option == "-march" and not GENERIC_ARCH.match(value)):
                return True
        return False

    @property
    def arch(self) -> list[str]:
        """The ``-march=`` / ``-mcpu=`` flags it was compiled with."""
        return sorted(f for f in self.flags if f.startswith(("-march=", "-mcpu=")))

    @property
    def avx512(self) -> bool:
        return any(f.startswith(AVX512_FLAGS) for f in self.flags)

    @property
    def amx(self) -> bool:
        return bool(self.amx_symbols) or any(f.startswith(AMX_FLAGS) for f in self.flags)


@dataclass(frozen=True, slots=True)
class RuntimeBuild:
    """The libraries of the installed llama-cpp-python and what they were compiled for."""

    folder: Path
    libraries: tuple[LibraryBuild, ...]

    def unsafe(self) -> list[str]:
        """Why this build may crash on another CPU, in words: AMX kernels, native flags, AVX-512, no library."""
        found = []
        for lib in self.libraries:
            if lib.amx:
                found.append(f"{lib.path.name} carries AMX kernels ({', '.join(lib.amx_symbols[:2]) or 'flags'})")
            if lib.native:
                found.append(f"{lib.path.name} was compiled with native CPU flags ({' '.join(lib.arch)})")
            if lib.avx512:
                found.append(f"{lib.path.name} needs AVX-512 (it crashes with SIGILL on CPUs without it)")
        if not self.libraries:
            found.append(f"no shared library in {self.folder}")
        return found

    @property
    def recorded(self) -> bool:
        """Whether any library recorded its compiler flags (m3agent's set-up builds it so)."""
        return any(lib.recorded for lib in self.libraries)

    def problems(self) -> list[str]:
        """Why this build is not known to be portable, in words (empty when it is): :meth:`unsafe`, and
        flags that were not recorded."""
        unknown = [] if self.recorded or not self.libraries else [
            "its compiler flags were not recorded (not built by m3agent's set-up), so it may be compiled for "
            "another CPU"]
        return self.unsafe() + unknown

    def instruction_sets(self) -> list[str]:
        """The ``-m`` instruction-set flags the CPU kernels were compiled with (``-mavx2``, ...)."""
        flags = set().union(*(lib.flags for lib in self.libraries)) if self.libraries else set()
        return sorted(f for f in flags if f.startswith("-m") and not f.startswith(("-mtune", "-mno-")))


def runtime_folder() -> Path | None:
    """Where llama-cpp-python keeps its shared libraries (found, not imported), or ``None``."""
    folder = package_dir("llama_cpp")
    return folder / "lib" if folder is not None else None


def inspect_runtime(folder: Path | None = None) -> RuntimeBuild | None:
    """The build of the installed runtime (or of the libraries in ``folder``); ``None`` when not installed."""
    folder = folder or runtime_folder()
    if folder is None or not folder.is_dir():
        return None
    files = sorted(p for p in folder.iterdir() if p.is_file() and ".so" in p.name and not p.is_symlink())
    return RuntimeBuild(folder, tuple(inspect_library(p) for p in files))


def inspect_library(path: Path) -> LibraryBuild:
    """The recorded compiler flags and AMX symbol names of one ELF library."""
    sections = elf_sections(path.read_bytes())
    flags = frozenset(f for line in _strings(sections.get(RECORD_SECTION, b"")) for f in line.split())
    symbols = {name for table in STRING_TABLES for name in _strings(sections.get(table, b""))
               if AMX_SYMBOL.decode() in name}
    return LibraryBuild(path, flags, tuple(sorted(symbols)))


def elf_sections(data: bytes) -> dict[str, bytes]:
    """The named sections of a 64-bit little-endian ELF file (empty for anything else)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    if not headers or shstrndx >= len(headers):
        return {}
    names = _section_bytes(data, headers[shstrndx])
    found = {}
    for header in headers:
        name = names[header[0]:names.index(b"\0", header[0])].decode("ascii", "replace")
        found[name] = _section_bytes(data, header)
    return found


def _section_bytes(data: bytes, header: tuple[int, ...]) -> bytes:
    kind, offset, size = header[1], header[4], header[5]
    return b"" if kind == 8 else data[offset:offset + size]  # SHT_NOBITS (.bss) has no bytes in the file


def _strings(table: bytes) -> list[str]:
    return [s.decode("utf-8", "replace") for s in table.split(b"\0") if s]
