"""Where trained models live, and the list ``m3agent models list`` shows beside the packaged ones.

A trained model is ``<cache>/models/trained/<name>.gguf`` with its card ``<name>.md`` and its facts
``<name>.json`` (base, steps, reward, scores); its run (checkpoints, adapter, metrics, curve) is
``<cache>/train/runs/<name>/``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m3agent.errors import ConfigError

TRAINED_FOLDER = ("models", "trained")
RUNS_FOLDER = ("train", "runs")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class TrainedModel:
    name: str
    path: Path
    size: int
    facts: dict[str, Any]

    @property
    def spec(self) -> str:
        return f"llamacpp:{self.path}"


def checked_name(name: str) -> str:
    """``name`` when it is a safe file name (letters, digits, ``.``, ``_``, ``-``), else a :class:`ConfigError`."""
    if not _NAME.match(name) or name.endswith(".gguf"):
        raise ConfigError(f"{name!r} cannot name a trained model",
                          hint="use letters, digits, '.', '_' or '-' (e.g. control-0.5b-grpo)")  # fmt: skip
    return name


def default_run_name(base: str, method: str) -> str:
    """``control-<base>-<method>`` (``control-qwen-0.5b-expert``), with what a file name cannot hold replaced by
    ``-``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-.") or "model"
    return f"control-{stem[:48]}-{method}"


def trained_dir(cache_dir: Path) -> Path:
    return cache_dir.joinpath(*TRAINED_FOLDER)


def run_dir(cache_dir: Path, name: str) -> Path:
    return cache_dir.joinpath(*RUNS_FOLDER) / checked_name(name)


def model_path(cache_dir: Path, name: str) -> Path:
    return trained_dir(cache_dir) / f"{checked_name(name)}.gguf"


def trained_models(cache_dir: Path) -> list[TrainedModel]:
    """Every exported model under the cache, by name."""
    found = []
    for path in sorted(trained_dir(cache_dir).glob("*.gguf")):
        facts_file = path.with_suffix(".json")
        facts = json.loads(facts_file.read_text(encoding="utf-8")) if facts_file.is_file() else {}
        found.append(TrainedModel(path.stem, path, path.stat().st_size, facts))
    return found
