"""docs/screenshots.py, the README's inspector pictures from synthetic data: its memory is written through the
store's API, holds the people it draws (named or described), and the graph counts each shot's own people."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("av", reason="needs PyAV to encode the synthetic video")
SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "screenshots.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_synthetic_memory_holds_the_people_and_shots_it_shows(tmp_path: Path) -> None:
    from m3agent.graph.descriptions import combine_attributes
    from m3agent.graph.operators import EntityGraph
    from m3agent.store import open_store

    screenshots = load()
    memory = tmp_path / "memory.db"
    screenshots.write_memory(memory, tmp_path)
    assert all((tmp_path / f"{e.video_id}.mp4").stat().st_size > 0 for e in screenshots.EPISODES)
    with open_store(str(memory)) as store:
        graph = EntityGraph(store)
        people = graph.people()
        assert sorted(p.name for p in people if p.name) == ["Maya Ortiz", "Priya Nair", "Tom Becker"]
        assert len(people) == len(screenshots.CAST)
        unnamed = [p for p in people if not p.name]
        assert unnamed and all(combine_attributes(store.entity_attributes(p.entity_ids)) for p in unnamed)
        show = screenshots.SHOW.video_id
        assert [graph.count_people(show, s.start_s, s.end_s).distinct for s in graph.shots(show)] == [2, 2, 1, 4]
        assert [s.kind for s in graph.shots(show)] == ["live", "live", "still", "live"]
