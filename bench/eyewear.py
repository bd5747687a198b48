"""Eyewear benchmark: glasses or not from the bridge line (``m3agent.perception.attributes.eyewear``).

Faces are found by the pipeline's detector: every photo of the face set (its largest face), and the frames of
the shared videos at the media frame rate, each face given the person the layout says (the largest face of a
one-person video, the halves of a split screen, everyone in the Oval Office scene). Labels per person:
``bench/labels/eyewear.tsv``. Scores: per face (glasses / none / uncertain against the label) and per person
(the median over their faces, as an entity's crops are combined in ingest). The videoagent segments are the
held-out check: labelled and scored after the thresholds were fixed on the rest.

    .venv/bin/python bench/eyewear.py [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attributes as shared  # the photo, label and detector helpers of the attribute bench

HEADING = "Person attributes: eyewear"
HELD_OUT = "videoagent segments"
Pick = Callable[[Any, list[Any]], list[tuple[str, Any]]]  # (frame image, boxes) -> (person, box) pairs


def labels() -> dict[str, str]:
    return dict(shared.read_tsv("eyewear.tsv"))


def _largest(name: str) -> Pick:
    return lambda image, boxes: [(name, max(boxes, key=lambda b: b.height))] if boxes else []


def _everyone(name: str) -> Pick:
    return lambda image, boxes: [(name, b) for b in boxes]


def _by_size(front: str, back: str) -> Pick:
    """The largest face is ``front``; faces under half its height are ``back`` (the woman seated behind)."""
    def pick(image: Any, boxes: list[Any]) -> list[tuple[str, Any]]:
        if not boxes:
            return []
        top = max(b.height for b in boxes)
        return [(front if b.height == top else back, b) for b in boxes if b.height == top or b.height < top / 2]
    return pick


def _halves(left: str, right: str, min_share: float) -> Pick:
    def pick(image: Any, boxes: list[Any]) -> list[tuple[str, Any]]:
        width, height = image.shape[1], image.shape[0]
        return [(left if (b.x1 + b.x2) / 2 < width / 2 else right, b) for b in boxes if b.height >= min_share * height]
    return pick


VIDEOS: dict[str, tuple[str, Pick]] = {
    "hdtf_talking_heads/WDA_AlexandriaOcasioCortez_000.mp4": ("videos", _largest("Alexandria Ocasio-Cortez")),
    "hdtf_talking_heads/WDA_KatieHill_000.mp4": ("videos", _largest("Katie Hill")),
    "hdtf_talking_heads/WDA_BobMenendez_000.mp4": ("videos", _largest("Bob Menendez")),
    "hdtf_talking_heads/WDA_EdMarkey0_000.mp4": ("videos", _largest("Ed Markey")),
    "iianet_debate_trump_clinton.mp4": ("videos", _halves("Donald Trump", "Hillary Clinton", 0.18)),
    "visualvoice_noisy_restaurant_1spk.mp4": ("videos", _largest("man in the noisy restaurant")),
    "visualvoice_interview_2spk.mp4": ("videos", _everyone("men of the split-screen interview")),
    "pbs_oval_office_trump_mirziyoyev.mp4": ("videos", _everyone("people in the Oval Office")),
    **{f"videoagent_talking/segment_{n}.mp4": (HELD_OUT, _by_size("woman with glasses (videoagent segments)",
                                                                  "woman behind her (videoagent segments)"))
       for n in (9, 10, 11)},
}


def faces(settings: Any) -> Iterator[tuple[str, str, str, Any, Any]]:
    """(group, where, person, image, box) for every labelled face."""
    detector = shared._detector(settings)
    for path, name, image in shared.photo_faces_of(set(labels())):
        boxes = shared._faces(image, detector, settings)
        if boxes:
            yield "photos", path, name, image, max(boxes, key=lambda b: b.height)
    from m3agent.media import iter_clips

    for video, (group, pick) in VIDEOS.items():
        for clip in iter_clips(shared.VIDEO / video, settings.media):
            for frame in clip.frames:
                for name, box in pick(frame.image, shared._faces(frame.image, detector, settings)):
                    yield group, f"{Path(video).name}@{frame.time_s:.1f}", name, frame.image, box


def run(settings: Any) -> dict[str, Any]:
    from m3agent.perception.attributes.eyewear import combine_eyewear, face_eyewear
    from m3agent.perception.faces.models import face_models

    models, want = face_models(1), labels()
    rows: list[dict[str, Any]] = []
    seconds = 0.0
    for group, where, name, image, box in faces(settings):
        start = time.perf_counter()
        got = face_eyewear(image, box, models)
        seconds += time.perf_counter() - start
        rows.append({"group": group, "where": where, "name": name, "want": want[name], "got": got.value,
                     "score": got.score, "value": got})
    people = []
    for group, name in sorted({(r["group"], r["name"]) for r in rows}):
        mine = [r for r in rows if r["group"] == group and r["name"] == name]
        combined = combine_eyewear([r["value"] for r in mine])
        assert combined is not None
        people.append({"group": group, "name": name, "want": want[name], "got": combined.value,
                       "score": combined.score, "faces": len(mine)})
    groups = sorted({r["group"] for r in rows})
    return {"faces": {g: _tally([r for r in rows if r["group"] == g]) for g in groups},
            "people": people, "ms_per_face": round(1000 * seconds / max(len(rows), 1), 1),
            "errors": [{k: v for k, v in r.items() if k != "value"} for r in rows if r["got"] != r["want"]]}


def _tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    right = sum(r["got"] == r["want"] for r in rows)
    unsure = sum(r["got"] == "uncertain" for r in rows)
    glasses = [r for r in rows if r["want"] == "glasses"]
    return {"faces": len(rows), "correct": right, "uncertain": unsure, "wrong": len(rows) - right - unsure,
            "glasses_faces": len(glasses), "glasses_found": sum(r["got"] == "glasses" for r in glasses),
            "false_glasses": sum(r["got"] == "glasses" and r["want"] == "none" for r in rows)}


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    table = ["| faces | n | correct | uncertain | wrong | glasses found | glasses called on a bare face |",
             "|---|---|---|---|---|---|---|"]
    for group, t in result["faces"].items():
        table.append(f"| {group} | {t['faces']} | {t['correct']} | {t['uncertain']} | {t['wrong']} | "
                     f"{t['glasses_found']}/{t['glasses_faces']} | {t['false_glasses']} |")
    people = ["| set | person | label | decided (median score) | faces |", "|---|---|---|---|---|"]
    people += [f"| {p['group']} | {p['name']} | {p['want']} | {p['got']} ({p['score']}) | {p['faces']} |"
               for p in result["people"]]
    errors = "; ".join(f"{e['where']} {e['name']}: {e['got']} ({e['score']})" for e in result["errors"][:30])
    body = "\n".join([
        run_line(result["environment"], command, result["load_average"]), "",
        "Glasses or not per face, from a thin dark line across the bridge of the nose on a face aligned with "
        "dlib's 68 landmarks (`m3agent.perception.attributes.eyewear`; no packaged network detects glasses). "
        "Labels: `bench/labels/eyewear.tsv` (hand-labelled). The thresholds (glasses from 10, none under 7, "
        "uncertain between) were chosen on the photos and the videos other than the videoagent segments, "
        f"which are the held-out check. {result['ms_per_face']} ms per face (landmarks and alignment).", "",
        *table, "", *people, "", f"Errors (faces): {errors or 'none'}.", "",
        "Few people here wear glasses (Sundar Pichai, Bob Menendez, the man in the restaurant and the woman of the "
        "videoagent segments), so these figures show the rule works on this material, not a general accuracy.",
    ])
    replace_section(Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md", HEADING, body)


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if not shared.MEDIA.is_dir():
        print(f"shared media not found at {shared.MEDIA}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2)}
    result.update(run(load_settings(shared_dir=shared.SHARED)))
    result["environment"] = environment()
    print(json.dumps({k: v for k, v in result.items() if k != "environment"}, indent=2, default=str))
    if not args.no_write:
        write_section(result, "python bench/eyewear.py " + " ".join(argv or sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
