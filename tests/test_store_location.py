"""One parser for memory specs (``settings.memory``): relative and absolute SQLite URLs mean the same file in the
store, the CLI, the server (its uploads and job journal sit beside the memory) and the Python API; and the Python
API opens memories with the settings the CLI applies (``perception.link_accept_confidence``).

Regressions (issue 22): ``m3agent serve --memory sqlite:///rel.db`` opened ``./rel.db`` but kept its files in
``/rel-server/``; ``m3agent.open(...).ask()`` grouped characters at the default link bar whatever the settings said.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import m3agent
from m3agent.domain import Clip, EntityKind, FaceVoiceLink, LinkSource, Memory, MemoryKind, Video
from m3agent.embed.hashing import HashingEmbedder
from m3agent.errors import ConfigError
from m3agent.settings import Settings, load_settings
from m3agent.store import open_memory, open_store
from m3agent.store.location import StoreKind, StoreLocation, parse_location

BIN = Path(sys.executable).parent / "m3agent"
EMBEDDER = HashingEmbedder(64)
QUESTION = "who wears the red hat?"


def build_party(path: Path) -> None:
    """A face and a voice linked at confidence 0.7, and one memory about each."""
    with open_store(str(path)) as store:
        store.set_embedding_model(EMBEDDER.name, EMBEDDER.dim)
        store.add_video(Video("party", "/nowhere/party.mp4", duration_s=30.0))
        with store.clip(Clip("party", 0, 0.0, 30.0)) as w:
            face = w.add_entity(EntityKind.FACE, [np.eye(128, dtype=np.float32)[0]]).id
            voice = w.add_entity(EntityKind.VOICE, [np.eye(192, dtype=np.float32)[0]]).id
            w.set_link(FaceVoiceLink(face, voice, 0.7, LinkSource.AV, "lips move with the voice"))
            for text, entity in ((f"<face_{face}> wears a red hat", face),
                                 (f'<voice_{voice}> says: "the red hat is mine"', voice)):
                w.add_memory(Memory(MemoryKind.EPISODIC, text, "party", 0, 0.0, 30.0, (entity,),
                                    embedding=EMBEDDER.embed([text])[0]))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")} | {"M3AGENT_LLM": "none"}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


@pytest.fixture
def party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``rel.db`` in the working directory (``tmp_path``, resolved)."""
    monkeypatch.chdir(tmp_path)
    build_party(tmp_path / "rel.db")
    return tmp_path.resolve() / "rel.db"


# the parser --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["rel.db", "./rel.db", "sqlite:///rel.db", "sqlite:rel.db", "sqlite:///rel.db?x=1",
                                  "  rel.db ", "SQLITE:///rel.db"])
def test_relative_specs_name_the_file_in_the_working_directory(spec: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tmp_path = tmp_path.resolve()
    location = parse_location(spec)
    assert (location.kind, location.path, location.url) == (StoreKind.SQLITE, tmp_path / "rel.db", None)
    assert str(location) == spec.strip() and location == parse_location(location.canonical)


def test_absolute_home_and_postgres_specs(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    assert parse_location(f"sqlite:///{tmp_path}/a.db").path == tmp_path / "a.db"  # sqlite:////abs (4 slashes)
    assert parse_location(str(tmp_path / "a.db")).path == tmp_path / "a.db"
    assert parse_location(tmp_path / "a.db").path == tmp_path / "a.db"
    assert parse_location("~/a.db").path == Path.home().resolve() / "a.db"
    for spec in ("postgres://u:pw@host:5432/db?sslmode=require", "postgresql://u:pw@host:5432/db?sslmode=require"):
        location = parse_location(spec)
        assert (location.kind, location.path) == (StoreKind.POSTGRES, None)
        assert location.url == "postgresql://u:pw@host:5432/db?sslmode=require" and str(location) == spec


@pytest.mark.parametrize("spec", ["", "sqlite:", "sqlite:///", ":memory:", "sqlite:///:memory:", "mysql://h/db"])
def test_a_spec_naming_no_memory_is_a_config_error_with_a_hint(spec: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_location(spec)
    assert "sqlite:///relative.db" in error.value.hint


def test_settings_hold_a_parsed_location_from_flags_env_and_toml(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tmp_path = tmp_path.resolve()
    tmp_path = tmp_path.resolve()
    tmp_path = tmp_path.resolve()
    assert load_settings().memory == StoreLocation(StoreKind.SQLITE, path=tmp_path / "m3agent.db")
    (tmp_path / "m3agent.toml").write_text('memory = "sqlite:///file.db"\n')
    assert load_settings().memory.path == tmp_path / "file.db"
    monkeypatch.setenv("M3AGENT_MEMORY", "postgres://u@h/db")
    assert load_settings().memory.url == "postgresql://u@h/db"
    assert load_settings(memory=f"sqlite:///{tmp_path}/flag.db").memory.path == tmp_path / "flag.db"
    with pytest.raises(ConfigError, match=r"memory.*mysql"):
        load_settings(memory="mysql://h/db")


def test_settings_sent_to_a_worker_as_json_name_the_same_memory(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tmp_path = tmp_path.resolve()
    tmp_path = tmp_path.resolve()
    for spec in ("sqlite:///rel.db", "postgres://u:pw@h/db"):
        settings = load_settings(memory=spec)
        sent = settings.model_dump_json()
        monkeypatch.chdir(tmp_path.parent)  # a worker elsewhere
        received = Settings.model_validate(json.loads(sent))
        monkeypatch.chdir(tmp_path)
        assert received == settings and received.memory == settings.memory
    assert json.loads(load_settings(memory="sqlite:///rel.db").model_dump_json())["memory"] == str(tmp_path / "rel.db")


# the CLI -----------------------------------------------------------------------------------------------------


def test_cli_reads_relative_and_absolute_sqlite_urls_and_sees_one_memory_however_written(party: Path) -> None:
    here = party.parent
    elsewhere = here / "elsewhere"
    elsewhere.mkdir()
    for spec, cwd in (("sqlite:///rel.db", here), (f"sqlite:///{party}", elsewhere), ("rel.db", here)):
        out = cli("show", "--memory", spec, "--json", cwd=cwd)
        assert out.returncode == 0, out.stderr
        assert [v["video_id"] for v in json.loads(out.stdout)] == ["party"], spec
    same = cli("migrate", "--from", "sqlite:///rel.db", "--to", str(party), cwd=here)
    assert same.returncode == 2 and "same memory" in same.stderr and "Traceback" not in same.stderr
    bad = cli("show", "--memory", "sqlite:///", cwd=here)
    assert bad.returncode == 2 and "names no file" in bad.stderr and "Traceback" not in bad.stderr


# the server --------------------------------------------------------------------------------------------------


def wait_job(client: Any, job_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def test_server_keeps_uploads_and_jobs_beside_the_memory(party: Path) -> None:
    """Served as ``sqlite:///rel.db`` and then as ``sqlite:////abs/rel.db``: one memory, one server folder."""
    pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
    from fastapi.testclient import TestClient

    from m3agent.server.app import create_app
    from m3agent.server.context import ServerContext
    from server_helpers import tone

    folder = party.parent / "rel-server"
    jobs: list[str] = []
    for spec in ("sqlite:///rel.db", f"sqlite:///{party}"):
        settings = load_settings(memory=spec, embedder="hash", llm="none", perception={"faces": False, "voices": False},
                                 server={"consolidate_when_idle": False})
        assert ServerContext(settings).data_dir == folder, spec  # checked before anything is written (/rel-server)
        with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1") as client:
            assert client.get("/ready").json()["memory"] == f"sqlite:///{party}"
            sent = client.post("/api/jobs/upload", files={"file": ("hello.wav", tone(), "audio/wav")})
            assert sent.status_code == 202, sent.text
            jobs.append(wait_job(client, sent.json()["id"])["id"])
        assert [p.suffix for p in (folder / "uploads").iterdir()] == [".wav"] * len(jobs)
        assert sorted(job["id"] for job in json.loads((folder / "jobs.json").read_text())) == sorted(jobs)
    elsewhere = load_settings(memory="sqlite:///rel.db", server={"data_dir": str(party.parent / "files")})
    assert ServerContext(elsewhere).data_dir == party.parent / "files"  # the setting still wins


# the Python API ----------------------------------------------------------------------------------------------


def test_api_opens_relative_and_absolute_sqlite_urls(party: Path) -> None:
    for spec in ("sqlite:///rel.db", f"sqlite:///{party}", party):
        with m3agent.open(spec, embedder="hash", llm="none") as agent:
            assert agent.settings.memory.path == party
            assert repr(agent) == f"Agent({str(spec)!r})"
            assert [h.text for h in agent.search("red hat", k=2).hits]  # the built memory, not a new file
    assert [p.name for p in party.parent.glob("*.db")] == ["rel.db"]


def test_api_honours_link_accept_confidence_like_the_cli(party: Path) -> None:
    """Linked at 0.7: one character at the default bar (0.5), two at 0.9, in the API as in ``m3agent ask``."""
    texts: dict[float, list[str]] = {}
    for bar in (0.5, 0.9):
        (party.parent / "m3agent.toml").write_text(f'embedder = "hash"\n[perception]\nlink_accept_confidence = {bar}\n')
        with m3agent.open("sqlite:///rel.db", llm="none") as agent:
            answer = agent.ask(QUESTION)
        texts[bar] = [e.text for e in answer.evidence]
        out = cli("ask", QUESTION, "--memory", "sqlite:///rel.db", "--json", cwd=party.parent)
        assert out.returncode == 0, out.stderr
        assert texts[bar] == [e["text"] for e in json.loads(out.stdout)["evidence"]], bar
        with open_memory(load_settings(memory="rel.db"), readonly=True, create=False) as store:
            assert len(store.characters()) == (1 if bar == 0.5 else 2)
    assert texts[0.5] == ["<character_1> wears a red hat", '<character_1> says: "the red hat is mine"']
    assert texts[0.9] == ["<character_1> wears a red hat", '<character_2> says: "the red hat is mine"']
