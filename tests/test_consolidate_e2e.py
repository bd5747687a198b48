"""Consolidation against the real packaged Qwen2.5 models on a real ingested video (the debate clip).

``ingest --llm llamacpp:qwen-1.5b`` ends with consolidation: the model reads the clip's episodic
memories under its grammar and writes semantic facts with their sources; on the debate's first
clip it writes that the speaker of "when I was a senator from New York" is a senator. The
contract, for both sizes: every kept fact rests only on episodic memories of its own clip or
earlier ones and names only entities seen by then, every dropped fact is recorded with its
reason, and a rerun has nothing left to do. Both sizes must keep the senator: the reply grammar
offers only a role of her own first-person sentence, so the 0.5B no longer copies its worked
example (docs/benchmarks.md, Consolidation).
Marked ``llm`` and ``slow``; skipped until the model is pulled (``m3agent models pull NAME``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from m3agent.domain import MemoryKind
from m3agent.settings import Settings, load_settings
from m3agent.store import open_store

pytestmark = [pytest.mark.llm, pytest.mark.slow]

VIDEO = "iianet_debate_trump_clinton"
SENSES_OFF = {"shots": False, "text": False, "objects": False, "sounds": False}


def qwen_settings(db: Path, model: str) -> Settings:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    from m3agent.llm import packaged

    if packaged.state(packaged.lookup(model), Settings().resolved_cache_dir()) == "missing":
        pytest.skip(f"{model} is not pulled (m3agent models pull {model})")
    return load_settings(memory=str(db), llm=f"llamacpp:{model}", media={"clip_seconds": 7.0},
                         perception={"asr_model": "tiny.en"}, senses=SENSES_OFF)


@pytest.mark.parametrize(("model", "must_keep_a_fact"), [("qwen-1.5b", True), ("qwen-0.5b", True)])
def test_ingest_consolidates_the_debate_into_facts_with_sources(media_dir: Path, tmp_path: Path, model: str,
                                                               must_keep_a_fact: bool) -> None:
    from m3agent.embed import create_embedder
    from m3agent.llm import chat_model_from_settings
    from m3agent.memorize.consolidation.run import consolidate_store
    from m3agent.pipeline import ingest_source

    settings = qwen_settings(tmp_path / "debate.db", model)
    report = ingest_source(settings, str(media_dir / "video" / f"{VIDEO}.mp4"), show_progress=False, max_clips=1)
    assert report.clips_done == 1 and not report.clips_failed
    outcome = report.consolidation
    assert outcome["clips_consolidated"] == 1 and outcome["calls"] == 1, outcome
    assert outcome["model"].startswith(model) and outcome["rtf"] > 0
    with open_store(str(tmp_path / "debate.db")) as store:
        memories = {m.id: m for m in store.memories(VIDEO)}
        facts = [m for m in memories.values() if m.provenance.startswith(f"consolidate/1:{model}")]
        assert facts or not must_keep_a_fact, f"no fact kept; dropped: {outcome['dropped']}"
        assert all(": " in note for note in outcome["dropped"]), "a dropped fact says why"
        sources = store.memory_sources([f.id for f in facts])
        for fact in facts:
            assert fact.kind == MemoryKind.SEMANTIC and 0 < fact.confidence <= 1
            cited = [memories[s] for s in sources[fact.id]]
            assert cited and all(m.kind == MemoryKind.EPISODIC and m.clip_index <= fact.clip_index for m in cited)
            seen = {e for m in memories.values() if m.clip_index <= fact.clip_index for e in m.entity_ids}
            assert set(fact.entity_ids) <= seen, fact.text
            assert fact.start_s == min(m.start_s for m in cited) and fact.end_s == max(m.end_s for m in cited)
        chat = chat_model_from_settings(settings)
        (again,) = consolidate_store(store, settings, chat, create_embedder("minilm"), [VIDEO], show_progress=False)
    assert again.clips_already == 1 and again.clips_consolidated == 0 and again.calls == 0
    if must_keep_a_fact:
        assert any("senator" in f.text.lower() for f in facts), [f.text for f in facts]
