"""Semantic consolidation: cost (RTF) and yield per clip, per batch of clips, and per whole video.

Ingests a real recording once (perception writer; cached under the m3agent cache), then
consolidates a fresh copy of that memory for each ``--clips-per-call`` value with the
packaged model, and reports wall seconds, RTF (consolidation seconds / media seconds),
model calls and tokens, facts written / reinforced / dropped, and the facts themselves.
The model is loaded before timing. Writes the "Consolidation" section of docs/benchmarks.md.

    .venv/bin/python bench/consolidate.py [--source FILE] [--clip-seconds 20] [--llm llamacpp:qwen-0.5b]
        [--max-clips N] [--clips-per-call 1 --clips-per-call 3 --clips-per-call 0] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DEFAULT_SOURCE = SHARED / "media" / "audio" / "diarization" / "resemblyzer_interview" / "X2zqiX6yL3I.mp3"


def base_memory(source: Path, clip_seconds: float, max_clips: int | None, settings: Any) -> Path:
    """The ingested memory of ``source`` (its first ``max_clips`` clips; made once, then reused)."""
    from m3agent.pipeline import ingest_source
    from m3agent.settings import load_settings

    db = settings.resolved_cache_dir() / "bench" / f"consolidate-{source.stem}-{clip_seconds:g}s-{max_clips}.db"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        ingest = load_settings(memory=str(db), llm="none", media={"clip_seconds": clip_seconds})
        report = ingest_source(ingest, str(source), show_progress=False, max_clips=max_clips)
        if report.clips_failed:
            raise SystemExit(f"ingest of {source} failed: {report.clips_failed}")
    return db


def copy_memory(db: Path, out: Path) -> Path:
    """A consistent copy of the SQLite memory (the backup API takes the write-ahead log along)."""
    out.unlink(missing_ok=True)
    with sqlite3.connect(db) as src, sqlite3.connect(out) as dst:
        src.backup(dst)
    return out


def run_variant(db: Path, chat: Any, embedder: Any, clips_per_call: int, settings: Any) -> dict[str, Any]:
    from m3agent.memorize.consolidate import ConsolidationOptions, consolidate_video
    from m3agent.memorize.rules import WriteRules
    from m3agent.store import open_store

    with open_store(str(db)) as store:
        video = store.videos()[0].video_id
        started = time.perf_counter()
        report = consolidate_video(store, chat, embedder, video, ConsolidationOptions(clips_per_call=clips_per_call),
                                   WriteRules.from_settings(settings))
        wall = time.perf_counter() - started
        facts = [m for m in store.memories(video) if m.provenance.startswith("consolidate/")]
        sources = store.memory_sources([m.id for m in facts])
    return {"clips_per_call": clips_per_call, "clips": report.clips_consolidated,
            "media_s": round(report.media_seconds, 1),
            "wall_s": round(wall, 1), "rtf": round(wall / report.media_seconds, 3) if report.media_seconds else 0.0,
            "calls": report.calls, "prompt_tokens": report.prompt_tokens, "completion_tokens": report.completion_tokens,
            "written": report.facts_written, "reinforced": report.reinforced, "contradicted": report.contradicted,
            "dropped": len(report.dropped), "drop_notes": report.dropped,
            "facts": [{"text": m.text, "clip": m.clip_index, "weight": m.weight, "sources": list(sources.get(m.id, ()))}
                      for m in facts]}


def write_section(results: list[dict[str, Any]], env: dict[str, Any], command: str, load: float,
                  source: Path, model: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [run_line(env, command, load), "",
             f"Video: `{source.name}` (real recording, ingested with the perception writer). Model: {model}. "
             "RTF = consolidation wall seconds / media seconds (model loaded before timing; timings under load "
             "are upper bounds).", "",
             "| clips per call | clips | media s | wall s | RTF | calls | prompt / completion tokens | facts written "
             "| reinforced | contradicted | dropped |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        per = "whole video" if r["clips_per_call"] == 0 else str(r["clips_per_call"])
        lines.append(f"| {per} | {r['clips']} | {r['media_s']} | {r['wall_s']} | {r['rtf']} | {r['calls']} "
                     f"| {r['prompt_tokens']} / {r['completion_tokens']} | {r['written']} | {r['reinforced']} "
                     f"| {r['contradicted']} | {r['dropped']} |")
    for r in results:
        per = "whole video" if r["clips_per_call"] == 0 else f"{r['clips_per_call']} clip(s) per call"
        facts = "; ".join(f"{f['text']} (clip {f['clip']}, sources {f['sources']})" for f in r["facts"]) or "none"
        lines += ["", f"Facts written, {per}: {facts}"]
    replace_section(REPO / "docs" / "benchmarks.md", "Consolidation", "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.embed import create_embedder
    from m3agent.llm import chat_model_from_settings
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--clip-seconds", type=float, default=20.0)
    parser.add_argument("--max-clips", type=int, default=None, help="only the first clips of the source")
    parser.add_argument("--llm", default="llamacpp:qwen-1.5b", help="the consolidation model")
    parser.add_argument("--clips-per-call", type=int, action="append", default=None)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if not args.source.is_file():
        print(f"source not found: {args.source} (put the shared media beside the repo)", file=sys.stderr)
        return 2
    settings = load_settings(shared_dir=SHARED)
    load = round(os.getloadavg()[0], 2)
    base = base_memory(args.source, args.clip_seconds, args.max_clips, settings)
    chat = chat_model_from_settings(settings, args.llm)
    chat.chat([{"role": "user", "content": "Hi"}], max_tokens=1)  # load the model before timing
    embedder = create_embedder(settings.embedder)
    results = []
    for per in args.clips_per_call or [1, 3, 0]:
        copy = copy_memory(base, base.with_name(f"{base.stem}-per{per}.db"))
        results.append(run_variant(copy, chat, embedder, per, settings))
        print(json.dumps(results[-1]), flush=True)
    env = environment(embedder=settings.embedder, llm=args.llm)
    if not args.no_write:
        command = "python bench/consolidate.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(results, env, command, load, args.source, chat.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
