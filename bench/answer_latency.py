"""Grounded answer latency on a real memory, variants side by side: wall seconds, llama.cpp's prompt and generation
counters, and the F1 of the answers.

The questions are the first ``--questions`` of the seeded LoCoMo sample of ``bench/locomo_answer_modes.py``
(seed 9, adversarial ones spread among the others), answered in grounded mode on the LoCoMo memory it builds.
Each ``--variant LABEL SRC LLM`` runs in a process of its own with ``SRC`` first on ``PYTHONPATH`` (today's code
from another checkout, or this one's ``src``) and ``LLM`` as its model (``llamacpp:qwen-1.5b``, with
``?n_threads=...`` or a GGUF path). The variants answer question by question in turn (ABBA order), so that every
variant meets the same load on a shared machine. Each variant first answers one question outside the sample
(model load, the fixed system prompt), which is not counted. Rows go to the "Answer latency" section of
docs/benchmarks.md; per-answer records (with LoCoMo's text) stay in the cache.

    .venv/bin/python bench/answer_latency.py --questions 20 \\
        --variant today ../main/src llamacpp:qwen-1.5b --variant tuned src llamacpp:qwen-1.5b
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SECTION = "Answer latency"
RESULT = "RESULT "
"""How a child's protocol line starts (anything else a library prints on stdout is skipped)."""


def sample(count: int) -> list[tuple[Any, int, Any]]:
    """The first ``count`` questions of the seeded LoCoMo sample, in answering order, and one more to warm up."""
    sys.path.insert(0, str(REPO / "bench"))
    from locomo_answer_modes import draw, interleaved
    from m3agent.bench.locomo.data import default_locomo_path, load_locomo
    from m3agent.settings import load_settings

    settings = load_settings(shared_dir=SHARED)
    items = interleaved(draw(list(load_locomo(default_locomo_path(settings.shared_dir))), 200, 50, 9))
    return items[:count] + items[-1:]


def serve(llm: str, count: int) -> int:
    """The child: answer the sample's question of each index read from stdin, one RESULT line each."""
    from m3agent.bench.locomo.run import ensure_ingested
    from m3agent.bench.qa_metrics import score
    from m3agent.control import AgentConfig, ask
    from m3agent.embed import create_embedder
    from m3agent.llm import chat_model_from_settings
    from m3agent.settings import load_settings
    from m3agent.store import open_store

    items = sample(count)
    settings = load_settings(shared_dir=SHARED)
    embedder = create_embedder(settings.embedder)
    chat: Any = chat_model_from_settings(settings, llm)
    config = AgentConfig.from_settings(settings.control, llm, mode="grounded")
    db = settings.resolved_cache_dir() / "bench" / f"locomo-{embedder.name}.db"
    with open_store(str(db)) as store:
        ensure_ingested(store, embedder, sorted({s for s, _, _ in items}, key=lambda s: s.sample_id), 30.0, False)
        print(RESULT + json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            sample_, index, item = items[int(line)]
            cpu = _worker_cpu(chat)
            started = time.perf_counter()
            answer = ask(store, embedder, chat, item.question, video_id=sample_.sample_id, config=config)
            seconds = time.perf_counter() - started
            text = answer.text if answer.answered else ""
            record = {"qid": f"{sample_.sample_id}#{index}", "category": item.category, "seconds": round(seconds, 2),
                      "worker_cpu_s": round(_worker_cpu(chat) - cpu, 2), "load": os.getloadavg()[0],
                      "prompt_tokens": answer.usage.prompt_tokens, "completion_tokens": answer.usage.completion_tokens,
                      "calls": answer.usage.calls, "timings": dict(getattr(chat, "timings", {}) or {}),
                      "answer": text, **score(item.category, text, item.answer)}  # fmt: skip
            print(RESULT + json.dumps(record), flush=True)
    return 0


def _worker_cpu(chat: Any) -> float:
    """CPU seconds (user + system) of the model's process so far; 0 before it runs."""
    pid = getattr(getattr(chat, "_process", None), "pid", None)
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Variant:
    """A child process answering with one code tree and one model."""

    def __init__(self, label: str, src: str, llm: str, count: int) -> None:
        self.label, self.src, self.llm = label, str(Path(src).resolve()), llm
        env = dict(os.environ, PYTHONPATH=self.src)
        self.proc = subprocess.Popen([sys.executable, __file__, "serve", "--llm", llm, "--questions", str(count)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1)
        self.records: list[dict[str, Any]] = []
        self._read()

    def answer(self, index: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        stream: IO[str] | None = self.proc.stdout
        assert stream is not None
        for line in stream:
            if line.startswith(RESULT):
                value: dict[str, Any] = json.loads(line[len(RESULT):])
                return value
        raise RuntimeError(f"variant {self.label} ended (exit status {self.proc.wait()}); its stderr is above")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def summarise(variant: Variant) -> dict[str, Any]:
    rows = variant.records
    seconds = sorted(r["seconds"] for r in rows)
    answerable = [r for r in rows if r["category"] != 5]

    def mean(key: str, source: list[dict[str, Any]] | None = None) -> float:
        values = [float(r[key]) for r in (rows if source is None else source)]
        return round(statistics.fmean(values), 3) if values else 0.0

    timed = [r["timings"] for r in rows if r["timings"]]
    evaluated = sum(t["prompt_evaluated"] for t in timed)
    generated = sum(t["generated"] for t in timed)
    return {
        "label": variant.label, "llm": variant.llm, "src": variant.src, "questions": len(rows),
        "p50_s": round(statistics.median(seconds), 2), "p95_s": round(seconds[min(len(seconds) - 1,
                                                                                    int(0.95 * len(seconds)))], 2),
        "mean_s": mean("seconds"), "worker_cpu_s": mean("worker_cpu_s"), "prompt_tokens": mean("prompt_tokens"),
        "completion_tokens": mean("completion_tokens"),
        "evaluated": round(evaluated / len(timed), 1) if timed else None,
        "prompt_tok_s": round(evaluated / sum(t["prompt_ms"] for t in timed) * 1000, 1) if evaluated else None,
        "generate_tok_s": round(generated / sum(t["generate_ms"] for t in timed) * 1000, 1) if generated else None,
        "f1": mean("f1", answerable), "answerable": len(answerable),
        "load": f"{min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}",
    }  # fmt: skip


def write_section(rows: list[dict[str, Any]], command: str, load: float) -> None:
    """Add this run's table under the section's existing runs (every run is kept: loads differ)."""
    from m3agent.bench.environment import environment
    from m3agent.bench.results_io import replace_section, run_line

    doc = REPO / "docs" / "benchmarks.md"
    text = doc.read_text(encoding="utf-8")
    start = text.find(f"## {SECTION}\n")
    kept = ""
    if start >= 0:
        body = text[start + len(SECTION) + 4:]
        end = body.find("\n## ")
        kept = (body if end < 0 else body[:end]).strip()
    table = [run_line(environment(), command, load), "",
             "| variant | LLM | questions | p50 s | p95 s | mean s | model CPU s | prompt tokens | evaluated "
             "| prompt tok/s | reply tokens | gen. tok/s | F1 (answerable) | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        table.append(f"| {r['label']} | {r['llm']} | {r['questions']} | {r['p50_s']} | {r['p95_s']} | {r['mean_s']} "
                     f"| {r['worker_cpu_s']} | {r['prompt_tokens']} | {r['evaluated'] or '–'} "
                     f"| {r['prompt_tok_s'] or '–'} | {r['completion_tokens']} | {r['generate_tok_s'] or '–'} "
                     f"| {r['f1']:.3f} ({r['answerable']}) | {r['load']} |")  # fmt: skip
    replace_section(doc, SECTION, "\n".join(([kept, ""] if kept else []) + table))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="measure", choices=("measure", "serve"))
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--variant", nargs=3, action="append", metavar=("LABEL", "SRC", "LLM"), default=[])
    parser.add_argument("--llm", default="llamacpp:qwen-1.5b", help="serve: the model")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if args.mode == "serve":
        return serve(args.llm, args.questions)
    if not args.variant:
        parser.error("give at least one --variant LABEL SRC LLM")
    load = round(os.getloadavg()[0], 2)
    variants = [Variant(label, src, llm, args.questions) for label, src, llm in args.variant]
    for v in variants:  # warm-up: model load and the fixed system prompt, not counted
        v.answer(args.questions)
    for i in range(args.questions):
        for v in variants if i % 2 == 0 else variants[::-1]:
            record = v.answer(i)
            v.records.append(record)
            print(f"[{v.label}] {i + 1}/{args.questions} {record['seconds']}s load {record['load']:.1f} "
                  f"{record['timings']} f1={record['f1']:.2f}", file=sys.stderr, flush=True)
    for v in variants:
        v.close()
    rows = [summarise(v) for v in variants]
    for row in rows:
        print(json.dumps(row), flush=True)
    if not args.no_write:
        command = "python bench/answer_latency.py --questions {} {}".format(
            args.questions, " ".join(f"--variant {a} {b} {c}" for a, b, c in args.variant))
        write_section(rows, command, load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
