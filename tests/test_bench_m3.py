"""M3-Bench runner on memories built by the reference-graph importer.

The first tests drive the real control agent and judge with scripted chat
models (deterministic); the ``llm`` test runs against a real local
OpenAI-compatible server (llama-cpp-python + the packaged SmolLM2) used as
both agent and judge.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from m3_graph_builder import build_sample_graph, reference_module
from m3agent.bench.judge import Judge
from m3agent.bench.m3.run import run_m3
from m3agent.embed.hashing import HashingEmbedder
from m3agent.importers.m3graph import import_m3_graph
from m3agent.llm import Message
from m3agent.llm.scripted import ScriptedChat
from m3agent.settings import Settings
from m3agent.store import open_store

VIDEO = "living_room_01"


def _questions() -> list[dict[str, Any]]:
    return [
        {
            "question": "What does Lily like to drink in the morning?",
            "answer": "Coffee.",
            "question_id": f"{VIDEO}_Q01",
            "reasoning": "",
            "timestamp": "01:05",
            "type": ["Person Understanding"],
            "before_clip": 1,
        },
        {
            "question": "Who waves from the doorway?",
            "answer": "The third person.",
            "question_id": f"{VIDEO}_Q02",
            "reasoning": "",
            "timestamp": "02:40",
            "type": ["Multi-Detail Reasoning", "Cross-Modal Reasoning"],
            "before_clip": 4,
        },
    ]


def _bench_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A memory folder holding the imported sample graph, and an annotation file (one video lacks memory)."""
    with reference_module() as module:
        graph = module.VideoGraph()
        build_sample_graph(graph)
        pkl = tmp_path / f"{VIDEO}.pkl"
        pkl.write_bytes(pickle.dumps(graph, protocol=4))
    memories = tmp_path / "memories"
    memories.mkdir()
    with open_store(str(memories / f"{VIDEO}.db")) as store:
        import_m3_graph(pkl, store, embedder=HashingEmbedder(256))
    lost = {
        "question": "Where?",
        "answer": "Here.",
        "question_id": "kitchen_99_Q01",
        "type": ["Multi-Hop Reasoning"],
    }
    annotations = {
        VIDEO: {"video_path": "x.mp4", "mem_path": "x.pkl", "qa_list": _questions()},
        "kitchen_99": {"video_path": "y.mp4", "mem_path": "y.pkl", "qa_list": [lost]},
    }
    path = tmp_path / "robot_mini.json"
    path.write_text(json.dumps(annotations))
    return memories, path


def _agent(messages: Sequence[Message]) -> str:
    seen = any('"likes coffee morning"' in m["content"] for m in messages if m["role"] == "user")
    if not seen:
        return json.dumps({"thought": "look it up", "action": "search_memory", "content": "likes coffee morning"})
    return json.dumps({"thought": "found it", "action": "answer", "content": "Lily likes coffee in the morning."})


def _judge(messages: Sequence[Message]) -> str:
    prompt = messages[-1]["content"]
    if "Ground-truth answer: Coffee." in prompt:
        return json.dumps({"verdict": "yes"})
    return "I think so"  # not the verdict format: a judge failure


def test_run_m3_records_answers_verdicts_and_resumes(tmp_path: Path) -> None:
    memories, annotations = _bench_inputs(tmp_path)
    settings = Settings(embedder="hash:256", shared_dir=tmp_path)
    agent, judge_model = ScriptedChat([_agent] * 20, name="agent"), ScriptedChat([_judge] * 20, name="judge")
    out = tmp_path / "out"
    summary = run_m3(
        settings,
        str(annotations),
        memories,
        agent,
        Judge(judge_model, retries=1),
        out_dir=out,
        show_progress=False,
    )
    assert summary["skipped_no_memory"] == ["kitchen_99_Q01"]
    assert (summary["questions"], summary["judged"], summary["judge_failures"]) == (2, 1, 1)
    assert summary["accuracy"]["accuracy"] == 1.0
    assert summary["by_type"]["Person Understanding"]["n"] == 1
    records = {r["question_id"]: r for r in map(json.loads, (out / "robot_mini.jsonl").read_text().splitlines())}
    first = records[f"{VIDEO}_Q01"]
    assert first["response"] == "Lily likes coffee in the morning." and first["correct"] is True
    assert first["rounds"] == 2  # the agent's own first search, then one search of the model
    assert first["searches"] == [first["question"], "likes coffee morning"]
    assert first["usage"]["total_tokens"] > 0 and first["judge_usage"]["total_tokens"] > 0
    assert all(c <= 1 for c in first["clips"])  # nothing after before_clip
    second = records[f"{VIDEO}_Q02"]
    assert (
        second["correct"] is None
        and second["judge_error"]
        and second["types"]
        == [
            "Multi-Evidence Reasoning",
            "Cross-Modal Reasoning",
        ]
    )
    assert (out / "report.md").exists() and (out / "accuracy_by_type.png").exists()
    assert summary["environment"]["judge"]["model"] == "judge"
    calls = len(agent.calls)
    again = run_m3(settings, str(annotations), memories, agent, Judge(judge_model), out_dir=out, show_progress=False)
    assert (again["questions_run_now"], again["questions_resumed"]) == (0, 2)
    assert len(agent.calls) == calls
    assert len((out / "robot_mini.jsonl").read_text().splitlines()) == 2


def test_agent_failures_count_as_wrong(tmp_path: Path) -> None:
    memories, annotations = _bench_inputs(tmp_path)
    settings = Settings(embedder="hash:256", shared_dir=tmp_path)
    silent = ScriptedChat(["not json"] * 40, name="silent")
    judge = Judge(ScriptedChat([{"verdict": "yes"}] * 10, name="judge"))
    summary = run_m3(settings, str(annotations), memories, silent, judge, out_dir=tmp_path / "o", show_progress=False)
    assert summary["agent_failures"] == 2
    assert summary["accuracy"]["correct"] == 0 and summary["judged"] == 2


@pytest.mark.llm
@pytest.mark.slow
def test_bench_m3_end_to_end_with_a_local_server(tmp_path: Path) -> None:
    from llm_server import llama_server
    from m3agent.llm import create_chat_model

    memories, annotations = _bench_inputs(tmp_path)
    with llama_server() as base:
        spec = f"openai://{base.removeprefix('http://')}?model=smollm2"
        settings = Settings(embedder="hash:256", shared_dir=tmp_path, llm=spec, judge=spec, control={"rounds": 2})
        chat = create_chat_model(spec, timeout_s=300.0)
        # one question (the one whose type has an alias): the contract (tokens counted, judged, report and plot
        # written) is per question, and each one costs a minute or more of a 2-core CI machine
        summary = run_m3(settings, str(annotations), memories, chat, Judge(chat), out_dir=tmp_path / "out",
                         concurrency=1, question_ids=[f"{VIDEO}_Q02"])
    lines = (tmp_path / "out" / "robot_mini.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 1
    for record in records:
        assert record["usage"]["total_tokens"] > 0
        assert record["correct"] is not None or record["judge_error"]
    assert summary["questions"] == 1
    assert summary["environment"]["judge"]["model"].startswith("smollm2")
    assert (tmp_path / "out" / "report.md").read_text().count("| Multi-Evidence Reasoning |") == 1
    assert (tmp_path / "out" / "accuracy_by_type.png").stat().st_size > 1000
