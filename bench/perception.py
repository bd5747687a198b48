"""Perception benchmark: one JSON object with every perception target of the perception issue.

Face clustering and split-screen identity come from bench/perception_faces.py, diarization and
ASR from bench/perception_audio.py; this script adds cross-clip identity on the four HDTF talking
heads ingested into one memory, and the speed of full perception (decode + faces + voices, run as
`m3agent ingest` runs them). Writes the "Perception" section of docs/benchmarks.md.

    .venv/bin/python bench/perception.py [--no-write] [--skip-quality]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared"
MEDIA = SHARED / "media"
HEADS = ["WDA_AlexandriaOcasioCortez_000", "WDA_KatieHill_000", "WDA_BobMenendez_000", "WDA_EdMarkey0_000"]
RTF_VIDEOS = ["iianet_debate_trump_clinton.mp4", "long_multi_person/videollava_sample_demo_16_snow.mp4"]
TARGETS = {
    "face_pairwise_precision": (">=", 0.98), "face_pairwise_recall": (">=", 0.90),
    "der_pyannote_sample": ("<=", 0.20), "der_ami_1min": ("<=", 0.40), "wer_asr": ("<=", 0.08),
    "face_video_precision": (">=", 0.99), "face_video_recall": (">=", 0.95),
    "rtf_perception": ("<=", 0.5), "peak_rss_gb": ("<=", 3.0),
}


def identity_talking_heads(settings: Any, workdir: Path) -> dict[str, Any]:
    """Ingest the four HDTF clips into one memory: 4 faces, 4 voices, 4 correct face<->voice links?"""
    from m3agent.domain import EntityKind
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory

    run = settings.model_copy(update={"memory": str(workdir / "heads.db")})
    for name in HEADS:
        ingest_source(run, str(MEDIA / "video" / "hdtf_talking_heads" / f"{name}.mp4"), show_progress=False)
    with open_memory(run, readonly=True, create=False) as store:
        faces = store.entities(EntityKind.FACE)
        voices = store.entities(EntityKind.VOICE)
        links = store.links(min_confidence=store.link_confidence)
        face_video = {e.id: e.video_id for e in faces}
        voice_video = {e.id: e.video_id for e in voices}
        correct = sum(1 for link in links if face_video.get(link.face_id) is not None
                      and face_video.get(link.face_id) == voice_video.get(link.voice_id))
    ok = len(faces) == len(voices) == len(links) == correct == len(HEADS)
    return {"identity_talking_heads": ok, "face_entities": len(faces), "voice_entities": len(voices),
            "links": len(links), "correct_links": correct}


def perception_rtf(settings: Any) -> dict[str, Any]:
    """Wall seconds / media seconds of decode + faces + voices, the way ingest perceives clips."""
    from m3agent.media import iter_clips
    from m3agent.pipeline import perceive_clip

    rows: dict[str, Any] = {}
    for name in RTF_VIDEOS:
        started, media_s = time.perf_counter(), 0.0
        stages: dict[str, float] = {}
        for clip in iter_clips(MEDIA / "video" / name, settings.media):
            perception = perceive_clip(clip, settings)
            media_s += clip.clip.duration_s
            for stage, seconds in perception.timings.items():
                stages[stage] = stages.get(stage, 0.0) + seconds
        wall = time.perf_counter() - started
        rows[Path(name).name] = {"media_s": round(media_s, 2), "wall_s": round(wall, 2),
                                 "rtf": round(wall / media_s, 3),
                                 "stage_s": {k: round(v, 2) for k, v in stages.items()}}
    return rows


def warm_up(settings: Any) -> float:
    from m3agent.media import iter_clips
    from m3agent.pipeline import perceive_clip

    started = time.perf_counter()
    for clip in iter_clips(MEDIA / "video" / "hdtf_talking_heads" / f"{HEADS[0]}.mp4", settings.media):
        perceive_clip(clip, settings)
    return time.perf_counter() - started


def quality(skip: bool) -> dict[str, Any]:
    """Face and audio quality figures from the two part benchmarks."""
    if skip:
        return {}
    sys.path.insert(0, str(BENCH))
    import perception_audio
    import perception_faces

    photos = perception_faces.photo_clustering(MEDIA)
    video = perception_faces.video_identity(MEDIA)
    audio = perception_audio.summary({"diarization": perception_audio.diarization_scores(),
                                      "asr": perception_audio.wer_scores(("base",))})
    return {
        "face_pairwise_precision": photos["face_pairwise_precision"],
        "face_pairwise_recall": photos["face_pairwise_recall"],
        "face_video_precision": video["face_video_precision"],
        "face_video_recall": video["face_video_recall"],
        "der_pyannote_sample": audio["der_pyannote_sample"],
        "der_ami_1min": audio["der_ami_1min"],
        "wer_asr": audio["wer_asr"],
    }


def scene(settings: Any) -> dict[str, Any]:
    """On-screen text, shots, sounds and objects, and each scene stage's RTF (bench/perception_scene.py)."""
    sys.path.insert(0, str(BENCH))
    import perception_scene

    return perception_scene.scene_results(settings)


def verdicts(result: dict[str, Any]) -> dict[str, bool]:
    out = {}
    for key, (op, bound) in TARGETS.items():
        if isinstance(result.get(key), (int, float)):
            out[key] = result[key] >= bound if op == ">=" else result[key] <= bound
    return out


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--skip-quality", action="store_true", help="only identity and speed")
    parser.add_argument("--skip-scene", action="store_true", help="leave out the scene stages (text, objects, ...)")
    args = parser.parse_args(argv)
    if not MEDIA.is_dir():
        print(f"shared media not found at {MEDIA}", file=sys.stderr)
        return 2
    settings = load_settings(shared_dir=SHARED)
    result: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2)}
    result["model_load_s"] = round(warm_up(settings), 1)
    rtf = perception_rtf(settings)
    result["rtf_perception"] = max(row["rtf"] for row in rtf.values())
    result["rtf_per_video"] = rtf
    with tempfile.TemporaryDirectory(prefix="m3agent-bench-perception-") as tmp:
        result.update(identity_talking_heads(settings, Path(tmp)))
    result.update(quality(args.skip_quality))
    if not args.skip_scene:
        result.update(scene(settings))
    result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    result["targets_met"] = verdicts(result)
    result["environment"] = environment(settings={"frame_fps": settings.media.frame_fps,
                                                  "asr_model": settings.perception.asr_model})
    print(json.dumps(result, indent=2))
    if not args.no_write:
        write_section(result, "python bench/perception.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    env = result["environment"]
    lines = [
        run_line(env, command, result["load_average"]),
        "",
        "| metric | value | target | met |",
        "|---|---|---|---|",
    ]
    for key, (op, bound) in TARGETS.items():
        if key in result:
            lines.append(f"| {key} | {result[key]} | {op} {bound} | {'yes' if result['targets_met'][key] else 'no'} |")
    lines.append(f"| identity_talking_heads | {result['identity_talking_heads']} ({result['face_entities']} faces, "
                 f"{result['voice_entities']} voices, {result['correct_links']}/{result['links']} correct links) "
                 f"| 4 / 4 / 4 correct | {'yes' if result['identity_talking_heads'] else 'no'} |")
    lines += ["", "Full-perception speed (decode + faces + voices concurrently, after a warm-up clip; "
              f"model loading {result['model_load_s']} s):", "",
              "| video | media s | wall s | RTF | stage seconds |", "|---|---|---|---|---|"]
    for name, row in result["rtf_per_video"].items():
        stages = ", ".join(f"{k} {v}" for k, v in row["stage_s"].items())
        lines.append(f"| {name} | {row['media_s']} | {row['wall_s']} | {row['rtf']} | {stages} |")
    replace_section(REPO / "docs" / "benchmarks.md", "Perception", "\n".join(lines))
    if "scene_targets_met" in result:
        import perception_scene

        perception_scene.write_section({**result, "environment": env}, command)


if __name__ == "__main__":
    raise SystemExit(main())
