"""The Python API: ``m3agent.open(...)`` returns an Agent with ingest, ask, search and forget."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import wave
from pathlib import Path

import pytest

import m3agent
from m3agent.domain import EntityKind
from m3agent.errors import ConfigError, NotFoundError
from m3agent.settings import Settings
from m3agent.store import open_store

README = Path(__file__).resolve().parents[1] / "README.md"
EXPORTED = ["Agent", "__version__", "open"]
METHODS = {"ingest", "ask", "search", "forget", "close"}


def api_section() -> str:
    text = README.read_text("utf-8")
    match = re.search(r"^## Python API\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## Python API' section"
    return match.group(1)


def test_exported_names_are_the_documented_ones() -> None:
    assert sorted(m3agent.__all__) == EXPORTED
    assert {name for name in dir(m3agent.Agent) if not name.startswith("_")} == METHODS
    section = api_section()
    assert "m3agent.open(" in section
    for method in METHODS:
        assert f".{method}(" in section, f"README's Python API section does not show Agent.{method}"


def test_open_loads_nothing_heavy_and_takes_defaults_from_settings(tmp_path: Path) -> None:
    probe = (
        "import json, sys, m3agent\n"
        f"agent = m3agent.open({str(tmp_path / 'm.db')!r}, media={{'clip_seconds': 4}})\n"
        "heavy = [m for m in ('torch', 'onnxruntime', 'av', 'numpy', 'usearch') if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'clip': agent.settings.media.clip_seconds}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                         cwd=tmp_path)
    assert json.loads(out.stdout) == {"heavy": [], "clip": 4.0}
    assert not (tmp_path / "m.db").exists(), "open() creates nothing; the first ingest creates the file"
    agent = m3agent.open(tmp_path / "m.db")
    defaults = Settings()
    assert agent.settings.media == defaults.media and agent.settings.control == defaults.control
    assert agent.settings.memory.path == tmp_path.resolve() / "m.db"


def test_bad_settings_and_bad_forget_calls_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        m3agent.open(tmp_path / "m.db", media={"clip_seconds": -1})
    agent = m3agent.open(tmp_path / "m.db")
    with pytest.raises(ConfigError, match="exactly one"):
        agent.forget()
    with pytest.raises(ConfigError, match="exactly one"):
        agent.forget(video="a", memory=3)
    with pytest.raises(NotFoundError):
        agent.ask("anything?")  # no memory file yet


@pytest.mark.slow
def test_ingest_search_ask_forget_on_real_video_with_embedded_defaults(media_dir: Path, tmp_path: Path) -> None:
    video = media_dir / "video" / "iianet_debate_trump_clinton.mp4"
    db = tmp_path / "debate.db"
    with m3agent.open(db) as agent:
        report = agent.ingest(video)
        assert report.clips_done == 1 and not report.clips_failed and report.memories_written > 0

        found = agent.search("senator from New York", k=3)
        assert found.hits and any("senator" in h.text.lower() for h in found.hits)
        assert all(h.memory.video_id == "iianet_debate_trump_clinton" for h in found.hits)

        answer = agent.ask("Who said they were a senator from New York?")  # the reranker quotes it
        assert answer.answered and answer.mode == "select"
        assert "senator from new york" in answer.text.lower(), answer.to_dict()
        assert answer.evidence and answer.evidence[0].clip.video_id == "iianet_debate_trump_clinton"
        assert "woman on the right" in answer.text, "a who-question names the person as a person would"
        assert "<character_" not in answer.text and "<face_" not in answer.text, answer.text
        with open_store(str(db), readonly=True, create=False) as store:
            said = store.get_memory(answer.evidence[0].memory_id)
            right = {f.entity_id for f in store.faces("iianet_debate_trump_clinton") if f.bbox.x1 > 640}
            faces = {link.face_id for link in store.links(min_confidence=store.link_confidence)
                     if link.voice_id in said.entity_ids}
        assert faces and faces <= right, "the speaker is the face on the right (Clinton)"

        with open_store(str(db), readonly=True, create=False) as store:
            voices = store.entities(EntityKind.VOICE)
            snippets = [s for v in voices for s in store.entity_snippets(v.id)]
        assert voices and len(snippets) == len(voices), "one snippet per voice entity of the one clip"
        for data in snippets:
            with wave.open(io.BytesIO(data), "rb") as wav:
                assert (wav.getnchannels(), wav.getframerate()) == (1, 16000)
                assert 0.2 <= wav.getnframes() / 16000 <= 3.0

        agent.forget(video="iianet_debate_trump_clinton")
        assert agent.search("senator from New York", k=3).hits == ()
        with open_store(str(db), readonly=True, create=False) as store:
            assert store.videos() == [] and all(store.entity_snippets(v.id) == [] for v in voices)
