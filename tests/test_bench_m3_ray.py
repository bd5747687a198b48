"""``bench m3 --executor ray``: questions as Ray tasks on a local cluster give the local executor's records.

The agent and the judge are scripted chat models named by spec (``scripted:/file.json``), as a
cluster's workers would name vLLM endpoints; the memory is the imported sample graph, read from a
folder of SQLite files and from PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m3agent.bench.judge import Judge
from m3agent.bench.m3.run import run_m3
from m3agent.llm import create_chat_model
from m3agent.settings import Settings
from m3agent.store import open_store
from m3agent.store.transfer import copy_memory
from test_bench_m3 import VIDEO, _bench_inputs

pytestmark = [pytest.mark.slow, pytest.mark.ray]
ANSWER = {"thought": "it is in the memory", "action": "answer", "content": "Lily likes coffee in the morning."}
COMPARED = ("question_id", "response", "answered", "correct", "verdict", "rounds", "searches", "clips", "types")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray = pytest.importorskip("ray", reason="the Ray tests need ray: pip install 'm3agent[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 1024 * 1024)
    yield
    ray.shutdown()


def specs(tmp_path: Path) -> tuple[str, str]:
    agent, judge = tmp_path / "agent.json", tmp_path / "judge.json"
    agent.write_text(json.dumps([ANSWER] * 10))
    judge.write_text(json.dumps([{"verdict": "yes"}] * 10))
    return f"scripted:{agent}", f"scripted:{judge}"


def bench(tmp_path: Path, memories: str, annotations: Path, out: Path, llm: str, judge: str,
          kind: str) -> dict[str, Any]:
    settings = Settings(embedder="hash:256", shared_dir=tmp_path, llm=llm, judge=judge,
                        executor={"kind": kind, "retries": 1})
    agent_spec, judge_spec = specs(tmp_path)  # the driver's own models only name the run in the report
    return run_m3(settings, str(annotations), memories, create_chat_model(agent_spec),
                  Judge(create_chat_model(judge_spec)), out_dir=out, show_progress=False)


def records(out: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "robot_mini.jsonl").read_text().splitlines()]
    return sorted(({k: r[k] for k in COMPARED} for r in rows), key=lambda r: r["question_id"])


def test_ray_questions_equal_local_ones_and_failed_tasks_are_retried_later(
    local_ray: None, tmp_path: Path
) -> None:
    memories, annotations = _bench_inputs(tmp_path)
    llm, judge = specs(tmp_path)
    local = bench(tmp_path, str(memories), annotations, tmp_path / "local", llm, judge, "local")
    assert local["accuracy"]["accuracy"] == 1.0 and local["questions"] == 2

    out = tmp_path / "ray"
    broken = bench(tmp_path, str(memories), annotations, out, llm, f"scripted:{tmp_path / 'gone.json'}", "ray")
    assert broken["executor"] == "ray" and broken["questions_run_now"] == 2
    assert sorted(f["question_id"] for f in broken["failed_tasks"]) == [f"{VIDEO}_Q01", f"{VIDEO}_Q02"]
    assert all(f["attempts"] == 2 and "gone.json" in f["error"] for f in broken["failed_tasks"])
    assert not (out / "robot_mini.jsonl").exists() or not (out / "robot_mini.jsonl").read_text().strip()

    again = bench(tmp_path, str(memories), annotations, out, llm, judge, "ray")  # the rerun picks them up
    assert again["questions_run_now"] == 2 and again["failed_tasks"] == []
    assert again["skipped_no_memory"] == local["skipped_no_memory"] == ["kitchen_99_Q01"]
    assert records(out) == records(tmp_path / "local")
    assert [r["response"] for r in records(out)] == [ANSWER["content"]] * 2
    assert again["accuracy"] == local["accuracy"]
    assert bench(tmp_path, str(memories), annotations, out, llm, judge, "ray")["questions_run_now"] == 0


@pytest.mark.postgres
def test_ray_questions_read_a_postgres_memory(local_ray: None, pg_server: Any, tmp_path: Path) -> None:
    memories, annotations = _bench_inputs(tmp_path)
    url = pg_server.database()
    with open_store(str(memories / f"{VIDEO}.db"), readonly=True) as source, open_store(url) as target:
        copy_memory(source, target)
    llm, judge = specs(tmp_path)
    local = bench(tmp_path, str(memories), annotations, tmp_path / "local", llm, judge, "local")
    on_pg = bench(tmp_path, url, annotations, tmp_path / "pg", llm, judge, "ray")
    assert records(tmp_path / "pg") == records(tmp_path / "local")
    assert on_pg["accuracy"] == local["accuracy"] and on_pg["accuracy"]["accuracy"] == 1.0
    assert on_pg["skipped_no_memory"] == ["kitchen_99_Q01"]


def test_the_cli_runs_questions_on_ray(local_ray: None, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from m3agent.cli.main import main

    memories, annotations = _bench_inputs(tmp_path)
    llm, judge = specs(tmp_path)
    env = {"M3AGENT_EMBEDDER": "hash:256", "M3AGENT_SHARED_DIR": str(tmp_path)}
    result = CliRunner(env=env).invoke(main, [
        "bench", "m3", "--split", str(annotations), "--memories", str(memories), "--llm", llm, "--judge", judge,
        "--out", str(tmp_path / "cli"), "--executor", "ray", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"):])
    assert summary["executor"] == "ray" and summary["failed_tasks"] == []
    assert summary["accuracy"]["accuracy"] == 1.0 and summary["questions"] == 2
