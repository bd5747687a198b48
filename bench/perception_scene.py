"""Scene-stage benchmark: on-screen text, shots, sounds and objects on the shared media, and each stage's speed.

- ``ocr_caption_recall``: share of the debate clip's burned-in caption words
  (``iianet_debate_trump_clinton.captions.tsv``) found in a text line read during the caption's span
  (give or take one frame period).
- ``shot_cut_recall`` / ``shot_extra_cuts``: cuts found at the part boundaries of the 3-minute benchmark
  episode that are visual cuts (consecutive segments of one recording are not), within one frame period;
  extra cuts are those at no part boundary. The Hamilton part has real cutaways inside it (stage, pianist,
  audience: seen on contact sheets of its frames), which land here too, so extra cuts are reported, not scored.
- ``audio_event_hits``: labelled sound spans (``bench/labels/sounds.tsv``) whose class was heard in the span.
- ``object_precision``: detections on labelled frames (``bench/labels/objects.tsv``) that match a labelled object.
- ``rtf_<stage>``: stage wall seconds / media seconds over the episode (after a warm-up), the stages run one
  after another in this process (in ingest they run beside faces and voices); ``cpu_rtf_<stage>``: the
  process's CPU seconds during the stage / media seconds (all threads; load-independent, unlike wall).
- ``detector_runs``: how often text detection and the object detector ran over the episode (and its frame count
  at the media frame rate).

bench/perception.py merges these figures into ``m3agent bench perception --json``.

    .venv/bin/python bench/perception_scene.py [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared"
MEDIA = SHARED / "media"
VIDEO = MEDIA / "video"
LABELS = BENCH / "labels"
DEBATE = VIDEO / "iianet_debate_trump_clinton.mp4"
CAPTIONS = VIDEO / "iianet_debate_trump_clinton.captions.tsv"
SAME_RECORDING = {("segment_9.mp4", "segment_10.mp4"), ("segment_10.mp4", "segment_11.mp4")}
TARGETS = {"ocr_caption_recall": (">=", 0.90), "shot_cut_recall": (">=", 0.90), "audio_event_hits": (">=", 0.75),
           "object_precision": (">=", 0.80)}
_TOKEN = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("’", "'"))


def captions() -> list[tuple[float, float, str]]:
    rows = []
    for line in CAPTIONS.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        start, end, text = line.split("\t")[:3]
        rows.append((float(start), float(end), text))
    return rows


def senses_of(path: Path, settings: Any, cpu: dict[str, float] | None = None
              ) -> tuple[list[Any], float, dict[str, float]]:
    """Scene outputs of every clip of ``path``, the media seconds and summed stage wall seconds (process CPU
    seconds per stage are added to ``cpu`` when given)."""
    from m3agent.media import iter_clips
    from m3agent.perception.scene.senses import perceive_senses

    out, media_s, stages = [], 0.0, {}
    for clip in iter_clips(path, settings.media):
        timings: dict[str, float] = {}
        out.append(perceive_senses(clip, settings.senses, settings.resolved_cache_dir(), timings, cpu))
        media_s += clip.clip.duration_s
        for stage, seconds in timings.items():
            stages[stage] = stages.get(stage, 0.0) + seconds
    return out, media_s, stages


def ocr_caption_recall(settings: Any, slack: float) -> dict[str, Any]:
    senses, _, _ = senses_of(DEBATE, settings)
    lines = [t for s in senses for t in s.texts]
    found = total = 0
    missed = []
    for start, end, text in captions():
        read = {w for t in lines if t.start_s <= end + slack and t.end_s >= start - slack for w in words(t.text)}
        for word in words(text):
            total += 1
            if word in read:
                found += 1
            else:
                missed.append(f"{word}@{start}")
    return {"ocr_caption_recall": round(found / total, 4), "ocr_caption_words": total, "ocr_missed": missed,
            "ocr_lines": [f"{t.start_s:.1f}-{t.end_s:.1f} {t.text!r}" for t in lines]}


def episode_scene(settings: Any) -> dict[str, Any]:
    """Shots against the episode's part boundaries, and per-stage speed over the episode."""
    sys.path.insert(0, str(BENCH))
    import ingest

    cache = settings.resolved_cache_dir() / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    path, timeline = ingest.episode(cache)
    started = time.perf_counter()
    cpu: dict[str, float] = {}
    with counted_runs(settings) as runs:
        senses, media_s, stages = senses_of(path, settings, cpu)
    wall = time.perf_counter() - started
    cuts = [s.start_s for x in senses for s in x.shots if s.cut]
    boundaries = [b["start_s"] for a, b in itertools.pairwise(timeline)
                  if (Path(a["source"]).name, Path(b["source"]).name) not in SAME_RECORDING]
    period = 1.0 / settings.media.frame_fps
    hit = [b for b in boundaries if any(abs(c - b) <= period + 0.05 for c in cuts)]
    extra = [c for c in cuts if all(abs(c - b["start_s"]) > period + 0.05 for b in timeline[1:])]
    result: dict[str, Any] = {
        "shot_cut_recall": round(len(hit) / len(boundaries), 4), "shot_boundaries": len(boundaries),
        "shot_extra_cuts": len(extra), "shot_extra_at": [round(c, 2) for c in extra],
        "episode_media_s": round(media_s, 1), "episode_scene_wall_s": round(wall, 1),
        "episode_skips": [f"{k.stage}: {k.reason}" for x in senses for k in x.skipped],
    }
    for stage, seconds in stages.items():
        result[f"rtf_{stage}"] = round(seconds / media_s, 4)
        result[f"cpu_rtf_{stage}"] = round(cpu.get(stage, 0.0) / media_s, 4)
    result["detector_runs"] = {**runs, "frames": round(media_s * settings.media.frame_fps)}
    return result


@contextlib.contextmanager
def counted_runs(settings: Any) -> Iterator[dict[str, int]]:
    """Counts calls of the text and object detectors while the block runs."""
    from m3agent.perception.scene.detectors import object_detector
    from m3agent.perception.scene.ocr import ocr_model

    cfg = settings.senses
    models = {"text_detections": ocr_model(),
              "object_detections": object_detector(cfg.object_detector, cfg.object_classes, cfg.object_input_size)}
    runs = dict.fromkeys(models, 0)

    def counting(name: str, detect: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            runs[name] += 1
            return detect(*args, **kwargs)
        return wrapper

    for name, model in models.items():
        model.detect = counting(name, model.detect)  # type: ignore[method-assign]
    try:
        yield runs
    finally:
        for model in models.values():
            del model.detect  # type: ignore[attr-defined]


def verdicts(result: dict[str, Any]) -> dict[str, bool]:
    out = {}
    for key, (op, bound) in TARGETS.items():
        if isinstance(result.get(key), (int, float)):
            out[key] = result[key] >= bound if op == ">=" else result[key] <= bound
    return out


def scene_results(settings: Any) -> dict[str, Any]:
    """Every scene figure (what bench/perception.py merges into its JSON)."""
    result: dict[str, Any] = {}
    warm = time.perf_counter()
    senses_of(VIDEO / "hdtf_talking_heads" / "WDA_KatieHill_000.mp4", settings)  # loads every model once
    result["scene_model_load_s"] = round(time.perf_counter() - warm, 1)
    result.update(ocr_caption_recall(settings, slack=1.0 / settings.media.frame_fps))
    result.update(episode_scene(settings))
    result.update(audio_event_hits(settings))
    result.update(object_precision(settings))
    result["scene_targets_met"] = verdicts(result)
    return result


def read_labels(name: str) -> list[dict[str, str]]:
    with (LABELS / name).open(encoding="utf-8") as f:
        return list(csv.DictReader((ln for ln in f if not ln.startswith("#")), delimiter="\t"))


def audio_event_hits(settings: Any) -> dict[str, Any]:
    """Labelled positive spans heard (events of the label cover half the span) and negative spans kept quiet."""
    from m3agent.media import iter_clips
    from m3agent.perception.audio.sounds import hear_sounds

    heard: dict[str, list[Any]] = {}
    hits = positives = alarms = negatives = 0
    rows = []
    for label in read_labels("sounds.tsv"):
        source = label["source"]
        if source not in heard:
            heard[source] = [e for c in iter_clips(MEDIA / source, settings.media)
                             for e in hear_sounds(c.audio, c.audio_rate, c.clip.start_s, settings.senses,
                                                     settings.resolved_cache_dir())]
        start, end = float(label["start_s"]), float(label["end_s"])
        covered = sum(max(0.0, min(end, e.end_s) - max(start, e.start_s))
                      for e in heard[source] if e.label == label["label"])
        if label["present"] == "yes":
            positives += 1
            ok = covered >= 0.5 * (end - start)
            hits += ok
        else:
            negatives += 1
            ok = covered == 0
            alarms += not ok
        rows.append(f"{Path(source).name} {start}-{end} {label['label']} {label['present']}: "
                    f"covered {covered:.1f} s -> {'ok' if ok else 'MISS'}")
    return {"audio_event_hits": round(hits / positives, 4) if positives else None, "audio_event_positives": positives,
            "audio_event_false_alarms": alarms, "audio_event_negatives": negatives, "audio_event_rows": rows}


def object_precision(settings: Any) -> dict[str, Any]:
    """Share of detections (at ``object_min_score``) on labelled frames that a labelled object accounts for."""
    from m3agent.media import iter_clips
    from m3agent.perception.scene.detectors import object_detector

    cfg = settings.senses
    detector = object_detector(cfg.object_detector, cfg.object_classes, cfg.object_input_size)
    frames: dict[str, list[Any]] = {}
    right = wrong = 0
    rows = []
    for label in read_labels("objects.tsv"):
        video = label["video"]
        if video not in frames:
            frames[video] = [f for c in iter_clips(VIDEO / video, settings.media) for f in c.frames]
        frame = min(frames[video], key=lambda f: abs(f.time_s - float(label["time_s"])))
        allowed = {k: int(v) for k, v in (p.split(":") for p in label["objects"].split(",") if p)}
        unsure = {u for u in label["unsure"].split(",") if u}
        counted: dict[str, int] = {}
        found = sorted(detector.detect(frame.image, cfg.object_min_score), key=lambda d: -d.score)
        for det in found:
            if det.label in unsure:
                continue
            counted[det.label] = counted.get(det.label, 0) + 1
            ok = counted[det.label] <= allowed.get(det.label, 0)
            right += ok
            wrong += not ok
        rows.append(f"{Path(video).name}@{frame.time_s:.1f}: " + ", ".join(f"{d.label} {d.score:.2f}" for d in found))
    total = right + wrong
    return {"object_precision": round(right / total, 4) if total else None, "object_detections": total,
            "object_frames": len(rows), "object_rows": rows}


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if not VIDEO.is_dir():
        print(f"shared media not found at {VIDEO}", file=sys.stderr)
        return 2
    settings = load_settings(shared_dir=SHARED)
    result: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2)}
    result.update(scene_results(settings))
    result["environment"] = environment(settings=settings.senses.model_dump(mode="json"))
    print(json.dumps(result, indent=2))
    if not args.no_write:
        write_section(result, "python bench/perception_scene.py " + " ".join(argv or sys.argv[1:]))
    return 0


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [run_line(result["environment"], command, result["load_average"]), "",
             "| metric | value | target | met |", "|---|---|---|---|"]
    for key, (op, bound) in TARGETS.items():
        if key in result:
            met = "yes" if result["scene_targets_met"].get(key) else "no"
            lines.append(f"| {key} | {result[key]} | {op} {bound} | {met} |")
    lines.append(f"| shot_extra_cuts | {result['shot_extra_cuts']} (at {result['shot_extra_at']}) | | |")
    runs = result["detector_runs"]
    lines += ["", f"Per-stage speed over the 3-minute episode ({result['episode_media_s']} s, stages one after "
              "another in one process; model loading "
              f"{result['scene_model_load_s']} s before timing). Wall RTF = stage wall seconds / media seconds "
              "(depends on the load); CPU RTF = the process's CPU seconds during the stage / media seconds "
              f"(load-independent). Detector runs: text {runs['text_detections']}, objects "
              f"{runs['object_detections']}, of {runs['frames']} frames.", "",
              "| stage | wall RTF | CPU RTF |", "|---|---|---|"]
    lines += [f"| {stage} | {result[f'rtf_{stage}']} | {result.get(f'cpu_rtf_{stage}', '')} |"
              for stage in ("shots", "text", "objects", "sounds") if f"rtf_{stage}" in result]
    lines += ["", "Text detection runs at shot starts, where a followed line changed or strokes appeared on flat "
              "ground, and periodically only while the view changes; the object detector reuses its findings for "
              "frames showing the same view (perception/scene/screen_text.py, perception/scene/objects.py). "
              "Laughter is not labelled and not heard: on the Hot Ones interview YAMNet's laughter classes stay at or "
              "below 0.011 "
              "in every 0.96 s window but one (0.094 at 54.2 s, where Speech also drops to 0.094), the same peak "
              "as on the snow video; see perception/audio/sounds.py."]
    replace_section(REPO / "docs" / "benchmarks.md", "Perception: scene", "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
