"""Scaling curves: ingest time, store size, search latency and answer latency against memories and hours of video.

What one machine (2 cores, SQLite) holds before PostgreSQL and Ray are worth it. Per N memories (10^2..10^5 measured
on the realistic stores of ``bench/search_corpus.py``, 10^6 from the "Store" section):

* hours of video N memories stand for, and the hours a 2-core machine takes to ingest them (perception alone,
  and with consolidation): N / (memories per minute) with the memories per minute, and the file's MiB per hour,
  counted in the cached memory of the 3-minute episode (:func:`episode`), times the measured real-time factors
  (:data:`PERCEPTION`: section "Ingest"; consolidation: ``bench/scores/consolidate.jsonl``);
* the store's file: the pristine ``search-N.db`` and its copy with the vector snapshot saved (what a memory
  that has been searched holds); a real ingest's file adds face crops, voice and face embeddings per hour;
* search p50/p95 from ``bench/scores/search_scale.json`` (``--search-label``, default the newest run;
  ``--search-kind``, default ``plain``; the Python API);
* grounded answer p50/p95 (measured here): the same ``--questions`` real questions (LoCoMo, M3-Bench) on each
  store, through ``m3agent.open(path).ask(q)`` with the default model, one model process for every size,
  sizes taken in turn question by question (reversed every other question) so each meets the same load; the
  model's own seconds and llama.cpp's prompt counters beside the wall time. Answers are kept in
  ``bench/scores/scaling.json`` (a rerun measures only what is missing).

``--write`` renders the section "Scaling" of ``docs/benchmarks.md`` and ``docs/scaling.png``.

Usage: ``nice .venv/bin/python bench/scaling.py --sizes 100,1000,10000,100000 --questions 5 --write``
(``--sizes ''`` only renders what is recorded).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_corpus as sc
import search_scale as ss

REPO = Path(__file__).resolve().parents[1]
SCORES = REPO / "bench" / "scores" / "scaling.json"
SEARCH_SCORES = ss.SCORES
CONSOLIDATE_SCORES = REPO / "bench" / "scores" / "consolidate.jsonl"
DOC = REPO / "docs" / "benchmarks.md"
PLOT = REPO / "docs" / "scaling.png"
SECTION = "Scaling"
EPISODE_DB = "consolidate-episode_3min-30s-None-quiet-first-person.db"
"""The 3-minute episode's memory after perception and consolidation (``bench/consolidate.py``'s cache)."""
EPISODE_MEDIUM = "episode-3min"
OTHER_DBS = ("people-and-order-v1-9e7f820f4833.db",)
"""Other real memories whose rates are shown beside the episode's (not used in the conversion)."""
MIB = 2**20

PERCEPTION = {"rtf": 0.644, "cpu_s_per_media_s": 0.966,
              "source": "section \"Ingest\": episode_3min.mp4, every sense on, wall RTF 0.644, CPU s per media s "
                        "0.966 (2026-11-26 14:04 UTC, commit a60e6cc, load 0.42)"}
"""Perception's real-time factor on 2 cores (measured; no score file holds it)."""

MILLION = {"n": 1_000_000, "file_mib": round(3.02 * 1024), "vector_p50_ms": 14.62, "vector_p95_ms": 23.4,
           "keyword_p50_ms": 22.35, "keyword_p95_ms": 38.09,
           "source": "section \"Store\" (bench/store.py, 2026-11-21, load 2.58): another synthetic corpus, vector "
                     "search alone (HNSW, unfiltered) and keyword search alone, not the hybrid search of the rows "
                     "above"}
"""The 10^6 point: the search-N store of 10^6 was never built (more than 2 hours through the clip writer)."""


# the constants ----------------------------------------------------------------------------------------
def rates(db: Path) -> dict[str, Any]:
    """Memories per minute of video and file MiB per hour of video of a real memory (read-only)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        media_s = float(conn.execute("SELECT sum(duration_s) FROM videos").fetchone()[0])
        kinds = dict(conn.execute("SELECT kind, count(*) FROM memories GROUP BY kind").fetchall())
    memories = sum(kinds.values())
    size = db.stat().st_size
    return {"db": db.name, "media_s": round(media_s, 2), "memories": memories, "by_kind": kinds,
            "file_mib": round(size / MIB, 2), "per_minute": round(memories / media_s * 60, 2),
            "mib_per_hour": round(size / MIB / media_s * 3600, 1)}


def consolidation_rtf(path: Path = CONSOLIDATE_SCORES, medium: str = EPISODE_MEDIUM) -> dict[str, Any]:
    """The newest consolidation run of ``medium`` recorded by ``bench/consolidate.py``: RTF, date, load."""
    found = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = [r for r in found if r.get("medium") == medium]
    if not runs:
        raise SystemExit(f"no consolidation run of {medium} in {path}")
    r = max(runs, key=lambda r: r["date"])
    return {"rtf": r["rtf"], "source": f"bench/scores/consolidate.jsonl: {medium}, variant {r['variant']}, "
            f"{r['wall_s']} s for {r['media_s']} s ({r['date']}, load {r['load_before']}-{r['load_after']})"}


def constants() -> dict[str, Any]:
    cache = sc.cache_dir()
    episode = cache / EPISODE_DB
    if not episode.exists():
        raise SystemExit(f"{episode} is missing: run bench/consolidate.py on the episode first")
    return {"episode": rates(episode), "others": [rates(cache / name) for name in OTHER_DBS if (cache / name).exists()],
            "perception": PERCEPTION, "consolidation": consolidation_rtf()}


# pure conversions -------------------------------------------------------------------------------------
def video_hours(n: int, per_minute: float) -> float:
    """Hours of video that ``n`` memories stand for at ``per_minute`` memories per minute."""
    return n / per_minute / 60.0


def memories_for(hours: float, per_minute: float) -> float:
    return hours * 60.0 * per_minute


def ingest_hours(video_h: float, *rtfs: float) -> float:
    """Wall hours to ingest ``video_h`` hours of video through stages of these real-time factors in turn."""
    return video_h * sum(rtfs)


def p50_p95(values: Sequence[float]) -> tuple[float, float]:
    """Median and 95th percentile (nearest rank, as bench/answer_latency.py), of a few values."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def search_label(runs: Mapping[str, Any], label: str | None) -> str:
    """``label`` if recorded, else the newest run's label (by its date)."""
    if label is not None:
        if label not in runs:
            raise SystemExit(f"no search run labelled {label!r}; recorded: {', '.join(runs)}")
        return label
    return max(runs, key=lambda name: str(runs[name].get("date", "")))


READING = """Reading the table (run of 2026-11-27 01:58-02:07 UTC, load 2.7-5.7: another model run and a search
benchmark shared the 2 cores: answers took 17-21 s p50 here against 11.3 s at load 1.6-2.1 in section "Answer
latency", other questions):

- **Ingest is the limit, not the store.** 10^5 memories are about 92 hours of speech-dense video: 59 hours of
  perception on 2 cores, 295 with consolidation (12 days); 10^6 are about 920 hours (38 days of video): 25 days of
  perception, 123 with consolidation. Perception (RTF 0.64) keeps up with about 1.5 live streams per 2-core machine;
  consolidation with the 1.5B on the same cores (RTF 2.6) keeps up with none, so long or several streams want
  `--no-consolidate` with `m3agent consolidate` when idle, a faster model endpoint, or Ray workers.
- **The file is mostly media evidence.** A real memory keeps face crops, face and voice embeddings and shots:
  about 56 MiB per hour of video, 5 GiB at 10^5 memories and 50 GiB at 10^6, against 0.2 GiB (10^5) and 3 GiB
  (10^6) for the memory rows with their vectors and text index. SQLite is at ease with either; the disk is what
  to plan for.
- **Search grows, answers do not (yet).** The hybrid search's p50 rises from 38 ms (10^2) to 746 ms (10^5) in
  the recorded run (load 24 at 10^5; BM25 over FTS5 scores every row that matches a query word, section "Search
  at scale"); the vector side alone stays at 15 ms at 10^6 (section "Store"). Inside the answers, on a quieter
  machine, retrieval (query plan, searches, evidence) took 0.33 s at 10^2 and 0.41 s at 10^5 of answers of
  17-21 s: the grounded prompt shows the same number of memories whatever N (about 550 prompt tokens, 280 of them
  evaluated after the cached system prefix), so answer latency is set by the model and the cores' load, not by
  the memory's size, up to 10^5.
- **When to move to PostgreSQL and Ray.** Not for the size in this range: one SQLite file answers at 10^5 in the
  same time as at 10^2. Move for ingest throughput (more than about one and a half live streams per machine, or
  consolidation of them), for writers on several machines, or past about 10^6 memories, where the HNSW build
  (379 s), 4.4 GiB of resident memory (section "Store") and BM25 over millions of rows are the costs to watch."""


# measuring answers -------------------------------------------------------------------------------------
class TimedChat:
    """A chat model that adds up the seconds and llama.cpp counters of its calls (the model's share of an answer)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.evaluated = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        try:
            return self.inner.chat(messages, **kwargs)
        finally:
            self.seconds += time.perf_counter() - begin
            self.evaluated += int((getattr(self.inner, "timings", None) or {}).get("prompt_evaluated", 0))


def agent_class() -> type:
    """:class:`m3agent.api.Agent` answering with a model shared by every store (one model process)."""
    from m3agent.api import Agent

    class SharedModelAgent(Agent):
        def __init__(self, settings: Any, chat: TimedChat) -> None:
            super().__init__(settings)
            self.shared = chat

        def _chat_model(self) -> Any:
            return self.shared

    return SharedModelAgent


def indexed_store(n: int) -> tuple[Path, dict[str, Any]]:
    """A copy of ``search-n.db`` with its vector snapshot saved (built once, cached): a memory in use."""
    from m3agent.store import open_store

    path = sc.cache_dir() / f"scaling-{n}.db"
    info = path.with_suffix(".json")
    if not (path.exists() and info.exists()):
        for stale in path.parent.glob(path.name + "*"):
            stale.unlink()
        shutil.copyfile(ss.store_for(n), path)
        begin = time.perf_counter()
        with open_store(str(path)) as store:
            store.build_vector_index()  # type: ignore[attr-defined]
        info.write_text(json.dumps({"snapshot_s": round(time.perf_counter() - begin, 1), "load": os.getloadavg()[0]}))
    return path, json.loads(info.read_text())


def questions(count: int) -> list[str]:
    """The same ``count`` real questions at every size (unscoped: over the whole memory)."""
    return [q.text for q in sc.queries(sc.load_sources(), 1, count, character=False, seed=5)]


def measure_answers(data: dict[str, Any], sizes: list[int], count: int, llm: str | None) -> None:
    """Answer the questions on each size's store, in turn; every answer is saved to :data:`SCORES` at once."""
    import m3agent
    from answer_latency import _worker_cpu
    from m3agent.llm import chat_model_from_settings
    from m3agent.settings import load_settings

    asked = questions(count)
    overrides = {"llm": llm} if llm else {}
    answers = data.setdefault("answers", {})
    data["questions"] = asked
    todo = [(i, n) for i in range(count) for n in (sizes if i % 2 == 0 else sizes[::-1])
            if not any(r["question"] == asked[i] for r in answers.get(str(n), {}).get("records", []))]
    if not todo:
        return
    settings = load_settings(**overrides)
    chat = TimedChat(chat_model_from_settings(settings))
    make = agent_class()
    agents: dict[int, Any] = {}
    try:
        for n in sorted({n for _, n in todo}):
            path, info = indexed_store(n)
            agents[n] = make(m3agent.open(path, **overrides).settings, chat)
            begin = time.perf_counter()
            agents[n].search(asked[0], 10)  # the snapshot and the character index: loaded once, not counted
            entry = answers.setdefault(str(n), {"records": []})
            entry.update(file_mib=round(path.stat().st_size / MIB, 1), first_search_s=round(time.perf_counter()
                         - begin, 2), **info)
        agents[min(agents)].ask("What did the speakers talk about first?")  # model load, fixed system prompt
        for i, n in todo:
            chat.seconds, chat.evaluated = 0.0, 0
            cpu = _worker_cpu(chat.inner)
            begin = time.perf_counter()
            answer = agents[n].ask(asked[i])
            seconds = time.perf_counter() - begin
            record = {"question": asked[i], "seconds": round(seconds, 2), "model_s": round(chat.seconds, 2),
                      "model_cpu_s": round(_worker_cpu(chat.inner) - cpu, 2), "calls": answer.usage.calls,
                      "prompt_tokens": answer.usage.prompt_tokens, "evaluated": chat.evaluated,
                      "completion_tokens": answer.usage.completion_tokens, "answered": answer.answered,
                      "answer": answer.text[:200], "memories_cited": len(answer.evidence),
                      "load": round(os.getloadavg()[0], 2)}
            answers[str(n)]["records"].append(record)
            save(data)
            print(f"[{n}] {i + 1}/{count} {record['seconds']} s (model {record['model_s']} s, "
                  f"{record['prompt_tokens']} prompt tokens) load {record['load']}", file=sys.stderr, flush=True)
    finally:
        for agent in agents.values():
            agent.close()
        close = getattr(chat.inner, "close", None)
        if close is not None:
            close()
    data["llm"] = chat.name


def save(data: dict[str, Any]) -> None:
    SCORES.write_text(json.dumps(data, indent=1) + "\n")


# the table ---------------------------------------------------------------------------------------------
def rows(data: Mapping[str, Any], search: Mapping[str, Any], kind: str,
         files: Mapping[int, float] | None = None) -> list[dict[str, Any]]:
    """One row per size: the conversions, the file (``files``: MiB of each ``search-N.db``, else the size
    ``search`` recorded), ``search``'s ``kind`` figures (one search_scale run) and the answers; the 10^6 row's
    measured columns from :data:`MILLION`."""
    c = data["constants"]
    per_minute, per_hour = c["episode"]["per_minute"], c["episode"]["mib_per_hour"]
    perception, consolidation = c["perception"]["rtf"], c["consolidation"]["rtf"]
    answers = data.get("answers", {})
    sizes = sorted({int(n) for n in (*answers, *search.get("sizes", {}))})
    out = []
    for n in [*sizes, MILLION["n"]]:
        hours = video_hours(n, per_minute)
        row: dict[str, Any] = {"n": n, "video_h": hours, "ingest_h": ingest_hours(hours, perception),
                               "ingest_consolidated_h": ingest_hours(hours, perception, consolidation),
                               "real_file_mib": hours * per_hour}
        found = search.get("sizes", {}).get(str(n))
        if found:
            row["rows_mib"] = found["store"].get("db_mib")
            api = found.get("api", {}).get(kind)
            if api:
                row["search_ms"] = (api["p50_ms"], api["p95_ms"])
        if files and n in files:
            row["rows_mib"] = files[n]
        entry = answers.get(str(n))
        if entry and entry.get("records"):
            records = entry["records"]
            row.update(snapshot_mib=entry.get("file_mib"), answer_s=p50_p95([r["seconds"] for r in records]),
                       retrieval_s=p50_p95([r["seconds"] - r["model_s"] for r in records]), answers=len(records),
                       no_call=sum(1 for r in records if not r.get("calls", 1)),
                       prompt_tokens=statistics.fmean(r["prompt_tokens"] for r in records),
                       evaluated=statistics.fmean(r["evaluated"] for r in records),
                       load=(min(r["load"] for r in records), max(r["load"] for r in records)))
        if n == MILLION["n"] and "rows_mib" not in row:
            row.update(rows_mib=MILLION["file_mib"], million=True)
        out.append(row)
    return out


def _num(value: float) -> str:
    """Three significant figures, thousands separated."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _pair(pair: tuple[float, float] | None, unit: str = "") -> str:
    return "–" if pair is None else f"{_num(pair[0])} / {_num(pair[1])}{unit}"


def render_table(table: list[dict[str, Any]]) -> str:
    lines = ["| memories | video h | ingest h: perception | + consolidation | file MiB: memory rows | with vector "
             "snapshot | real ingest (est.) | search p50 / p95 ms | answer p50 / p95 s | of which retrieval s | "
             "prompt tokens (evaluated) | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        million = r.get("million")
        search = _pair(r.get("search_ms"))
        if million and "search_ms" not in r:
            search = (f"vector {_num(MILLION['vector_p50_ms'])} / {_num(MILLION['vector_p95_ms'])}, keyword "
                      f"{_num(MILLION['keyword_p50_ms'])} / {_num(MILLION['keyword_p95_ms'])} (†)")
        tokens = f"{r['prompt_tokens']:.0f} ({r['evaluated']:.0f})" if "prompt_tokens" in r else "–"
        load = f"{r['load'][0]:.1f}-{r['load'][1]:.1f}" if "load" in r else "–"
        snapshot = _num(r["snapshot_mib"]) if r.get("snapshot_mib") else "–"
        rows_mib = "–" if r.get("rows_mib") is None else _num(r["rows_mib"]) + (" (†)" if million else "")
        lines.append(f"| {r['n']:,} | {_num(r['video_h'])} | {_num(r['ingest_h'])} "
                     f"| {_num(r['ingest_consolidated_h'])} | {rows_mib} | {snapshot} "
                     f"| {_num(r['real_file_mib'])} | {search} | {_pair(r.get('answer_s'))} "
                     f"| {_pair(r.get('retrieval_s'))} | {tokens} | {load} |")
    return "\n".join(lines)


def render(data: Mapping[str, Any], runs: Mapping[str, Any], label: str, kind: str,
           files: Mapping[int, float] | None = None) -> str:
    """The section's body: the run, the table (``runs[label]``'s search figures of ``kind``) and its sources."""
    c = data["constants"]
    ep, run = c["episode"], data.get("run", {})
    table = rows(data, runs[label], kind, files)
    others = "; ".join(f"{o['db']}: {o['memories']} memories in {o['media_s']} s, {o['per_minute']}/min, "
                       f"{o['mib_per_hour']} MiB/h" for o in c.get("others", []))
    asked = data.get("questions", [])
    quoted = "; ".join(f'"{q}"' for q in asked)
    search_run = runs[label]
    lines = [
        run_sentence(run), "",
        render_table(table), "",
        "How each column was obtained:", "",
        f"- **video h** = memories / {ep['per_minute']} per minute / 60: the memories per minute of the 3-minute "
        f"episode (13 real videos joined, speech-dense) ingested with the default settings (perception writer, "
        f"every scene sense) and consolidated by the 1.5B (`bench/consolidate.py`), counted in its memory "
        f"`~/.cache/m3agent/bench/{ep['db']}`: {ep['memories']} memories ({_kinds(ep['by_kind'])}) in "
        f"{ep['media_s']} s. Other real memories: {others or 'none cached'}. A quiet camera makes fewer memories "
        f"per minute, so more hours for the same N.",
        f"- **ingest h** = video h x RTF on 2 cores. Perception: RTF {c['perception']['rtf']} "
        f"({c['perception']['source']}; the CPU time gives {c['perception']['cpu_s_per_media_s'] / 2:.2f} on two "
        f"idle cores). Consolidation (the packaged 1.5B writing semantic facts, after perception): RTF "
        f"{c['consolidation']['rtf']} ({c['consolidation']['source']}); `ingest --no-consolidate` returns at "
        f"perception speed and `m3agent consolidate` catches up later.",
        f"- **file MiB**: *memory rows* = the real file `search-N.db` of `bench/search_corpus.py` (realistic text, "
        f"MiniLM vectors, entities and edges, FTS, no vector snapshot); *with vector snapshot* = its copy after "
        f"`build_vector_index()` (int8 mirror, and the HNSW graph above 20,000 rows), the file a memory in use "
        f"has; *real ingest (est.)* = video h x {ep['mib_per_hour']} MiB per hour, the episode's file ({ep['file_mib']}"
        f" MiB): a real ingest also keeps face crops, face and voice embeddings, shots, so its file grows with the "
        f"hours of video, {_real_over_rows(table):.0f}x the memory rows.",
        f"- **search**: `m3agent.open(path).search(q, 10)` (hybrid vector + BM25, MiniLM query embedding "
        f"included), `{kind}` queries, from `bench/scores/search_scale.json` run `{label}` (commit "
        f"{search_run.get('commit')}, {search_run.get('date')}, load at start "
        f"{search_run.get('machine', {}).get('load_start', 0):.1f}; `bench/search_scale.py`, section \"Search at "
        f"scale\"). Recorded runs: {', '.join(f'`{name}`' for name in runs)} (`--search-label`).",
        f"- **answer**: `m3agent.open(path).ask(q)` with the default model ({data.get('llm', '?')}, grounded mode), "
        f"wall seconds over {len(asked)} real questions asked unscoped on each store with its vector snapshot "
        f"(the same questions at every N; one model process for all sizes, sizes in turn question by question; "
        f"one answer before, not counted, loads the model; each store's first search, not counted, loads its "
        f"index). The p95 of {len(asked)} answers is their slowest. *of which retrieval*: the answer's seconds "
        f"outside the model's calls (query plan, searches, evidence, prompt), p50 / p95. {_no_call(table)}"
        f"Prompt tokens per answer, and in brackets those llama.cpp evaluated (not reused from the cached "
        f"prefix). Questions: {quoted}.",
        f"- (†) 10^6: no search-N store of 10^6 was built (the clip writer needs more than 2 hours at this load); "
        f"the file size and search figures are from {MILLION['source']}.",
        "", READING, "", f"![scaling curves]({PLOT.name})", ""]
    return "\n".join(lines)


def _real_over_rows(table: list[dict[str, Any]]) -> float:
    """How many times the memory rows' file a real ingest's file is, at the largest measured size."""
    measured = [r for r in table if r.get("rows_mib") and not r.get("million")]
    return measured[-1]["real_file_mib"] / measured[-1]["rows_mib"] if measured else 0.0


def _no_call(table: list[dict[str, Any]]) -> str:
    """Which sizes had answers made without a model call (nothing found to show the model)."""
    found = [f"{r['no_call']} of {r['answers']} at {r['n']:,}" for r in table if r.get("no_call")]
    return (f"Answers given without a model call (the search found nothing to show it, so the answer is \"The "
            f"memory does not say.\" at once): {', '.join(found)}; they are counted. ") if found else ""


def _kinds(by_kind: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in sorted(by_kind.items()))


def run_sentence(run: Mapping[str, Any]) -> str:
    from m3agent.bench.results_io import run_line

    if not run:
        return "No answers measured yet."
    return (run_line(run["env"], run["command"], run["load_start"]) + f" Load average at end: {run['load_end']}.")


def plot(table: list[dict[str, Any]], per_minute: float, path: Path = PLOT, search_note: str = "") -> bool:
    """2x2 panels against memories (log axes, hours of video on top); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", flush=True)
        return False
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    (ingest, size), (search, answer) = axes

    def line(ax: Any, key: str, label: str, *, index: int | None = None, style: str = "-o") -> None:
        """``key`` of every row that has it (the 10^6 row's file size, from another corpus, is drawn apart)."""
        points = [(r["n"], r[key] if index is None else r[key][index]) for r in table
                  if r.get(key) is not None and not (r.get("million") and key == "rows_mib")]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, style, label=label)

    line(ingest, "video_h", "hours of video")
    line(ingest, "ingest_h", "ingest: perception")
    line(ingest, "ingest_consolidated_h", "ingest: + consolidation")
    ingest.set(ylabel="hours", title="Video held and ingest time (2 cores)")
    line(size, "rows_mib", "memory rows (search-N.db)")
    line(size, "snapshot_mib", "with vector snapshot")
    line(size, "real_file_mib", "real ingest (estimate)", style="--")
    line(search, "search_ms", "search p50", index=0)
    line(search, "search_ms", "search p95", index=1, style="--o")
    million = next((r for r in table if r.get("million")), None)
    if million:
        size.plot([million["n"]], [million["rows_mib"]], "s", mfc="none", label="10^6: section Store (other corpus)")
        search.plot([million["n"]] * 2, [MILLION["vector_p50_ms"], MILLION["keyword_p50_ms"]], "s", mfc="none",
                    label="10^6 p50, vector / keyword alone (section Store)")
    size.set(ylabel="MiB", title="SQLite file")
    search.set(ylabel="ms", title=f"Search latency, Python API {search_note}".strip())
    for target in (50, 100):
        search.axhline(target, color="grey", lw=0.5)
    line(answer, "answer_s", "answer p50", index=0)
    line(answer, "answer_s", "answer p95", index=1, style="--o")
    line(answer, "retrieval_s", "of which retrieval, p50", index=0, style=":^")
    answer.set(ylabel="seconds", title="Grounded answer latency (packaged 1.5B)")
    for target in (5, 10):
        answer.axhline(target, color="grey", lw=0.5)
    for ax in axes.flat:
        ax.set(xscale="log", yscale="log", xlabel="memories", xlim=(50, 2e6))
        ax.grid(True, which="major", lw=0.3)
        ax.legend(fontsize=7)
        top = ax.secondary_xaxis("top", functions=(lambda n: video_hours(n, per_minute),
                                                   lambda h: memories_for(h, per_minute)))
        top.set_xlabel("hours of video", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def store_files() -> dict[int, float]:
    """MiB of each pristine ``search-N.db`` in the cache."""
    found = {}
    for path in sc.cache_dir().glob("search-*.db"):
        if path.stem.removeprefix("search-").isdigit():
            found[int(path.stem.removeprefix("search-"))] = round(path.stat().st_size / MIB, 1)
    return found


def write(data: dict[str, Any], label: str | None, kind: str) -> None:
    from m3agent.bench.results_io import replace_section

    runs = json.loads(SEARCH_SCORES.read_text())
    chosen = search_label(runs, label)
    files = store_files()
    replace_section(DOC, SECTION, render(data, runs, chosen, kind, files))
    plot(rows(data, runs[chosen], kind, files), data["constants"]["episode"]["per_minute"],
         search_note=f"({kind}, run {chosen})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000", help="sizes to answer on ('' for none)")
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--llm", default=None, help="the model (default: the settings' default)")
    parser.add_argument("--search-label", default=None, help="run of search_scale.json (default: the newest)")
    parser.add_argument("--search-kind", default="plain", choices=ss.KINDS)
    parser.add_argument("--write", action="store_true", help="render docs/benchmarks.md and docs/scaling.png")
    args = parser.parse_args(argv)
    data: dict[str, Any] = json.loads(SCORES.read_text()) if SCORES.exists() else {}
    if (sc.cache_dir() / EPISODE_DB).exists() or "constants" not in data:
        data["constants"] = constants()  # else the recorded ones (another machine, no cached episode)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if sizes:
        from m3agent.bench.environment import environment

        load, env = round(os.getloadavg()[0], 2), environment()  # before the scores file changes the tree
        measure_answers(data, sizes, args.questions, args.llm)
        data["run"] = {"env": env, "command": "python " + " ".join(["bench/scaling.py", *(argv or
                       sys.argv[1:])]), "load_start": load, "load_end": round(os.getloadavg()[0], 2),
                       "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")}
    save(data)
    if args.write:
        write(data, args.search_label, args.search_kind)
    return 0


if __name__ == "__main__":
    sys.exit(main())
