"""Ingest benchmark: end-to-end real-time factor of `m3agent ingest` with the perception-only writer.

Inputs: the 152 s `long_multi_person/videollava_sample_demo_16_snow.mp4` and a ~3-minute episode
concatenated from the `video/` clips (built once into the cache folder), with every scene stage on
(shots, on-screen text, objects, sounds) and, for comparison, the episode again with them off. Models are loaded before
timing starts (one warm-up clip), so the figures are steady-state ingest speed; the load time is
reported separately. Writes the "Ingest" section of docs/benchmarks.md.

    .venv/bin/python bench/ingest.py [--no-write] [--inputs snow,episode,episode-off]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VIDEO = SHARED / "media" / "video"
EPISODE_PARTS = [
    "iianet_debate_trump_clinton.mp4",
    "visualvoice_interview_2spk.mp4",
    "hdtf_talking_heads/WDA_AlexandriaOcasioCortez_000.mp4",
    "hdtf_talking_heads/WDA_KatieHill_000.mp4",
    "pbs_oval_office_trump_mirziyoyev.mp4",
    "whitehouse_short_hamilton_clip.mp4",
    "videoagent_talking/segment_9.mp4",
    "videoagent_talking/segment_10.mp4",
    "videoagent_talking/segment_11.mp4",
    "hdtf_talking_heads/WDA_BobMenendez_000.mp4",
    "visualvoice_noisy_restaurant_1spk.mp4",
    "long_multi_person/flashvstream_example_playground.mp4",
    "hdtf_talking_heads/WDA_EdMarkey0_000.mp4",
    "iianet_debate_trump_clinton.mp4",
    "visualvoice_interview_2spk.mp4",
]


def episode(cache: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The ~3-minute episode (built on first use) and its timeline."""
    from m3agent.bench.episodes.build import build_episode

    out = cache / "episode_3min.mp4"
    timeline_file = out.with_suffix(".json")
    if not out.exists() or not timeline_file.exists():
        parts = build_episode([VIDEO / p for p in EPISODE_PARTS], out)
        timeline_file.write_text(json.dumps([dataclasses.asdict(p) for p in parts], indent=1))
    return out, json.loads(timeline_file.read_text())


def warm_up(settings: Any, workdir: Path) -> float:
    """Load every model once (one short clip), so timed runs measure steady-state speed."""
    from m3agent.pipeline import ingest_source

    started = time.perf_counter()
    warm = settings.model_copy(update={"memory": str(workdir / "warm.db")})
    ingest_source(warm, str(VIDEO / "hdtf_talking_heads" / "WDA_KatieHill_000.mp4"), show_progress=False)
    return time.perf_counter() - started


def measure(settings: Any, video: Path, workdir: Path, tag: str = "") -> dict[str, Any]:
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_store

    db = workdir / f"{video.stem}{tag}.db"
    run = settings.model_copy(update={"memory": str(db)})
    cpu_started = cpu_seconds()
    report = ingest_source(run, str(video), show_progress=True)
    cpu = cpu_seconds() - cpu_started
    with open_store(str(db), readonly=True, create=False) as store:
        entities = len(store.entities())
        kinds = memory_kinds(store)
    size_mb = sum(p.stat().st_size for p in workdir.glob(f"{video.stem}{tag}.db*")) / 1e6
    minutes = report.media_seconds / 60
    return {
        "video": video.name,
        "media_s": round(report.media_seconds, 1),
        "wall_s": round(report.wall_seconds, 1),
        "rtf": round(report.rtf, 3),
        "cpu_s": round(cpu, 1),
        "cpu_rtf": round(cpu / report.media_seconds, 3) if report.media_seconds else 0.0,
        "clips": report.clips_done,
        "failed_clips": len(report.clips_failed),
        "memories": report.memories_written,
        "memories_per_minute": round(report.memories_written / minutes, 1) if minutes else 0.0,
        "entities": entities,
        "memory_kinds": kinds,
        "store_mb": round(size_mb, 2),
        "store_mb_per_hour": round(size_mb / (report.media_seconds / 3600), 1) if report.media_seconds else 0.0,
        "stage_s": report.to_dict()["stage_seconds"],
    }


KIND_PATTERNS = (("speech", re.compile(r" says: ")), ("presence", re.compile(r"> is on screen ")),
                 ("shot", re.compile(r"^Shot ")), ("text", re.compile(r"^On screen ")),
                 ("objects", re.compile(r" visible ")), ("sounds", re.compile(r" is heard ")))


def memory_kinds(store: Any) -> dict[str, int]:
    """Memories by what they say (speech, presence, shot summary, on-screen text, objects, sounds, semantic,
    other), most first: what the volume is made of."""
    counts: dict[str, int] = {}
    for video in store.videos():
        for memory in store.memories(video.video_id):
            kind = "semantic" if memory.kind.value == "semantic" else next(
                (name for name, pattern in KIND_PATTERNS if pattern.search(memory.text)), "other")
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def cpu_seconds() -> float:
    """CPU seconds of this process so far, all threads (user + system): what the run costs whatever the load."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--inputs", default="snow,episode,episode-off",
                        help="comma-separated: snow, episode; a -off suffix runs it with the scene senses off")
    parser.add_argument("--no-senses", action="store_true",
                        help="switch the scene stages (shots, text, objects, sounds) off, for comparison")
    args = parser.parse_args(argv)
    off = {"shots": False, "text": False, "objects": False, "sounds": False}
    if not VIDEO.is_dir():
        print(f"shared media not found at {VIDEO}", file=sys.stderr)
        return 2
    settings = load_settings(shared_dir=SHARED, **({"senses": off} if args.no_senses else {}))
    cache = settings.resolved_cache_dir() / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"environment": environment(settings={
        "clip_seconds": settings.media.clip_seconds, "frame_fps": settings.media.frame_fps,
        "asr_model": settings.perception.asr_model, "writer": settings.writer, "embedder": settings.embedder,
        "senses": [k for k in ("shots", "text", "objects", "sounds") if getattr(settings.senses, k)]}),
        "load_average": round(os.getloadavg()[0], 2), "runs": []}
    with tempfile.TemporaryDirectory(prefix="m3agent-bench-ingest-") as tmp:
        workdir = Path(tmp)
        results["model_load_s"] = round(warm_up(settings, workdir), 1)
        for name in args.inputs.split(","):
            video = VIDEO / "long_multi_person" / "videollava_sample_demo_16_snow.mp4" if name.startswith("snow") \
                else episode(cache)[0]
            run = settings.model_copy(update={"senses": settings.senses.model_copy(update=off)}) \
                if name.endswith("-off") else settings
            row = measure(run, video, workdir, tag="-off" if name.endswith("-off") else "")
            if name.endswith("-off"):
                row["video"] += " (scene senses off)"
            results["runs"].append(row)
    results["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    print(json.dumps(results, indent=2))
    if not args.no_write:
        write_section(results, "python bench/ingest.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0


def write_section(results: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    env = results["environment"]
    lines = [
        run_line(env, command, results["load_average"]),
        "",
        f"Settings: {env['settings']}. Model loading before timing: {results['model_load_s']} s. "
        f"Peak RSS: {results['peak_rss_gb']} GB.",
        "",
        "| video | media s | wall s | RTF (target <= 0.5, senses on) | CPU s | CPU s per media s | clips | memories "
        "| memories/min | memories by kind | entities | store MB | store MB per hour | stage seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        stages = ", ".join(f"{k} {v}" for k, v in r["stage_s"].items())
        lines.append(f"| {r['video']} | {r['media_s']} | {r['wall_s']} | {r['rtf']} | {r['cpu_s']} | {r['cpu_rtf']} "
                     f"| {r['clips']} | {r['memories']} "
                     f"| {r['memories_per_minute']} | {_kinds(r)} | {r['entities']} | {r['store_mb']} "
                     f"| {r['store_mb_per_hour']} "
                     f"| {stages} |")
    lines += ["", "Stage seconds are summed per clip; faces and voices run concurrently and the next clip is "
              "perceived while the current one is written, so they add up to more than the wall time. CPU s is the "
              "process's CPU time over the run (all threads): unlike wall time it does not grow with other "
              "people's load, and CPU s per media s / 2 is the lowest wall RTF two idle cores could give. The "
              "scene stages' own CPU cost per stage is in Perception: scene. Re-measure wall RTF on a quiet "
              "machine with `nice .venv/bin/python bench/ingest.py --inputs episode,episode-off` "
              "(the load average is in the first line)."]
    replace_section(REPO / "docs" / "benchmarks.md", "Ingest", "\n".join(lines))


def _kinds(row: dict[str, Any]) -> str:
    return ", ".join(f"{k} {n}" for k, n in row.get("memory_kinds", {}).items()) or "–"


if __name__ == "__main__":
    raise SystemExit(main())
