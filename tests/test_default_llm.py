"""The embedded default: with no settings at all, m3agent answers with the packaged Qwen2.5-1.5B.

Every other test runs with ``M3AGENT_LLM=none`` (tests/conftest.py); these remove it. The end-to-end
test ingests the debate's first clip (perception only), then runs ``m3agent ask --json`` exactly as a
user would, with no ``--llm`` and no ``--mode``: the answer must be written by the model (not a copied
memory), name the model, and cite the speech memory it rests on with its video and times.
Marked ``llm`` and ``slow``; skipped until the model is pulled (setup pulls it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from m3agent.control.modes import default_mode
from m3agent.settings import Settings, load_settings
from m3agent.store import open_store

BIN = Path(sys.executable).parent / "m3agent"
VIDEO = "iianet_debate_trump_clinton"
DEFAULT_MODEL = "qwen-1.5b"


def test_the_default_llm_is_the_packaged_qwen_15b_in_grounded_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("M3AGENT_LLM")
    settings = Settings()
    assert settings.llm == f"llamacpp:{DEFAULT_MODEL}"
    assert settings.control.mode == "auto" and default_mode(settings.llm) == "grounded"
    assert settings.memorize.consolidate_llm is None  # consolidation follows the control llm


@pytest.mark.llm
@pytest.mark.slow
def test_ask_json_on_the_defaults_writes_an_answer_with_cited_evidence(
    media_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    from m3agent.llm import packaged
    from m3agent.pipeline import ingest_source

    if packaged.state(packaged.lookup(DEFAULT_MODEL), Settings().resolved_cache_dir()) == "missing":
        pytest.skip(f"{DEFAULT_MODEL} is not pulled (m3agent models pull {DEFAULT_MODEL}; setup does it)")
    db = tmp_path / "debate.db"
    settings = load_settings(memory=str(db), media={"clip_seconds": 7.0}, perception={"asr_model": "tiny.en"},
                             senses={"shots": False, "text": False, "objects": False, "sounds": False})
    report = ingest_source(settings, str(media_dir / "video" / f"{VIDEO}.mp4"), show_progress=False, max_clips=1)
    assert report.clips_done == 1
    env = {k: v for k, v in os.environ.items() if k != "M3AGENT_LLM"}
    done = subprocess.run([str(BIN), "ask", "--memory", str(db), "--json", "Who was a senator from New York?"],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["mode"] == "grounded" and answer["model"].startswith(DEFAULT_MODEL), answer
    with open_store(str(db)) as store:
        texts = {m.id: m.text for m in store.memories(VIDEO)}
    assert answer["answered"] and answer["text"] not in texts.values(), "a written answer, not a copied memory"
    cited = [e for e in answer["evidence"] if e["cited"]]
    assert cited, answer
    assert all(e["video_id"] == VIDEO and 0 <= e["start_s"] < e["end_s"] <= 7.5 for e in cited), cited
    assert any("senator" in texts[e["memory_id"]].lower() for e in cited), cited
