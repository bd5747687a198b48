"""Scale-out on real videos: Ray ingest into PostgreSQL equals sequential SQLite ingest; migrate round-trips.

One sequential ingest of the four shared talking-head videos (SQLite, clips of 4 s) is the reference for
both tests: the Ray run must give the same clips, memories and entities per video (memory texts up to
entity numbering), and ``m3agent migrate`` must carry that memory to PostgreSQL and back without loss.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from m3agent import tags
from m3agent.domain import Clip, EntityKind, Video
from m3agent.errors import IntegrityError
from m3agent.executor import ingest_videos, video_jobs
from m3agent.settings import Settings, load_settings
from m3agent.store import open_store
from m3agent.store.protocol import MemoryStore
from m3agent.store.transfer import copy_memory, dump

BIN = Path(sys.executable).parent / "m3agent"
pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def settings_for(memory: str, **executor: Any) -> Settings:
    return load_settings(memory=memory, media={"clip_seconds": 4.0}, perception={"asr_model": "tiny.en"},
                         executor=executor or None)


@pytest.fixture(scope="module")
def videos(media_dir: Path) -> list[str]:
    folder = media_dir / "video" / "hdtf_talking_heads"
    return sorted(str(p) for p in folder.glob("*.mp4"))


@pytest.fixture(scope="module")
def sequential(videos: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four videos ingested one after another into one SQLite file."""
    db = tmp_path_factory.mktemp("sequential") / "memory.db"
    outcomes = ingest_videos(settings_for(str(db)), video_jobs(videos))
    assert all(o.ok and o.report["clips_done"] >= 2 for o in outcomes), outcomes
    return db


def per_video(store: MemoryStore) -> dict[str, tuple[Any, ...]]:
    """Clips, entity kinds and memory texts of every video, tags renumbered in order of first mention."""
    out: dict[str, tuple[Any, ...]] = {}
    for video in sorted(v.video_id for v in store.videos()):
        numbers: dict[tuple[str, int], int] = {}

        def renumber(tag: tags.Tag, numbers: dict[tuple[str, int], int] = numbers) -> tags.Token:
            return tags.Tag(tag.kind, numbers.setdefault((tag.kind, tag.id), len(numbers) + 1))

        texts = [tags.rewrite(m.text, renumber) for m in store.memories(video_id=video)]
        clips = [(c.index, round(c.start_s, 2), round(c.end_s, 2), s.value) for c, s, _ in store.clips(video)]
        kinds = sorted(e.kind.value for e in store.entities() if e.video_id == video)
        out[video] = (clips, kinds, texts)
    return out


@pytest.mark.ray
def test_ray_ingest_into_postgres_equals_sequential_sqlite(  # type: ignore[no-untyped-def]
    sequential: Path, videos: list[str], pg_server, tmp_path: Path
) -> None:
    ray = pytest.importorskip("ray", reason="the Ray tests need ray: pip install 'm3agent[ray]'")
    url = pg_server.database()
    first = ingest_videos(settings_for(url), video_jobs(videos[:1]), max_clips=1)  # an attempt cut short
    assert first[0].report["clips_done"] == 1
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(4000))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 1024 * 1024)
    try:
        seen: list[str] = []
        outcomes = ingest_videos(settings_for(url, kind="ray", cpus_per_task=1.0, retries=1),
                                 video_jobs([*videos, str(broken)]), on_outcome=lambda o: seen.append(o.video_id))
    finally:
        ray.shutdown()
    assert sorted(seen) == sorted(o.video_id for o in outcomes)  # reported one by one
    *good, bad = outcomes
    assert all(o.ok and o.attempts == 1 for o in good), good
    assert good[0].report["clips_already_done"] == 1  # resumed after the committed clip: nothing twice
    assert not bad.ok and bad.attempts == 2 and bad.error and bad.video_id == "broken"
    with open_store(url) as pg, open_store(str(sequential), readonly=True) as sqlite:
        assert "broken" not in {v.video_id for v in pg.videos()}
        assert per_video(pg) == per_video(sqlite)
        assert pg.counts()["memories"] == sqlite.counts()["memories"]  # type: ignore[attr-defined]


def migrate(source: str, target: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
    out = subprocess.run([str(BIN), "migrate", "--from", source, "--to", target, "--json"], capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_migrate_round_trips_a_real_memory(sequential: Path, pg_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = pg_server.database()
    there = migrate(str(sequential), url)
    back = tmp_path / "back.db"
    again = migrate(url, str(back))
    assert there["rows"] == again["rows"] and not there["skipped_columns"]
    with open_store(str(sequential), readonly=True) as a, open_store(url) as pg, open_store(str(back)) as b:
        rows = dump(a)
        for table in ("videos", "clips", "entities", "entity_embeddings", "faces", "voices", "blobs", "memories",
                      "edges", "links", "characters", "clip_timings"):
            assert rows[table], f"the ingested memory has no {table}: the round trip would prove little"
        assert dump(pg) == rows and dump(b) == rows  # every row and byte, ids included
        for store in (pg, b):
            assert store.characters() == a.characters() and store.links() == a.links()
            assert store.embedding_model() == a.embedding_model()
            for m in a.memories()[:5]:
                assert [s.memory.id for s in store.vector_search(m.embedding, 3)] == \
                       [s.memory.id for s in a.vector_search(m.embedding, 3)]
            face = a.entities(EntityKind.FACE)[0].id
            assert store.entity_crops(face) == a.entity_crops(face) != []
        with pytest.raises(IntegrityError, match="already holds a memory"):
            copy_memory(a, pg)
        for store in (pg, b):  # new rows continue after the copied ids
            store.add_video(Video("new", "/new.mp4"))
            with store.clip(Clip("new", 0, 0.0, 4.0)) as writer:
                entity = writer.add_entity(EntityKind.FACE, [])
            assert entity.id == max(e.id for e in a.entities()) + 1
