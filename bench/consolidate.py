"""Semantic consolidation on the shared real media: cost (RTF, calls, tokens) and fact precision / yield.

Each medium is ingested once with the perception writer (cached under the m3agent cache; LoCoMo
conversations are written as memories, one clip per session), then a fresh copy of its memory is
consolidated with the packaged model and the run is appended to ``bench/scores/consolidate.jsonl``
under a ``--variant`` name (the code that ran is whatever ``m3agent`` imports: run the "before"
variant with ``PYTHONPATH=<main checkout>/src``). Each run records wall seconds and RTF (consolidation
seconds / media seconds, model loaded before timing, load average before and after), calls, units the
pre-check skipped, prompt tokens (and those served by the kept prefix), completion tokens, and the
facts with the text of their sources.

Facts are scored against hand labels, ``bench/labels/consolidation_facts.tsv`` (medium, fact text,
right / wrong / unsupported, note), matched on the normalised fact text per medium; a fact with no
label is reported as unlabelled, never counted. Precision = right / labelled; yield = facts (and right
facts) per minute of speech (speech time: the spans of the speech memories; LoCoMo has no time, so its
yield is per 1,000 words). Media marked held out were not read while the pre-check was written.

    .venv/bin/python bench/consolidate.py run --variant after [--media debate --media interview ...]
        [--llm llamacpp:qwen-1.5b] [--clips-per-call 1] [--locomo-sessions 3]
    .venv/bin/python bench/consolidate.py write --variant before --variant after [--findings notes.md]
    .venv/bin/python bench/consolidate.py label       # print the facts of the runs that have no label yet
"""

from __future__ import annotations

import argparse
import csv
import inspect
import json
import os
import re
import sqlite3
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MEDIA_DIR = SHARED / "media"
SCORES = REPO / "bench" / "scores" / "consolidate.jsonl"
LABELS = REPO / "bench" / "labels" / "consolidation_facts.tsv"
LABEL_VALUES = ("right", "wrong", "unsupported")
HISTORY = "### Earlier runs"


@dataclass(frozen=True, slots=True)
class Medium:
    """One labelled source: a media file (``clip_seconds``, first ``max_clips``) or a LoCoMo sample."""

    name: str
    path: str
    clip_seconds: float = 30.0
    max_clips: int | None = None
    held_out: bool = False
    locomo: str = ""  # a LoCoMo sample id: its first sessions are the clips
    episode: bool = False  # the 3-minute benchmark episode of bench/ingest.py (real media, joined)


MEDIA = {m.name: m for m in (
    Medium("debate", "video/iianet_debate_trump_clinton.mp4"),
    Medium("interview", "audio/diarization/resemblyzer_interview/X2zqiX6yL3I.mp3", 20.0, 3),
    Medium("ami", "audio/diarization/ami_mixture_1min/mixture.wav"),
    *(Medium(f"hdtf-{n}", f"video/hdtf_talking_heads/WDA_{n}_000.mp4")
      for n in ("AlexandriaOcasioCortez", "BobMenendez", "EdMarkey0", "KatieHill")),
    *(Medium(f"talking-{n}", f"video/videoagent_talking/segment_{n}.mp4") for n in (9, 10, 11)),
    Medium("episode-3min", "", episode=True),
    Medium("locomo-conv-26", "", held_out=True, locomo="conv-26"),
    Medium("locomo-conv-30", "", held_out=True, locomo="conv-30"),
)}


def base_memory(medium: Medium, settings: Any, locomo_sessions: int) -> Path:
    """The memory of ``medium`` before consolidation (made once, then reused: fact labels key on its tags)."""
    cache = settings.resolved_cache_dir() / "bench"
    if medium.locomo:
        return _locomo_memory(medium, settings, cache / f"consolidate-{medium.locomo}-{locomo_sessions}s.db",
                              locomo_sessions)
    source = _episode(cache) if medium.episode else MEDIA_DIR / medium.path
    db = cache / f"consolidate-{source.stem}-{medium.clip_seconds:g}s-{medium.max_clips}.db"
    if not db.exists():
        from m3agent.pipeline import ingest_source
        from m3agent.settings import load_settings

        db.parent.mkdir(parents=True, exist_ok=True)
        ingest = load_settings(memory=str(db), llm="none", media={"clip_seconds": medium.clip_seconds})
        report = ingest_source(ingest, str(source), show_progress=False, max_clips=medium.max_clips)
        if report.clips_failed:
            raise SystemExit(f"ingest of {source} failed: {report.clips_failed}")
    return db


def _episode(cache: Path) -> Path:
    """The speech-dense 3-minute episode (13 real videos joined; built on first use by bench/ingest.py)."""
    sys.path.insert(0, str(REPO / "bench"))
    from ingest import episode

    return Path(episode(cache)[0])


def _locomo_memory(medium: Medium, settings: Any, db: Path, sessions: int) -> Path:
    if db.exists():
        return db
    import dataclasses

    from m3agent.bench.locomo.data import default_locomo_path, load_locomo
    from m3agent.bench.locomo.ingest import ingest_sample
    from m3agent.embed import create_embedder
    from m3agent.store import open_store

    sample = next(s for s in load_locomo(default_locomo_path(SHARED)) if s.sample_id == medium.locomo)
    sample = dataclasses.replace(sample, sessions=sample.sessions[:sessions])
    db.parent.mkdir(parents=True, exist_ok=True)
    embedder = create_embedder(settings.embedder)
    with open_store(str(db)) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        ingest_sample(store, embedder, sample)
    return db


def copy_memory(db: Path, out: Path) -> Path:
    """A consistent copy of the SQLite memory (the backup API takes the write-ahead log along)."""
    out.unlink(missing_ok=True)
    with sqlite3.connect(db) as src, sqlite3.connect(out) as dst:
        src.backup(dst)
    return out


def speech_of(memories: list[Any]) -> tuple[float, int]:
    """Seconds and words of the speech memories (``<tag> says:`` / LoCoMo's ``said:``)."""
    spoken = [m for m in memories if re.search(r"> (?:says|said): ", m.text)]
    words = sum(len(m.text.split(": ", 1)[-1].split()) for m in spoken)
    return sum(m.end_s - m.start_s for m in spoken), words


class Counted:
    """A chat model whose calls add up llama.cpp's own counters (``timings`` of a local model, per call): where
    a call's time goes, prompt evaluation or generation, whatever the load."""

    def __init__(self, chat: Any) -> None:
        self.inner, self.name = chat, chat.name
        self.totals: dict[str, float] = {}

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        reply = self.inner.chat(messages, **kwargs)
        for key, value in (getattr(self.inner, "timings", None) or {}).items():
            kept = self.totals.get(key, 0)
            self.totals[key] = max(kept, value) if key.startswith("threads") else round(kept + value, 1)
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def run_medium(medium: Medium, base: Path, chat: Any, embedder: Any, args: argparse.Namespace,
               settings: Any) -> dict[str, Any]:
    """Consolidate a fresh copy of ``base``; the record of the run."""
    from m3agent.memorize.consolidation.consolidate import ConsolidationOptions, consolidate_video
    from m3agent.memorize.rules import WriteRules
    from m3agent.store import open_store

    options: dict[str, Any] = {"clips_per_call": args.clips_per_call}
    if "precheck" in inspect.signature(ConsolidationOptions).parameters:  # absent before the pre-check
        options["precheck"] = not args.no_precheck
    db = copy_memory(base, base.with_name(f"{base.stem}-{args.variant}.db"))
    with open_store(str(db)) as store:
        video = store.videos()[0].video_id
        episodic = store.memories(video)
        load = os.getloadavg()[0]
        started, chat = time.perf_counter(), Counted(chat)
        report = consolidate_video(store, chat, embedder, video, ConsolidationOptions(**options),
                                   WriteRules.from_settings(settings))
        wall = time.perf_counter() - started
        facts = [m for m in store.memories(video) if m.provenance.startswith("consolidate/")]
        sources = store.memory_sources([m.id for m in facts])
    texts = {m.id: m.text for m in episodic}
    speech_s, words = speech_of(episodic)
    return {"variant": args.variant, "medium": medium.name, "held_out": medium.held_out, "model": chat.name,
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2), "clips_per_call": args.clips_per_call,
            "clips": report.clips_consolidated, "media_s": round(report.media_seconds, 1),
            "speech_s": round(speech_s, 1), "speech_words": words, "wall_s": round(wall, 2),
            "rtf": round(wall / report.media_seconds, 3) if report.media_seconds else 0.0, "calls": report.calls,
            "skipped": getattr(report, "skipped", 0), "prompt_tokens": report.prompt_tokens,
            "cached_tokens": getattr(report, "cached_tokens", 0), "completion_tokens": report.completion_tokens,
            "timings": chat.totals,
            "written": report.facts_written, "reinforced": report.reinforced, "dropped": report.dropped,
            "facts": [{"text": m.text, "clip": m.clip_index,
                       "sources": [texts.get(s, "") for s in sources.get(m.id, ())]} for m in facts]}


def normal(text: str) -> str:
    """The key a label matches a fact on: lower-case words and tags."""
    return " ".join(re.findall(r"<[a-z]+_\d+>|[a-z0-9']+", text.lower()))


def read_labels(path: Path = LABELS) -> dict[tuple[str, str], str]:
    if not path.exists():
        return {}
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    labels = {}
    for row in rows:
        if row["label"] not in LABEL_VALUES:
            raise SystemExit(f"{path}: label {row['label']!r} of {row['fact']!r} is not one of {LABEL_VALUES}")
        labels[(row["medium"], normal(row["fact"]))] = row["label"]
    return labels


def scored(record: dict[str, Any], labels: dict[tuple[str, str], str]) -> dict[str, Any]:
    """Right / wrong / unsupported / unlabelled counts, precision and yield of one run."""
    counts = dict.fromkeys((*LABEL_VALUES, "unlabelled"), 0)
    for fact in record["facts"]:
        counts[labels.get((record["medium"], normal(fact["text"])), "unlabelled")] += 1
    labelled = sum(counts[v] for v in LABEL_VALUES)
    return {**counts, "labelled": labelled, "facts": len(record["facts"]),
            "precision": counts["right"] / labelled if labelled else None}


def latest(records: list[dict[str, Any]], variants: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """The last run of each (variant, medium)."""
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        if record["variant"] in variants:
            last[(record["variant"], record["medium"])] = record
    return last


def rate(count: float, record: dict[str, Any]) -> str:
    if record["speech_s"] > 0 and not record["medium"].startswith("locomo"):
        return f"{count / (record['speech_s'] / 60):.2f}/min"
    return f"{count / (record['speech_words'] / 1000):.2f}/kw" if record["speech_words"] else "–"


def table(runs: dict[tuple[str, str], dict[str, Any]], labels: dict[tuple[str, str], str],
          variants: list[str]) -> list[str]:
    lines = ["| medium | variant | clips (skipped) | media s | speech s | wall s | RTF | load | calls "
             "| prompt / cached / completion tokens | facts | right / wrong / unsupported / unlabelled "
             "| precision | yield (facts, right) |", "|" + "---|" * 14]
    totals: dict[str, dict[str, float]] = {}
    for (variant, medium), r in sorted(runs.items(), key=lambda kv: (list(MEDIA).index(kv[0][1]),
                                                                      variants.index(kv[0][0]))):
        s = scored(r, labels)
        held = " (held out)" if r.get("held_out") else ""
        precision = f"{s['precision']:.2f}" if s["precision"] is not None else "–"
        lines.append(f"| {medium}{held} | {variant} | {r['clips']} ({r['skipped']}) | {r['media_s']} "
                     f"| {r['speech_s']} | {r['wall_s']} | {r['rtf']} | {r['load_before']}–{r['load_after']} "
                     f"| {r['calls']} | {r['prompt_tokens']} / {r['cached_tokens']} / {r['completion_tokens']} "
                     f"| {s['facts']} | {s['right']} / {s['wrong']} / {s['unsupported']} / {s['unlabelled']} "
                     f"| {precision} | {rate(s['facts'], r)}, {rate(s['right'], r)} |")
        group = "held out" if r.get("held_out") else "developed on"
        total = totals.setdefault(f"{variant}, {group}", dict.fromkeys(
            ("right", "labelled", "facts", "unlabelled", "speech_s", "wall_s", "media_s"), 0.0))
        for key in ("right", "labelled", "facts", "unlabelled"):
            total[key] += s[key]
        if not medium.startswith("locomo"):
            for key in ("speech_s", "wall_s", "media_s"):
                total[key] += r[key]
    lines += ["", "| variant, media | facts | right / labelled (unlabelled) | precision | facts per min of speech "
              "| RTF (media only) |", "|---|---|---|---|---|---|"]
    for name, t in totals.items():
        precision = f"{t['right'] / t['labelled']:.2f}" if t["labelled"] else "–"
        per_min = f"{t['facts'] / (t['speech_s'] / 60):.2f}" if t["speech_s"] else "–"
        rtf = f"{t['wall_s'] / t['media_s']:.3f}" if t["media_s"] else "–"
        lines.append(f"| {name} | {int(t['facts'])} | {int(t['right'])} / {int(t['labelled'])} "
                     f"({int(t['unlabelled'])}) | {precision} | {per_min} | {rtf} |")
    return lines


def write_section(variants: list[str], command: str, findings: Path | None = None) -> None:
    from m3agent.bench.environment import environment
    from m3agent.bench.results_io import JsonlLog, replace_section, run_line

    records = JsonlLog(SCORES).read()
    runs = latest(records, variants)
    if not runs:
        raise SystemExit(f"no runs of {variants} in {SCORES}")
    labels = read_labels()
    loads = [r["load_before"] for r in runs.values()]
    body = [run_line(environment(llm="llamacpp"), command, max(loads)), "",
            f"Runs of {', '.join(variants)} from `{SCORES.relative_to(REPO)}` (dates "
            f"{min(r['date'] for r in runs.values())} to {max(r['date'] for r in runs.values())}); fact labels "
            f"`{LABELS.relative_to(REPO)}` ({len(labels)} hand labels). RTF = consolidation wall s / media s; "
            "load is the 1-minute load average before and after each medium (2 cores: above 2 every timing is "
            "an upper bound). Cached tokens: prompt tokens the model did not evaluate again (kept prefix). "
            "Yield per minute of speech (LoCoMo: per 1,000 words).", "", *table(runs, labels, variants)]
    if findings is not None:
        body += ["", findings.read_text(encoding="utf-8").strip()]
    doc = REPO / "docs" / "benchmarks.md"
    history = _history(doc.read_text(encoding="utf-8"))
    replace_section(doc, "Consolidation", "\n".join(body) + f"\n\n{HISTORY}\n\n" + history)


def _history(text: str) -> str:
    """The earlier text of the section (kept below the new table)."""
    match = re.search(r"^## Consolidation[ \t]*\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    old = match.group(1).strip() if match else ""
    return old.split(HISTORY, 1)[1].strip() if HISTORY in old else old


def print_unlabelled(variants: list[str]) -> None:
    from m3agent.bench.results_io import JsonlLog

    labels = read_labels()
    seen = set()
    for record in JsonlLog(SCORES).read():
        if variants and record["variant"] not in variants:
            continue
        for fact in record["facts"]:
            key = (record["medium"], normal(fact["text"]))
            if key not in labels and key not in seen:
                seen.add(key)
                print(f"{record['medium']}\t{fact['text']}\t?\t" + " | ".join(fact["sources"]))


def run(args: argparse.Namespace) -> int:
    from m3agent.bench.results_io import JsonlLog
    from m3agent.embed import create_embedder
    from m3agent.llm import chat_model_from_settings
    from m3agent.settings import load_settings

    settings = load_settings(shared_dir=SHARED)
    media = [MEDIA[name] for name in args.media or MEDIA]
    bases = {m.name: base_memory(m, settings, args.locomo_sessions) for m in media}
    chat = chat_model_from_settings(settings, args.llm)
    chat.chat([{"role": "user", "content": "Hi"}], max_tokens=1)  # load the model before timing
    embedder = create_embedder(settings.embedder)
    log = JsonlLog(SCORES)
    for medium in media:
        record = run_medium(medium, bases[medium.name], chat, embedder, args, settings)
        log.append(record)
        print(json.dumps({k: v for k, v in record.items() if k not in ("facts", "dropped")}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("action", choices=("run", "write", "label"))
    parser.add_argument("--variant", action="append", default=None, help="run: its name; write: those to show")
    parser.add_argument("--media", action="append", choices=list(MEDIA), default=None)
    parser.add_argument("--llm", default="llamacpp:qwen-1.5b", help="the consolidation model")
    parser.add_argument("--clips-per-call", type=int, default=1)
    parser.add_argument("--no-precheck", action="store_true", help="ask the model about every unit")
    parser.add_argument("--findings", type=Path, default=None, help="write: Markdown placed below the tables")
    parser.add_argument("--locomo-sessions", type=int, default=3, help="first sessions of each LoCoMo sample")
    args = parser.parse_args(argv)
    if not MEDIA_DIR.is_dir():
        print(f"shared media not found: {MEDIA_DIR} (put the shared folder beside the repo)", file=sys.stderr)
        return 2
    if args.action == "write":
        command = "python bench/consolidate.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(args.variant or ["before", "after"], command, args.findings)
        return 0
    if args.action == "label":
        print_unlabelled(args.variant or [])
        return 0
    args.variant = (args.variant or ["after"])[-1]
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
