"""Local runtimes side by side: llama.cpp (llama-cpp-python, today's) against OpenVINO GenAI, on the same GGUF.

Each model spec (``llamacpp:qwen-1.5b``, ``openvino:qwen-1.5b``, ...) is opened through m3agent's own backend (the
model in a process of its own) and answers grounded questions under the grounded reply schema
(``prompts/control_grounded``): memories made from the 24 notes of ``prompts/runtime_check.txt``, rotated per
question, about 500-540 prompt tokens. Two scenarios:

- ``distinct``: a unique first line in every system prompt, so no prompt shares a prefix with an earlier one
  (prompt evaluation speed from scratch);
- ``shared``: the grounded system prompt as the project sends it, the same on every call (what a runtime's
  prefix reuse saves).

Rounds: every spec is opened fresh in each round (load measured each time) and the specs take turns, so each
meets the same load; the table gives medians over rounds. Beside every call the 1-minute load average is
recorded (the CPU is shared), and per round the worker's CPU seconds and peak RSS. Rows are appended to
``bench/runtime_compare_results.jsonl``; the section "Local runtimes: llama.cpp against OpenVINO GenAI" of
docs/benchmarks.md is rewritten from all rows.

    .venv/bin/python bench/runtime_compare.py measure llamacpp:qwen-1.5b openvino:qwen-1.5b [--rounds 3]
        [--questions 3]
    .venv/bin/python bench/runtime_compare.py write
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "runtime_compare_results.jsonl"
SECTION = "Local runtimes: llama.cpp against OpenVINO GenAI"
NOTE = re.compile(r"^\d+\. The (.+?) (?:is|are) stored in room (\d+), (.+)\.$")
MEMORIES = 6
"""Memories per prompt: with the grounded instructions, about 530 prompt tokens (Qwen2.5's tokenizer)."""


def grounded_questions(count: int, *, distinct: bool, salt: str) -> list[tuple[list[dict[str, str]], dict[str, Any],
                                                                              str]]:
    """``count`` grounded prompts, their reply schema and the expected room. ``distinct`` puts a unique line first
    in each system prompt (``salt`` keeps rounds apart too)."""
    from m3agent import tags
    from m3agent.llm.prompts import load_prompt_set
    from m3agent.text import clock

    grounded = load_prompt_set("control_grounded")
    notes = [m for line in load_prompt_set("runtime_check").sections["user"].splitlines()
             if (m := NOTE.match(line.strip()))]
    out = []
    for i in range(count):
        k = (i * 5) % len(notes)
        chosen = [notes[(k + j) % len(notes)] for j in range(MEMORIES)]
        chosen = chosen[1:] + chosen[:1]  # the asked note last, not first
        lines = [f"[m{j + 1}] CLIP_{j + 1} [{clock(j)}-{clock(j + 1)}]: {tags.character(j % 4 + 1)} says: "
                 f"\"The {m.group(1)} is stored in room {m.group(2)}, {m.group(3)}.\"" for j, m in enumerate(chosen)]
        system = grounded.render("system")
        if distinct:
            system = f"Request {salt}-{i}: answer it alone.\n{system}"
        user = grounded.render("user", memories="\n".join(lines), time_context="",
                               question=f"In which room is the {notes[k].group(1)} stored?")
        schema = json.loads(json.dumps(grounded.schema))
        schema["properties"]["used"]["items"]["enum"] = [f"m{j + 1}" for j in range(MEMORIES)]
        out.append(([{"role": "system", "content": system}, {"role": "user", "content": user}], schema,
                    notes[k].group(2)))
    return out


def _proc(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS MiB of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = next((int(line.split()[1]) / 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:")), 0.0)
    return cpu, rss


def one_round(spec: str, questions: int, salt: str) -> dict[str, Any]:
    """Open ``spec`` fresh, answer both scenarios; the round's measurements."""
    from m3agent.llm import create_chat_model
    from m3agent.settings import Settings

    load_avg = os.getloadavg()[0]
    started = time.perf_counter()
    chat: Any = create_chat_model(spec, cache_dir=Settings().resolved_cache_dir())
    warm_up, schema, _ = grounded_questions(1, distinct=True, salt=f"warm-up-{salt}")[0]
    chat.chat([*warm_up[:1], {"role": "user", "content": "Question: who is here?"}], schema=schema, max_tokens=8)
    load_s = time.perf_counter() - started  # a schema'd first call: each runtime's grammar set-up counts here
    calls = []
    for scenario in ("distinct", "shared"):
        for messages, schema, room in grounded_questions(questions, distinct=scenario == "distinct", salt=salt):
            before = os.getloadavg()[0]
            reply = chat.chat(messages, schema=schema, max_tokens=40)
            t = dict(chat.timings)
            calls.append({
                "scenario": scenario, "wall_s": round(reply.latency_s, 2), "load_avg": round(before, 2),
                "prompt_tokens": reply.usage.prompt_tokens, "cached_tokens": reply.usage.cached_tokens,
                "prompt_evaluated": t.get("prompt_evaluated"), "prompt_ms": t.get("prompt_ms"),
                "generated": t.get("generated"), "generate_ms": t.get("generate_ms"),
                "valid": reply.parsed is not None, "correct": room in str((reply.parsed or {}).get("answer", "")),
                "text": reply.text[:120]})
            print(json.dumps({"spec": spec, **calls[-1]}), flush=True)
    cpu_s, rss = _proc(chat.process.pid)
    ready = dict(chat.process.ready)
    chat.close()
    return {"spec": spec, "load_s": round(load_s, 2), "load_avg_at_load": round(load_avg, 2),
            "worker_cpu_s": round(cpu_s, 1), "peak_rss_mib": round(rss), "ready": ready, "calls": calls}


def measure(args: argparse.Namespace) -> int:
    """Rounds of every spec in turn; one row per spec and round appended to the results."""
    from m3agent.bench.environment import environment

    env = environment()
    command = "python bench/runtime_compare.py " + " ".join(sys.argv[1:])
    for r in range(args.rounds):
        for spec in args.specs:
            row = one_round(spec, args.questions, salt=f"{int(time.time())}-{r}")
            row |= {"round": r, "command": command, "env": env, "cpu_isa": cpu_isa()}
            with RESULTS.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    return write(args)


def cpu_isa() -> str:
    """The widest vector instructions of this CPU that change a runtime's kernels: "AVX-512 VNNI", "AVX-512",
    "AVX2" or "other" (rows written before it was recorded were measured on AVX2 hosts)."""
    from m3agent.llm.local import cpu_flags

    flags = cpu_flags()
    if "avx512f" in flags:
        return "AVX-512 VNNI" if "avx512_vnni" in flags else "AVX-512"
    return "AVX2" if "avx2" in flags else "other"


def summarize(rows: list[dict[str, Any]], scenario: str) -> dict[str, Any]:
    """Medians over rounds of one spec: per round, the totals of the scenario's calls (tokens / seconds)."""
    def per_round(row: dict[str, Any]) -> dict[str, float]:
        calls = [c for c in row["calls"] if c["scenario"] == scenario]
        prompt_ms = sum(float(c["prompt_ms"] or 0) for c in calls)
        gen_ms = sum(float(c["generate_ms"] or 0) for c in calls)
        return {
            "prompt_tokens": statistics.mean(c["prompt_tokens"] for c in calls),
            "evaluated": statistics.mean(float(c["prompt_evaluated"] or 0) for c in calls),
            "prompt_tps": sum(c["prompt_tokens"] for c in calls) / prompt_ms * 1000 if prompt_ms else 0.0,
            "eval_tps": sum(float(c["prompt_evaluated"] or 0) for c in calls) / prompt_ms * 1000 if prompt_ms else 0,
            "reply_tps": sum(max(0, int(c["generated"] or 0) - 1) for c in calls) / gen_ms * 1000 if gen_ms else 0.0,
            "wall_s": statistics.mean(c["wall_s"] for c in calls),
            "valid": sum(c["valid"] for c in calls), "correct": sum(c["correct"] for c in calls), "n": len(calls),
            "load_avg": statistics.mean(c["load_avg"] for c in calls)}

    rounds = [per_round(r) for r in rows]
    med: dict[str, Any] = {k: statistics.median(x[k] for x in rounds) for k in rounds[0]}
    med |= {"valid": sum(x["valid"] for x in rounds), "correct": sum(x["correct"] for x in rounds),
            "n": sum(x["n"] for x in rounds), "load_avgs": [round(x["load_avg"], 1) for x in rounds]}
    return med


def write(_: argparse.Namespace | None = None) -> int:
    """Rewrite the docs/benchmarks.md section from every row of the results file."""
    from m3agent.bench.results_io import replace_section

    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()] if RESULTS.exists() else []
    if not rows:
        print(f"no rows in {RESULTS}: run `measure` first", file=sys.stderr)
        return 2
    machine = rows[-1]["env"]["machine"]
    by_run: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault((row["env"]["date"][:10], row.get("cpu_isa", "AVX2"), row["spec"]), []).append(row)
    lines = [
        f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, {machine.get('ram_gib', '?')} GiB, "
        "shared with other work (the load average is beside every figure). Each spec is opened through m3agent's "
        "backend (model in its own process, 2 threads), answers grounded questions under the grounded reply "
        "schema (6 memories, about 530 prompt tokens, at most 40 reply tokens), and is reopened in every round; "
        "values are medians over rounds. *distinct*: a unique first line in each prompt (no prefix reuse); "
        "*shared*: the grounded system prompt as the project sends it. prompt tok/s = all prompt tokens / time "
        "to the first reply token (the effective rate, prefix reuse included); evaluated tok/s = tokens the "
        "runtime evaluated / the same time (llama.cpp reports them; OpenVINO does not, so its row repeats the "
        "effective rate, although its pipeline reuses the prefix a prompt shares with the previous one). "
        "reply tok/s = reply tokens after the first / their time. valid = replies parsing "
        "under the schema; correct = the expected room in the answer. Load = first call of a fresh process "
        "with a short schema'd question (process start, model load, grammar set-up; OpenVINO's first use of a model "
        "also converts it: in brackets). CPU s = "
        "the worker's user + system seconds over the round; peak RSS: the worker's, median over rounds (the "
        "round that converted the model in brackets when higher).", "",
        "| spec | scenario | rounds | prompt tokens | prompt tok/s | evaluated tok/s | reply tok/s | s/answer "
        "| valid | correct | load s (first) | CPU s | peak RSS MiB | load avg per round | date | CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (date, isa, spec), group in by_run.items():
        prepared = [r for r in group if r["ready"].get("prepared", True)]
        first = [r for r in group if not r["ready"].get("prepared", True)]
        loads = [r["load_s"] for r in prepared] or [r["load_s"] for r in group]
        load_words = f"{statistics.median(loads):.1f}" + (f" ({first[0]['load_s']:.1f})" if first else "")
        rss = statistics.median(r["peak_rss_mib"] for r in prepared or group)
        converting = first[0]["peak_rss_mib"] if first else 0
        rss_words = f"{rss:.0f}" + (f" ({converting})" if converting > rss else "")
        for scenario in ("distinct", "shared"):
            s = summarize(group, scenario)
            lines.append(
                f"| {spec} | {scenario} | {len(group)} | {s['prompt_tokens']:.0f} | {s['prompt_tps']:.1f} "
                f"| {s['eval_tps']:.1f} | {s['reply_tps']:.1f} | {s['wall_s']:.2f} | {s['valid']}/{s['n']} "
                f"| {s['correct']}/{s['n']} | {load_words} | {statistics.median(r['worker_cpu_s'] for r in group):.0f} "
                f"| {rss_words} | {', '.join(map(str, s['load_avgs']))} | {date} | {isa} |")
    lines += ["", "Commands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows})) + ". Commit: "
              + ", ".join(sorted({_commit(r["env"]["git_commit"]) for r in rows})) + "."]
    replace_section(REPO / "docs" / "benchmarks.md", SECTION, "\n".join(lines))
    return 0


def _commit(commit: str) -> str:
    """A hash shortened to 7 characters; words (``uncommitted``) as they are."""
    return commit[:7] if re.fullmatch(r"[0-9a-f]{40}", commit) else commit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="measure the specs in rounds; appends rows and rewrites the doc section")
    m.add_argument("specs", nargs="+", help="chat model specs, e.g. llamacpp:qwen-1.5b openvino:qwen-1.5b")
    m.add_argument("--rounds", type=int, default=3)
    m.add_argument("--questions", type=int, default=3, help="questions per scenario and round")
    m.set_defaults(run=measure)
    w = sub.add_parser("write", help="rewrite the docs/benchmarks.md section from the results")
    w.set_defaults(run=write)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
