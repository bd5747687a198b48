"""bench/scaling.py: the conversions to hours, the table and the section from recorded figures (no model, no store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.bench_helpers import load_bench_script

scaling = load_bench_script("scaling")


def _data() -> dict[str, Any]:
    """A recorded run: 20 memories per minute, 60 MiB per hour, perception RTF 0.5, consolidation RTF 2."""
    return {
        "constants": {
            "episode": {"db": "ep.db", "media_s": 180.0, "memories": 60, "by_kind": {"episodic": 57, "semantic": 3},
                        "file_mib": 3.0, "per_minute": 20.0, "mib_per_hour": 60.0},
            "others": [],
            "perception": {"rtf": 0.5, "cpu_s_per_media_s": 0.8, "source": "section Ingest"},
            "consolidation": {"rtf": 2.0, "source": "consolidate.jsonl"},
        },
        "llm": "qwen",
        "questions": ["Where is the old photo?", "Who came?"],
        "answers": {"1200": {"file_mib": 3.5, "records": [
            {"question": "Where is the old photo?", "seconds": 10.0, "model_s": 8.0, "prompt_tokens": 500,
             "evaluated": 300, "load": 2.0},
            {"question": "Who came?", "seconds": 14.0, "model_s": 9.0, "prompt_tokens": 600, "evaluated": 320,
             "load": 3.0}]}},
        "run": {"env": {"machine": {"cpu": "AMD EPYC", "cores": 2, "ram_gib": 23.5}, "date": "2026-11-27 02:00 UTC",
                        "git_commit": "abc"}, "command": "python bench/scaling.py", "load_start": 2.0,
                "load_end": 3.0},
    }


def _runs() -> dict[str, Any]:
    sizes = {"1200": {"store": {"db_mib": 2}, "api": {"plain": {"p50_ms": 50.0, "p95_ms": 90.0}}}}
    return {"old": {"date": "2026-11-26 19:54 UTC", "commit": "a", "machine": {"load_start": 9.0}, "sizes": {}},
            "new": {"date": "2026-11-26 20:18 UTC", "commit": "b", "machine": {"load_start": 5.0}, "sizes": sizes}}


def test_memories_convert_to_hours_of_video_and_of_ingest() -> None:
    assert scaling.video_hours(1200, 20.0) == pytest.approx(1.0)
    assert scaling.memories_for(1.0, 20.0) == pytest.approx(1200)
    assert scaling.ingest_hours(2.0, 0.5) == pytest.approx(1.0)
    assert scaling.ingest_hours(2.0, 0.5, 2.0) == pytest.approx(5.0)


def test_percentiles_of_a_few_answers() -> None:
    assert scaling.p50_p95([3.0, 1.0, 2.0, 10.0, 4.0]) == (3.0, 10.0)
    assert scaling.p50_p95([5.0]) == (5.0, 5.0)


def test_search_label_defaults_to_the_newest_run() -> None:
    assert scaling.search_label(_runs(), None) == "new"
    assert scaling.search_label(_runs(), "old") == "old"
    with pytest.raises(SystemExit):
        scaling.search_label(_runs(), "missing")


def test_rows_join_conversions_files_search_and_answers() -> None:
    table = scaling.rows(_data(), _runs()["new"], "plain", {1200: 2.4})
    first, million = table
    assert first["n"] == 1200 and first["video_h"] == pytest.approx(1.0)
    assert first["ingest_consolidated_h"] == pytest.approx(2.5)
    assert first["real_file_mib"] == pytest.approx(60.0)
    assert first["rows_mib"] == 2.4 and first["snapshot_mib"] == 3.5
    assert first["search_ms"] == (50.0, 90.0)
    assert first["answer_s"] == (12.0, 14.0) and first["retrieval_s"] == (3.5, 5.0)
    assert first["prompt_tokens"] == 550 and first["load"] == (2.0, 3.0)
    assert million["n"] == 10**6 and million["million"] and "answer_s" not in million
    assert million["video_h"] == pytest.approx(10**6 / 1200)


def test_table_and_section_render() -> None:
    table = scaling.render_table(scaling.rows(_data(), _runs()["new"], "plain"))
    lines = table.splitlines()
    assert len(lines) == 4 and lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert lines[2].startswith("| 1,200 | 1 | 0.5 | 2.5 | 2 | 3.5 | 60 | 50 / 90 | 12 / 14 | 3.5 / 5 | 550 (310) |")
    assert lines[3].startswith("| 1,000,000 | 833 |") and "(†)" in lines[3] and "vector 14.6 / 23.4" in lines[3]
    body = scaling.render(_data(), _runs(), "new", "plain")
    assert "Machine: AMD EPYC, 2 cores" in body and "Load average at end: 3.0." in body
    assert "run `new`" in body and "`old`" in body and '"Where is the old photo?"' in body
    assert "video h x 60.0 MiB per hour" in body


def test_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "scaling.png"
    assert scaling.plot(scaling.rows(_data(), _runs()["new"], "plain"), 20.0, out)
    assert out.stat().st_size > 10_000
