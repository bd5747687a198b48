"""Load a ``bench/`` script as a module, for tests of its pure functions.

The scripts are not a package (they run as ``python bench/x.py``), so tests load them by path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"


def load_bench_script(name: str) -> Any:
    """The module of ``bench/<name>.py``, executed afresh (its ``main`` does not run)."""
    path = BENCH_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
