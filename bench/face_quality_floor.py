"""Face quality floor: the best sighting quality of every face track on the shared videos.

Could a floor on a track's best sighting quality (frontal x sharp x large x confident,
perception/faces/quality.py) keep false detections from founding entities? This runs the real face stage on
every shared video in 30 s clips and lists each clip's tracks by their best quality. Tracks below ``--show``
get their best crop written to ``--crops`` to be looked at (which are people is decided by eye, and said in
the section).

    .venv/bin/python bench/face_quality_floor.py [--show 0.25] [--crops /tmp/face_floor] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VIDEO = REPO.parent / "shared" / "media" / "video"


def videos() -> list[Path]:
    return sorted(p for p in VIDEO.rglob("*.mp4"))


def tracks_of(path: Path, settings: Any) -> list[dict[str, Any]]:
    """Every face track of every clip of ``path``: clip, sightings, best quality, box height, best crop."""
    from m3agent.media import iter_clips
    from m3agent.perception.faces.perceive import perceive_faces

    out = []
    for clip in iter_clips(path, settings.media):
        for track in perceive_faces(clip, settings.perception):
            best = max(track.observations, key=lambda o: o.quality)
            crop = next((o.crop_jpeg for o in track.best if o.crop_jpeg), None)
            out.append({"video": str(path.relative_to(VIDEO)), "clip": clip.clip.index,
                        "sightings": len(track.observations), "best_quality": round(best.quality, 3),
                        "height_px": round(best.bbox.height), "time_s": round(best.time_s, 1), "crop": crop})
    return out


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=float, default=0.25, help="write the crops of tracks below this quality")
    parser.add_argument("--crops", type=Path, default=Path("/tmp/face_floor"))
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    settings = load_settings()
    load = round(os.getloadavg()[0], 2)
    rows = [t for v in videos() for t in tracks_of(v, settings)]
    args.crops.mkdir(parents=True, exist_ok=True)
    low = sorted((r for r in rows if r["best_quality"] < args.show), key=lambda r: r["best_quality"])
    for i, r in enumerate(low):
        if r["crop"]:
            name = f"{i:03d}_{r['best_quality']:.3f}_{Path(r['video']).stem}_c{r['clip']}.jpg"
            (args.crops / name).write_bytes(r["crop"])
    founding = [r for r in rows if r["sightings"] >= settings.perception.min_face_observations]
    result = {"tracks": len(rows), "founding_tracks": len(founding),
              "quantiles": quantiles([r["best_quality"] for r in founding]),
              "low": [{k: v for k, v in r.items() if k != "crop"} for r in low],
              "load_average": load, "environment": environment()}
    print(json.dumps(result, indent=2))
    if not args.no_write:
        write_section(result, "python bench/face_quality_floor.py " + " ".join(argv if argv is not None
                                                                            else sys.argv[1:]))
    return 0


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {f"p{q}": ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] for q in (0, 5, 25, 50)}


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [run_line(result["environment"], command, result["load_average"]), "",
             f"{result['tracks']} face tracks in 30 s clips of every shared video, {result['founding_tracks']} seen "
             "often enough to found an entity (3+ sightings). Best sighting quality of those: "
             + ", ".join(f"{k} {v}" for k, v in result["quantiles"].items()) + ". Tracks below the listing bar:", "",
             "| video | clip | sightings | best quality | box height px | at s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['video']} | {r['clip']} | {r['sightings']} | {r['best_quality']} | {r['height_px']} | "
              f"{r['time_s']} |" for r in result["low"]]
    replace_section(REPO / "docs" / "benchmarks.md", "Identity: face quality floor", "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
