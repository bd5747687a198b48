"""Face identity calibration: same-person vs different-person track scores across clips and videos.

The shared videos are cut into 4 s clips and their face tracks (>= 3 sightings) embedded. Two tracks
of different clips show the same person when they come from the same video (and the same half of a
split screen), or from videoagent segments 9 and 10 (one woman); all other pairs are different
people. For each scoring rule and threshold this reports the share of same-person pairs accepted and
how many different-person pairs would be (falsely) accepted. It chose `perception.face_match_distance`.

    .venv/bin/python bench/identity_calibration.py [--no-write]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VIDEO = REPO.parent / "shared" / "media" / "video"
SOURCES = {
    "debate": "iianet_debate_trump_clinton.mp4",
    "interview": "visualvoice_interview_2spk.mp4",
    "restaurant": "visualvoice_noisy_restaurant_1spk.mp4",
    "seg9": "videoagent_talking/segment_9.mp4",
    "seg10": "videoagent_talking/segment_10.mp4",
    **{h: f"hdtf_talking_heads/{h}.mp4" for h in ("WDA_AlexandriaOcasioCortez_000", "WDA_KatieHill_000",
                                                  "WDA_BobMenendez_000", "WDA_EdMarkey0_000")},
}
SPLIT_SCREEN = {"debate", "interview"}
THRESHOLDS_BY_EMBEDDER = {"dlib": (0.875, 0.9, 0.91, 0.92, 0.93, 0.94),
                          "dlib+sface": (0.62, 0.65, 0.68, 0.7, 0.72, 0.75)}


def identity(name: str, side: str) -> str:
    if name in SPLIT_SCREEN:
        return f"{name}-{side}"
    return "videoagent-woman" if name in ("seg9", "seg10") else name


def collect_tracks() -> list[tuple[str, int, str, Any]]:
    """(video, clip, person, unit exemplar matrix) for every track seen at least 3 times."""
    import numpy as np

    from m3agent.identity.banks import unit_rows
    from m3agent.media import iter_clips
    from m3agent.perception.faces import perceive_faces
    from m3agent.settings import load_settings

    settings = load_settings(media={"clip_seconds": 4})
    tracks = []
    for name, path in SOURCES.items():
        for clip in iter_clips(VIDEO / path, settings.media):
            for track in perceive_faces(clip, settings.perception):
                vectors = [o.embedding for o in track.best if o.embedding is not None]
                if len(track.observations) < 3 or not vectors:
                    continue
                centre_x = float(np.mean([(o.bbox.x1 + o.bbox.x2) / 2 for o in track.observations]))
                side = "left" if centre_x < clip.width / 2 else "right"
                tracks.append((name, clip.clip.index, identity(name, side), unit_rows(vectors)))
    return tracks


def pair_scores(tracks: list[tuple[str, int, str, Any]]) -> dict[str, list[tuple[float, bool]]]:
    """Scores of every cross-clip pair under each rule, with whether the pair is one person."""
    from m3agent.identity.banks import bank_score, unit_rows

    rules: dict[str, list[tuple[float, bool]]] = {"top3 (used)": [], "centroid": [], "mean pair": []}
    for a, b in itertools.combinations(tracks, 2):
        if a[:2] == b[:2]:
            continue
        same = a[2] == b[2]
        centre = float(unit_rows([a[3].mean(0)])[0] @ unit_rows([b[3].mean(0)])[0])
        rules["top3 (used)"].append((bank_score(a[3], b[3], 3), same))
        rules["centroid"].append((centre, same))
        rules["mean pair"].append((float((a[3] @ b[3].T).mean()), same))
    return rules


def sweep(rules: dict[str, list[tuple[float, bool]]], thresholds: tuple[float, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rule, scores in rules.items():
        same = [s for s, one in scores if one]
        diff = [s for s, one in scores if not one]
        out[rule] = {str(t): {"same_accepted": round(sum(s >= t for s in same) / max(len(same), 1), 3),
                              "different_accepted": sum(s >= t for s in diff)} for t in thresholds}
        out[rule]["pairs"] = {"same": len(same), "different": len(diff)}
    return out


def write_section(result: dict[str, Any]) -> None:
    from m3agent.bench.results_io import replace_section

    thresholds = THRESHOLDS_BY_EMBEDDER[result["embedder"]]
    lines = [f"Command: `.venv/bin/python bench/identity_calibration.py`. Date: {result['date']}. "
             f"{result['tracks']} face tracks from {len(SOURCES)} videos in 4 s clips, "
             f"`face_embedder` {result['embedder']}.", "",
             "Cosine threshold (distance d on unit vectors is cosine 1 - d²/2: d 0.4 = 0.92, d 0.75 = 0.72). "
             "Cells: share of same-person pairs accepted / number of different-person pairs accepted.", "",
             "| rule | pairs same/diff | " + " | ".join(str(t) for t in thresholds) + " |",
             "|---|---|" + "---|" * len(thresholds)]
    for rule, row in result["sweep"].items():
        cells = [f"{row[str(t)]['same_accepted']} / {row[str(t)]['different_accepted']}" for t in thresholds]
        lines.append(f"| {rule} | {row['pairs']['same']}/{row['pairs']['different']} | " + " | ".join(cells) + " |")
    lines += ["", "dlib alone (2026-11-21): top-3 rule at cosine 0.92 (`face_match_distance` 0.4) accepted 0.977 of "
              "same-person pairs and no different-person pair; 0.5 accepted different people (e.g. Ed Markey "
              "joined a debate face). dlib+sface: `face_match_distance` 0.75 (cosine 0.72), midway between "
              "the highest different-person score (0.686) and the lowest cross-source same-person score (0.747) "
              "of the photo and video sets (Identity across videos)."]
    replace_section(REPO / "docs" / "benchmarks.md", "Identity calibration", "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    import datetime as dt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if not VIDEO.is_dir():
        print(f"shared media not found at {VIDEO}", file=sys.stderr)
        return 2
    from m3agent.settings import load_settings

    embedder = load_settings().perception.face_embedder
    tracks = collect_tracks()
    result = {"date": dt.date.today().isoformat(), "tracks": len(tracks), "embedder": embedder,
              "sweep": sweep(pair_scores(tracks), THRESHOLDS_BY_EMBEDDER[embedder])}
    print(json.dumps(result, indent=2))
    if not args.no_write:
        write_section(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
