"""Lip-sync margins (issue 48): per voice, the correlation with its own face and with the best wrong face.

Each run ingests the debate and the interview (perception only, as `m3agent ingest` does) and recomputes
the evidence from the stored perception the way identity linking does (``evidence_from``). Runs vary what
differs between CPUs and set-ups: the ASR model (tiny.en, base), the threads per stage, and the face boxes
(every sighting's box shifted by a random whole number of pixels, up to ``--jitter-px``, independently in x
and y: the detector's differences between CPUs), each with the mouth-motion cue at video rate
(``perception.lip_sync_video_fps``) and between the 2 fps samples (0, the cue before issue 48).

Who is right: on the debate, the voice's speaker is the captioned speaker it overlaps most (captions.tsv,
``bench/perception.py``) and his or her side (Trump left, Clinton right); a voice with no attributed caption
is reported without a verdict. The interview has no labels: a voice's "right" face there is its best one,
and what is checked is that every run gives each voice the same face (the table shows it).

    .venv/bin/python bench/lip_sync.py [--no-write] [--quick] [--video-fps 15]
    .venv/bin/python bench/lip_sync.py --rtf VIDEO_FPS   # perception speed and peak RSS, one setting per process
    .venv/bin/python bench/lip_sync.py --asd-cost        # CPU seconds of the active-speaker stage alone
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import perception as pb

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared"
CLIPS = {"debate": pb.DEBATE, "interview": pb.INTERVIEW}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One run's set-up: ASR model, threads per stage, box jitter (pixels, seed) and video-rate cue fps."""

    asr: str = "base"
    threads: int = 1
    jitter_px: int = 0
    seed: int = 0
    video_fps: float = 30.0

    @property
    def name(self) -> str:
        cue = f"video {self.video_fps:g} fps" if self.video_fps > 0 else "2 fps samples"
        boxes = f", boxes ±{self.jitter_px} px (seed {self.seed})" if self.jitter_px else ""
        return f"{cue}, {self.asr}, {self.threads} thread(s){boxes}"


def variants(quick: bool, px: int, video_fps: float = 30.0) -> list[Variant]:
    """The runs: the video-rate cue at ``video_fps`` under each perturbation, then the 2 fps cue."""
    runs = [Variant(video_fps=video_fps), Variant("tiny.en", video_fps=video_fps),
            Variant(threads=2, video_fps=video_fps)]
    runs += [Variant(jitter_px=px, seed=s, video_fps=video_fps) for s in (1, 2, 3)]
    runs += [Variant("tiny.en", jitter_px=px, seed=4, video_fps=video_fps)]
    before = [Variant(video_fps=0.0), Variant("tiny.en", video_fps=0.0), Variant(jitter_px=px, seed=1, video_fps=0.0)]
    return [runs[0], runs[3], before[0], before[2]] if quick else runs + before


@contextlib.contextmanager
def jittered_boxes(px: int, seed: int) -> Iterator[None]:
    """While open, face perception returns every sighting's box shifted by up to ``px`` pixels."""
    import numpy as np

    import m3agent.perception.faces as faces
    from m3agent.domain import BBox

    if px <= 0:
        yield
        return
    original, rng = faces.perceive_faces, np.random.default_rng(seed)

    def perceive(*args: Any, **kwargs: Any) -> Any:
        tracks = original(*args, **kwargs)
        out = []
        for track in tracks:
            shift = {o.time_s: rng.integers(-px, px + 1, size=2) for o in track.observations}

            def moved(o: Any, shift: dict[float, Any] = shift) -> Any:
                dx, dy = (float(v) for v in shift.get(o.time_s, (0, 0)))
                b = o.bbox
                return dataclasses.replace(o, bbox=BBox(b.x1 + dx, b.y1 + dy, b.x2 + dx, b.y2 + dy))

            out.append(dataclasses.replace(track, observations=tuple(moved(o) for o in track.observations),
                                           best=tuple(moved(o) for o in track.best)))
        return out

    faces.perceive_faces = perceive
    try:
        yield
    finally:
        faces.perceive_faces = original


def measure(clip: str, variant: Variant, workdir: Path) -> dict[str, Any]:
    """Ingest one clip under ``variant``; per voice entity its r with each face side, and the links."""
    from m3agent.identity.linking import LinkRule, decide_links, evidence_from
    from m3agent.media import default_video_id
    from m3agent.settings import load_settings
    from m3agent.store import open_memory

    video = CLIPS[clip]
    workdir.mkdir(parents=True)
    settings = load_settings(shared_dir=SHARED, memory=str(workdir / f"{video.stem}.db"), media={"clip_seconds": 30.0},
                             perception={"asr_model": variant.asr, "threads": variant.threads,
                                         "lip_sync_video_fps": variant.video_fps})
    with jittered_boxes(variant.jitter_px, variant.seed):
        faces, _, spans = pb._ingest_links(settings, video, workdir)
    vid = default_video_id(str(video))
    with open_memory(settings, readonly=True, create=False) as store:
        evidence = evidence_from(store.face_sightings(vid), store.voice_spans(vid), settings.media.frame_fps,
                                 store.mouth_motions(vid))
    side = {face: ("right" if x > 0.5 else "left") for face, x in faces.items()}
    links = decide_links(evidence, LinkRule.from_settings(settings.perception))
    truth = pb._caption_speakers() if clip == "debate" else []
    voices: dict[int, dict[str, Any]] = {}
    for (face, voice), sync in evidence.lip_sync.items():
        row = voices.setdefault(voice, {"speech_s": sync.speech_seconds, "r": {}})
        row["r"][side.get(face, "?")] = sync.r
        if truth:
            speaker = pb._true_speaker(voice, spans, truth)
            row["speaker"] = speaker
            row["side"] = pb.DEBATE_SIDES.get(speaker or "")
    linked = {link.voice_id: side.get(link.face_id, "?") for link in links if link.confidence > 0}
    for voice, row in voices.items():
        row["linked"] = linked.get(voice)
    return {"clip": clip, "variant": variant.name, "voices": {str(k): v for k, v in sorted(voices.items())}}


def verdicts(runs: list[dict[str, Any]]) -> None:
    """Right r, best wrong r and margin per voice. The interview has no labels: there the "right" face is
    the voice's best one (so its margin is never negative) and ``labelled`` is false; which voice goes to
    which face is compared between runs by reading the table (voice ids are per run)."""
    for run in runs:
        for row in run["voices"].values():
            labelled = run["clip"] == "debate"
            right = row.get("side") if labelled else (max(row["r"], key=row["r"].get) if row["r"] else None)
            if right not in row["r"]:
                continue
            wrong = [r for s, r in row["r"].items() if s != right]
            row["right_r"] = row["r"][right]
            row["best_wrong_r"] = max(wrong) if wrong else None
            row["margin"] = round(row["right_r"] - row["best_wrong_r"], 4) if wrong else None
            row["right_side"], row["labelled"] = right, labelled


def run_all(quick: bool, px: int, video_fps: float = 30.0) -> dict[str, Any]:
    from m3agent.bench.environment import environment

    result: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2), "runs": []}
    with tempfile.TemporaryDirectory(prefix="m3agent-bench-lips-") as tmp:
        for n, variant in enumerate(variants(quick, px, video_fps)):
            for clip in CLIPS:
                run = measure(clip, variant, Path(tmp) / f"{clip}-{n}")
                result["runs"].append(run)
                print(json.dumps(run), file=sys.stderr, flush=True)
    verdicts(result["runs"])
    result["environment"] = environment()
    return result


def rtf(video_fps: float) -> dict[str, Any]:
    """Perception RTF on the debate and the long multi-person clip (bench/perception.py) and peak RSS."""
    from m3agent.settings import load_settings

    settings = load_settings(shared_dir=SHARED, perception={"lip_sync_video_fps": video_fps})
    pb.warm_up(settings)
    rows = pb.perception_rtf(settings)
    return {"video_fps": video_fps, "rtf_per_video": rows, "rtf_perception": max(r["rtf"] for r in rows.values()),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
            "load_average": round(os.getloadavg()[0], 2)}


def asd_cost() -> dict[str, Any]:
    """CPU seconds of the active-speaker stage alone (process time: what it adds to the 2 cores, whatever the
    load), per RTF video, with the 2 fps cue and at video rate; the faces it needs are perceived first."""
    import time

    from m3agent.media import iter_clips
    from m3agent.perception.asd_video import active_speaker
    from m3agent.perception.faces import perceive_faces
    from m3agent.settings import load_settings

    rows: dict[str, Any] = {}
    for name in pb.RTF_VIDEOS:
        row = {"media_s": 0.0, "cpu_s_2fps": 0.0, "cpu_s_video": 0.0}
        for clip in iter_clips(pb.MEDIA / "video" / name, load_settings(shared_dir=SHARED).media):
            row["media_s"] += clip.clip.duration_s
            tracks = perceive_faces(clip, load_settings(shared_dir=SHARED).perception)
            for key, fps in (("cpu_s_2fps", 0.0), ("cpu_s_video", 30.0)):
                settings = load_settings(shared_dir=SHARED, perception={"lip_sync_video_fps": fps})
                started = time.process_time()
                active_speaker(clip, tracks, settings)
                row[key] += time.process_time() - started
        rows[Path(name).name] = {k: round(v, 2) for k, v in row.items()}
    return rows


def rtf_pair() -> list[dict[str, Any]]:
    """:func:`rtf` for the 2 fps cue and the video-rate one, each in a fresh process (peak RSS is per process)."""
    out = []
    for fps in ("0", "30"):
        done = subprocess.run([sys.executable, __file__, "--rtf", fps], check=True, capture_output=True, text=True)
        out.append(json.loads(done.stdout))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--quick", action="store_true", help="four runs instead of ten")
    parser.add_argument("--video-fps", type=float, default=30.0,
                        help="frame rate of the video-rate runs (the setting lip_sync_video_fps)")
    parser.add_argument("--jitter-px", type=int, default=3, help="largest box shift of the perturbed runs")
    parser.add_argument("--rtf", type=float, default=None, help="only measure speed with this video fps")
    parser.add_argument("--skip-rtf", action="store_true", help="leave out the speed runs")
    parser.add_argument("--asd-cost", action="store_true", help="only the active-speaker stage's CPU seconds")
    args = parser.parse_args(argv)
    if args.rtf is not None:
        print(json.dumps(rtf(args.rtf)))
        return 0
    if args.asd_cost:
        print(json.dumps(asd_cost()))
        return 0
    result = run_all(args.quick, args.jitter_px, args.video_fps)
    if not args.skip_rtf:
        result["speed"] = rtf_pair()
        result["asd_cost"] = asd_cost()
    print(json.dumps(result, indent=2))
    if not args.no_write:
        write_section(result, "python bench/lip_sync.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [run_line(result["environment"], command, result["load_average"]), "",
             "| clip | run | voice (speaker) | speech s | right r | best wrong r | margin | linked to |",
             "|---|---|---|---|---|---|---|---|"]
    for run in result["runs"]:
        for voice, row in run["voices"].items():
            who = row.get("speaker") or (f"best face {row['right_side']}, no labels" if "right_side" in row else "?")
            lines.append(f"| {run['clip']} | {run['variant']} | {voice} ({who}) | {row['speech_s']} | "
                         f"{row.get('right_r', '-')} | {row.get('best_wrong_r', '-')} | {row.get('margin', '-')} | "
                         f"{row['linked'] or '-'} |")
    for speed in result.get("speed", []):
        per = ", ".join(f"{name} {row['rtf']} (asd {row['stage_s'].get('asd', 0)} s)"
                        for name, row in speed["rtf_per_video"].items())
        lines += ["", f"Speed with lip_sync_video_fps {speed['video_fps']:g}: RTF {per}; peak RSS "
                      f"{speed['peak_rss_gb']} GB (load average {speed['load_average']})."]
    for name, row in result.get("asd_cost", {}).items():
        lines += ["", f"Active-speaker stage alone, CPU seconds ({name}, {row['media_s']} s of media): "
                      f"{row['cpu_s_2fps']} with the 2 fps cue, {row['cpu_s_video']} at video rate."]
    replace_section(REPO / "docs" / "benchmarks.md", "Identity: lip sync at video rate (measured)", "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
