"""Giving back the pages of read-only model files (``llm/mapped_pages``), on real mappings of this process."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from m3agent.mapped_pages import PageReleaser, readonly_mappings, release, resident_bytes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux)")

SIZE = 8 << 20


def _file(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(bytes(range(256)) * (SIZE // 256))
    return path


def _touch(view: mmap.mmap) -> int:
    return sum(view[i] for i in range(0, len(view), mmap.PAGESIZE))


def test_a_read_only_mapping_is_given_back_and_reads_the_same_after(tmp_path: Path) -> None:
    path = _file(tmp_path / "model", "weights.bin")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as view:
        before = _touch(view)
        assert resident_bytes(tmp_path / "model") >= SIZE // 2, "touched pages are resident"
        ranges = readonly_mappings(tmp_path / "model")
        assert sum(end - start for start, end in ranges) >= SIZE
        assert release(ranges) >= SIZE
        assert resident_bytes(tmp_path / "model") < SIZE // 8, "the pages left the process"
        assert _touch(view) == before and view[:256] == bytes(range(256)), "a read afterwards sees the file"


def test_writable_mappings_and_other_folders_are_left_alone(tmp_path: Path) -> None:
    mine = _file(tmp_path / "model", "state.bin")
    other = _file(tmp_path / "elsewhere", "weights.bin")
    with mine.open("r+b") as f, mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE) as written, \
            other.open("rb") as g, mmap.mmap(g.fileno(), 0, prot=mmap.PROT_READ) as elsewhere:
        written[:4] = b"kept"  # a private copy of the page: advising it away would lose it
        _touch(elsewhere)
        assert readonly_mappings(tmp_path / "model") == []
        release(readonly_mappings(tmp_path / "model"))
        assert written[:4] == b"kept"
        assert resident_bytes(tmp_path / "elsewhere") >= SIZE // 2, "another folder's pages stay"


def test_the_releaser_gives_back_pages_read_while_it_runs(tmp_path: Path) -> None:
    path = _file(tmp_path / "model", "weights.bin")
    releaser = PageReleaser(tmp_path / "model", every_s=0.01).start()
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as view:
            _touch(view)
            releaser.settle()  # passes once at once
            assert resident_bytes(tmp_path / "model") < SIZE // 8
    finally:
        releaser.stop()
