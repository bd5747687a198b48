"""``m3agent migrate`` copies a real ingested memory SQLite -> PostgreSQL -> SQLite without loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from m3agent.domain import Clip, EntityKind, Video
from m3agent.errors import IntegrityError
from m3agent.pipeline import ingest_source
from m3agent.settings import load_settings
from m3agent.store import open_store
from m3agent.store.transfer import copy_memory, dump

BIN = Path(sys.executable).parent / "m3agent"
pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def migrate(source: str, target: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
    out = subprocess.run([str(BIN), "migrate", "--from", source, "--to", target, "--json"], capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_a_real_memory_round_trips_through_postgres(  # type: ignore[no-untyped-def]
    media_dir: Path, tmp_path: Path, pg_server
) -> None:
    original = tmp_path / "debate.db"
    settings = load_settings(memory=str(original), media={"clip_seconds": 4.0}, perception={"asr_model": "tiny.en"})
    report = ingest_source(settings, str(media_dir / "video" / "iianet_debate_trump_clinton.mp4"),
                           show_progress=False)
    assert report.clips_done >= 3 and report.memories_written > 0
    url = pg_server.database()
    there = migrate(str(original), url)
    back = tmp_path / "back.db"
    again = migrate(url, str(back))
    assert there["rows"] == again["rows"] and not there["skipped_columns"]

    with open_store(str(original), readonly=True) as a, open_store(url) as pg, open_store(str(back)) as b:
        rows = dump(a)
        for table in ("videos", "clips", "entities", "entity_embeddings", "faces", "voices", "blobs", "memories",
                      "edges", "characters", "clip_timings"):
            assert rows[table], f"the ingested memory has no {table}: the round trip would prove little"
        assert dump(pg) == rows and dump(b) == rows  # every row and byte, ids included
        for store in (pg, b):
            assert store.characters() == a.characters() and store.links() == a.links()
            assert store.embedding_model() == a.embedding_model()
            for m in a.memories()[:5]:
                assert [s.memory.id for s in store.vector_search(m.embedding, 3)] == \
                       [s.memory.id for s in a.vector_search(m.embedding, 3)]
            face = a.entities()[0].id
            assert store.entity_crops(face) == a.entity_crops(face)
        with pytest.raises(IntegrityError, match="already holds a memory"):
            copy_memory(a, pg)
        for store in (pg, b):  # new rows continue after the copied ids
            store.add_video(Video("new", "/new.mp4"))
            with store.clip(Clip("new", 0, 0.0, 4.0)) as writer:
                entity = writer.add_entity(EntityKind.FACE, [])
            assert entity.id == max(e.id for e in a.entities()) + 1
