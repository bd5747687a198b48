"""Many-video ingest without a cluster: job lists, executor checks, retries of a broken video."""

from __future__ import annotations

from pathlib import Path

import pytest

from m3agent.errors import ConfigError
from m3agent.executor import ingest_videos, video_jobs
from m3agent.settings import load_settings


def test_folders_expand_to_their_videos_with_unique_ids(media_dir: Path, tmp_path: Path) -> None:
    folder = media_dir / "video" / "hdtf_talking_heads"
    jobs = video_jobs([str(folder), str(folder / "WDA_KatieHill_000.mp4")])
    assert [j.video_id for j in jobs] == ["WDA_AlexandriaOcasioCortez_000", "WDA_BobMenendez_000",
                                          "WDA_EdMarkey0_000", "WDA_KatieHill_000"]  # sorted, no duplicates
    assert video_jobs([str(folder / "WDA_KatieHill_000.mp4")], "katie")[0].video_id == "katie"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "same.mp4").write_bytes(name.encode())
    with pytest.raises(ConfigError, match="same"):
        video_jobs([str(tmp_path / "a"), str(tmp_path / "b")])
    with pytest.raises(ConfigError, match="--video-id"):
        video_jobs([str(folder)], "one")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no video files"):
        video_jobs([str(tmp_path / "empty")])


def test_ray_needs_a_shared_memory(tmp_path: Path) -> None:
    settings = load_settings(memory=str(tmp_path / "m.db"), executor={"kind": "ray"})
    with pytest.raises(ConfigError, match="postgresql"):
        ingest_videos(settings, video_jobs([str(tmp_path / "x.mp4")]))


def test_a_broken_video_is_retried_then_reported(tmp_path: Path) -> None:
    """(The Ray test shows the other videos going on; this is the local executor's retry loop.)"""
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all" * 100)
    settings = load_settings(memory=str(tmp_path / "m.db"), executor={"retries": 2})
    seen: list[str] = []
    (bad,) = ingest_videos(settings, video_jobs([str(broken)]), on_outcome=lambda o: seen.append(o.video_id))
    assert seen == ["broken"]
    assert not bad.ok and bad.attempts == 3 and bad.error and not bad.report
