"""A fresh set-up, timed: a clean clone of HEAD, empty caches, ``bash scripts/setup.sh``, phase by phase.

Nothing of this machine's set-up is reused: the clone gets its own ``.venv``, and pip's cache, the
compiled-wheel cache and the model cache all point at empty folders, so every package is downloaded, the
runtime is compiled and the default model is pulled, as on a new machine. The phases are the lines
``scripts/setup.sh`` prints (``(phase: N s)``). Writes the "Set-up (fresh machine)" section of
docs/benchmarks.md.

    .venv/bin/python bench/setup_time.py [--model qwen-1.5b] [--compile [--keep-wheel]] [--no-write]

The default set-up installs the prebuilt llama.cpp runtime; ``--compile`` times ``LLAMACPP=compile`` (also compiling
llama-cpp-python), and ``--keep-wheel`` then copies the compiled runtime into this machine's wheel cache (its key
is the same here), so that the next ``make setup LLAMACPP=compile`` does not compile it again.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHASE = re.compile(r"^\s+\((.+): (\d+) s\)$")


def fresh_setup(model: str, root: Path, compile_llama: bool = False) -> tuple[list[tuple[str, int]], float, str]:
    """Clone, run the set-up with empty caches (``compile_llama``: ``LLAMACPP=compile``); the phases, the wall
    seconds and the last lines of its log."""
    clone = root / "m3agent"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    env = {**os.environ, "PIP_CACHE_DIR": str(root / "pip-cache"), "M3AGENT_WHEEL_CACHE": str(root / "wheels"),
           "M3AGENT_CACHE_DIR": str(root / "m3agent-cache"), "M3AGENT_SETUP_MODEL": model,
           "LLAMACPP": "compile" if compile_llama else ""}
    started = time.perf_counter()
    run = subprocess.run(["bash", "scripts/setup.sh"], cwd=clone, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    log = run.stderr
    if run.returncode != 0:
        raise SystemExit(f"the set-up failed ({run.returncode}):\n{log[-3000:]}")
    phases = [(m.group(1), int(m.group(2))) for line in log.splitlines() if (m := PHASE.match(line))]
    return phases, wall, log


def write_section(phases: list[tuple[str, int]], wall: float, model: str, load: float, command: str,
                  compile_llama: bool) -> None:
    from m3agent.bench.environment import environment
    from m3agent.bench.results_io import replace_section, run_line

    runtime = ("`LLAMACPP=compile`: llama-cpp-python is compiled too, in the background from the venv's creation "
               "on, so its own line is only the wait left after the other installs." if compile_llama else
               "The local model runtime is the prebuilt xllamacpp wheel: nothing is compiled.")
    lines = [run_line(environment(), command, load), "",
             "A clean clone of the commit, and empty pip, compiled-wheel and model caches: everything is "
             f"downloaded and pulled as on a new machine (`M3AGENT_SETUP_MODEL={model}`). {runtime}", "",
             "| phase | seconds |", "|---|---|"]
    lines += [f"| {name} | {seconds} |" for name, seconds in phases]
    lines += [f"| **total (wall)** | **{wall:.0f}** |"]
    replace_section(REPO / "docs" / "benchmarks.md", "Set-up (fresh machine)", "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen-1.5b", help="M3AGENT_SETUP_MODEL of the run")
    parser.add_argument("--compile", action="store_true", help="LLAMACPP=compile: compile llama-cpp-python too")
    parser.add_argument("--keep-wheel", action="store_true", help="keep the compiled runtime in the wheel cache")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="m3agent-setup-") as tmp:
        phases, wall, _ = fresh_setup(args.model, Path(tmp), args.compile)
        if args.keep_wheel:
            cache = Path(os.environ.get("M3AGENT_WHEEL_CACHE", Path.home() / ".cache" / "m3agent-wheels"))
            for built in (Path(tmp) / "wheels").glob("llama-cpp-python-*"):
                if built.is_dir() and not (cache / built.name).exists():
                    shutil.copytree(built, cache / built.name)
    for name, seconds in phases:
        print(f"{seconds:6d} s  {name}")
    print(f"{wall:6.0f} s  total")
    if not args.no_write:
        write_section(phases, wall, args.model, load, "python bench/setup_time.py " + " ".join(sys.argv[1:]),
                      args.compile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
