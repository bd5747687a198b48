"""The local model runtime: answer latency, load time and memory, in the model's own process or in-process.

``measure`` runs the installed llama-cpp-python on the same questions each time: the 24 notes of
``prompts/runtime_check.txt`` rotated per question (so that every prompt is about 420 uncached
tokens, like a grounded answer's), one question per note, answers under the reply grammar.
``--mode worker`` is m3agent's way (``LlamaCppChat``: the model in a process of its own);
``--mode inprocess`` calls ``llama_cpp.Llama`` directly, as m3agent did before; ``--mode paired``
loads both and alternates them question by question, so that both meet the same load: with
``--worker-build-path`` removed from the worker's ``PYTHONPATH``, the in-process side can run
another build (put first on ``PYTHONPATH``) than the worker. Each run appends rows to
``bench/runtime_results.jsonl``; ``write`` turns the rows into the "Local model runtime" section of
docs/benchmarks.md.

    .venv/bin/python bench/runtime.py measure --label "portable build, worker" [--mode worker]
        [--model qwen-1.5b] [--questions 12]
    PYTHONPATH=/path/to/native-build .venv/bin/python bench/runtime.py measure --mode paired \
        --label "native build" --worker-label "portable build" --worker-build-path /path/to/native-build
    .venv/bin/python bench/runtime.py write
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
RESULTS = REPO / "bench" / "runtime_results.jsonl"
NOTE = re.compile(r"^(\d+)\. The (.+?) (?:is|are) stored in room (\d+), .+$")


def questions(count: int) -> list[tuple[list[dict[str, str]], str]]:
    """``count`` chat prompts and their expected room: the check's notes, rotated so no two share a prefix
    beyond the instructions."""
    from m3agent.llm.prompts import load_prompt_set

    prompts = load_prompt_set("runtime_check")
    template = prompts.sections["user"]
    notes = [line for line in template.splitlines() if NOTE.match(line)]
    out = []
    for i in range(count):
        k = i % len(notes)
        match = NOTE.match(notes[k])
        assert match is not None
        rotated = notes[k + 1:] + notes[:k + 1]
        body = template.replace("\n".join(notes), "\n".join(rotated))
        user = body.replace("$question", f"In which room is the {match.group(2)} stored?").strip()
        out.append(([{"role": "system", "content": prompts.render("system")}, {"role": "user", "content": user}],
                    match.group(3)))
    return out


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


Answer = Any
"""A loaded runtime: ``(messages) -> (prompt tokens, answer text)``."""


def open_worker(model: str, worker_build_path: str | None) -> tuple[Answer, float, Any]:
    """m3agent's backend (the model in its own process): the answer function, load seconds, the chat."""
    from m3agent.llm import create_chat_model
    from m3agent.llm.prompts import load_prompt_set
    from m3agent.settings import Settings

    if worker_build_path:  # the worker inherits the environment: keep the in-process build out of it
        parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in parts if p and p != worker_build_path)
    schema = load_prompt_set("runtime_check").schema
    started = time.perf_counter()
    chat: Any = create_chat_model(f"llamacpp:{model}", cache_dir=Settings().resolved_cache_dir())
    chat.chat([{"role": "user", "content": "Hi"}], max_tokens=1)
    load = time.perf_counter() - started

    def answer(messages: list[dict[str, str]]) -> tuple[int, str]:
        reply = chat.chat(messages, schema=schema, max_tokens=24)
        return reply.usage.prompt_tokens, str((reply.parsed or {}).get("answer", reply.text))

    return answer, load, chat


def open_inprocess(model: str) -> tuple[Answer, float, Any]:
    """llama-cpp-python called directly, as m3agent did before: the answer function, load seconds."""
    import llama_cpp

    from m3agent.llm import packaged
    from m3agent.llm.prompts import load_prompt_set
    from m3agent.llm.schema import cap_strings
    from m3agent.settings import Settings

    path = packaged.verified_path(packaged.lookup(model), Settings().resolved_cache_dir())
    schema = json.dumps(cap_strings(load_prompt_set("runtime_check").schema, 240))
    started = time.perf_counter()
    llama = llama_cpp.Llama(model_path=str(path), n_ctx=4096, n_threads=2, seed=0, verbose=False)
    grammar = llama_cpp.LlamaGrammar.from_json_schema(schema, verbose=False)
    llama.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], max_tokens=1)
    load = time.perf_counter() - started

    def answer(messages: list[dict[str, str]]) -> tuple[int, str]:
        out: Any = llama.create_chat_completion(messages=messages, grammar=grammar, max_tokens=24, temperature=0.0)
        return int(out["usage"]["prompt_tokens"]), out["choices"][0]["message"]["content"] or ""

    return answer, load, llama


def timed(answer: Answer, messages: list[dict[str, str]], room: str) -> tuple[float, int, bool]:
    started = time.perf_counter()
    tokens, text = answer(messages)
    return time.perf_counter() - started, tokens, room in text


def measure(args: argparse.Namespace) -> int:
    """Open the runtime(s) of ``--mode``, answer the questions (alternating when paired), append the rows."""
    from m3agent.llm.runtime_build import inspect_runtime

    asked = questions(args.questions)
    load_avg = round(os.getloadavg()[0], 2)
    sides: list[tuple[str, str, tuple[Answer, float, Any], str]] = []
    if args.mode in ("inprocess", "paired"):
        build = inspect_runtime()  # the build this process imports
        sides.append((args.label, "inprocess", open_inprocess(args.model), _build_words(build)))
    if args.mode in ("worker", "paired"):
        label = args.worker_label if args.mode == "paired" else args.label
        opened = open_worker(args.model, args.worker_build_path)
        library = Path(str(opened[2].process.ready.get("library", ""))) / "lib"  # what the worker itself loaded
        sides.append((label, "worker", opened, _build_words(inspect_runtime(library))))
    rows: list[list[tuple[float, int, bool]]] = [[] for _ in sides]
    for messages, room in asked:
        for i, (_, _, (answer, _, _), _) in enumerate(sides):
            rows[i].append(timed(answer, messages, room))
    for (label, mode, (_, load, handle), build), side_rows in zip(sides, rows, strict=True):
        rss = _peak_rss_mib(handle.process.pid) if mode == "worker" else _peak_rss_mib(os.getpid())
        _record(args, label, mode, load, side_rows, rss, build, load_avg)
        if mode == "worker":
            handle.close()
    return 0


def _build_words(build: Any) -> str:
    if build is None:
        return "?"
    native = next((lib for lib in build.libraries if lib.native), None)
    if native is not None:  # the expanded flag list of a native build is long: its CPU name says it
        return f"native flags ({' '.join(f for f in native.arch if f != '-march=x86-64')})"
    return " ".join(build.instruction_sets()) or "flags not recorded"


def _record(args: argparse.Namespace, label: str, mode: str, load: float, rows: list[tuple[float, int, bool]],
            rss: float, build: str, load_avg: float) -> None:
    from m3agent.bench.environment import environment

    seconds = [r[0] for r in rows]
    record = {
        "label": label, "mode": mode, "model": args.model, "questions": len(seconds), "load_s": round(load, 2),
        "p50_s": round(statistics.median(seconds), 2),
        "p95_s": round(sorted(seconds)[max(0, int(len(seconds) * 0.95) - 1)], 2),
        "mean_s": round(statistics.mean(seconds), 2),
        "mean_prompt_tokens": round(statistics.mean(r[1] for r in rows), 1), "correct": sum(r[2] for r in rows),
        "model_rss_mib": round(rss, 1), "build": build, "load_average": load_avg, "paired": args.mode == "paired",
        "env": environment(), "command": "python bench/runtime.py " + " ".join(sys.argv[1:]),
    }
    with RESULTS.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "env"}, indent=1))


def write(_: argparse.Namespace) -> int:
    from m3agent.bench.results_io import replace_section

    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    if not rows:
        print(f"no rows in {RESULTS}: run `measure` first", file=sys.stderr)
        return 2
    env = rows[-1]["env"]["machine"]
    lines = [f"Machine: {env.get('cpu', '?')}, {env.get('cores', '?')} cores, {env.get('ram_gib', '?')} GiB. "
             "Each row: `python bench/runtime.py measure ...` (its command below), the same questions: the 24 "
             "notes of the runtime check, rotated per question (about 490 uncached prompt tokens each), answers "
             "under the reply grammar. Rows of one paired run alternate question by question, so they met the "
             "same load. Load = first call (model load; process start in worker mode); RSS = the peak resident "
             "memory of the process holding the model.", "",
             "| runtime | mode | paired | model | questions | correct | load s | p50 s | mean s | p95 s "
             "| prompt tokens | RSS MiB | compiled for | load avg | commit (date) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['mode']} | {'yes' if r.get('paired') else 'no'} | {r['model']} "
                     f"| {r['questions']} | {r['correct']} | {r['load_s']} | {r['p50_s']} | {r.get('mean_s', '')} "
                     f"| {r['p95_s']} | {r['mean_prompt_tokens']} | {r['model_rss_mib']} "
                     f"| {r['build'] or 'flags not recorded'} | {r['load_average']} | {r['env']['git_commit'][:7]} "
                     f"({r['env']['date']}) |")
    lines += ["", "Commands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows}))]
    replace_section(REPO / "docs" / "benchmarks.md", "Local model runtime", "\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="measure the installed runtime; appends a row")
    m.add_argument("--label", required=True, help="what is installed, e.g. 'portable build'")
    m.add_argument("--mode", choices=["worker", "inprocess", "paired"], default="worker")
    m.add_argument("--worker-label", default="", help="paired: the worker's label")
    m.add_argument("--worker-build-path", default=None,
                   help="paired: a PYTHONPATH entry (another build) kept out of the worker's environment")
    m.add_argument("--model", default="qwen-1.5b")
    m.add_argument("--questions", type=int, default=12)
    m.set_defaults(run=measure)
    w = sub.add_parser("write", help="write the rows into docs/benchmarks.md")
    w.set_defaults(run=write)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
