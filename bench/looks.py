"""Clothes colour (``m3agent.perception.attributes.clothes``) against the catalogue's hand-written looks.

The generated episodes' catalogue (``src/m3agent/bench/data/catalogue_v1.json``) describes every person of every
piece as a person would ("blonde woman in a dark jacket", "grey-haired man with glasses"). A look that names a
clothing colour is a label: a colour word before suit / jacket / sweater / T-shirt / dress (black counts as dark;
navy is not written, so a blue suit is blue). Faces are
found by the pipeline's detector in the piece's frames (2 fps) or its photo, and given to people by the layout:
the largest face of a one-person piece, the halves of a left / right pair. Scores per face and per person (the
vote over their faces, as ingest combines an entity's crops). The colour table was written before this bench was
run and is not fitted to it.

    .venv/bin/python bench/looks.py [--no-write]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attributes as shared  # the detector helpers of the attribute bench

HEADING = "Person attributes: clothes"
GARMENTS = ("suit", "jacket", "sweater", "t-shirt", "dress", "shirt")
COLOUR_WORDS = {"dark": "dark", "black": "dark", "white": "white", "blue": "blue", "grey": "grey", "red": "red"}


def label_of(look: str) -> str | None:
    """The clothes colour a look names, None when it names none."""
    words = look.lower().replace(",", " ").split()
    return next((COLOUR_WORDS[before] for before, word in itertools.pairwise(words)
                 if word in GARMENTS and before in COLOUR_WORDS), None)


def people() -> Iterator[tuple[dict[str, Any], dict[str, Any], str]]:
    """(piece, person, clothes label) of every catalogue person whose look names a clothing colour, in a piece
    whose layout gives faces to people (one person, or a left / right pair)."""
    from importlib import resources

    raw = json.loads((resources.files("m3agent") / "bench" / "data" / "catalogue_v1.json").read_text())
    for piece in raw["pieces"]:
        seen = [p for p in piece["people"] if p["position"] in ("left", "right", "center")]
        if piece["kind"] == "dark" or not seen or (len(seen) != len(piece["people"]) and len(seen) != 1):
            continue
        for person in seen:
            label = label_of(person["look"])
            if label:
                yield piece, person, label


def faces(piece: dict[str, Any], person: dict[str, Any], settings: Any) -> Iterator[tuple[str, Any, Any]]:
    """(where, image, box) of the person's faces in the piece."""
    from m3agent.media import iter_clips
    from m3agent.perception.faces import load_rgb

    detector = shared._detector(settings)
    if piece["kind"] == "still":
        images = [(piece["image"], load_rgb(shared.MEDIA / piece["image"]))]
    else:
        images = [(f"{Path(piece['video']).name}@{f.time_s:.1f}", f.image)
                  for clip in iter_clips(shared.MEDIA / piece["video"], settings.media) for f in clip.frames]
    single = len([p for p in piece["people"] if p["position"] in ("left", "right", "center")]) == 1
    for where, image in images:
        boxes = shared._faces(image, detector, settings)
        if not boxes:
            continue
        if single:
            yield where, image, max(boxes, key=lambda b: b.height)
            continue
        width = image.shape[1]
        top = max(b.height for b in boxes)
        side = [b for b in boxes if b.height >= top / 2 and ((b.x1 + b.x2) / 2 < width / 2) == (
            person["position"] == "left")]
        if side:
            yield where, image, max(side, key=lambda b: b.height)


def run(settings: Any) -> dict[str, Any]:
    from m3agent.perception.attributes.clothes import combine_clothes, face_clothes

    persons, faces_seen, named, seconds = [], 0, 0, 0.0
    for piece, person, want in people():
        mine = []
        for _where, image, box in faces(piece, person, settings):
            start = time.perf_counter()
            got = face_clothes(image, box)
            seconds += time.perf_counter() - start
            faces_seen += 1
            mine += [got] if got is not None else []
        named += len(mine)
        vote = combine_clothes(mine)
        persons.append({"piece": piece["id"], "look": person["look"], "want": want, "faces": len(mine),
                        "got": vote.colour if vote else None, "share": vote.confidence if vote else None,
                        "right_faces": sum(c.colour == want for c in mine)})
    right = sum(p["got"] == p["want"] for p in persons)
    silent = sum(p["got"] is None for p in persons)
    return {"people": persons, "tally": {"labelled": len(persons), "right": right, "not named": silent,
                                         "wrong": len(persons) - right - silent},
            "faces": faces_seen, "faces_named": named, "faces_right": sum(p["right_faces"] for p in persons),
            "ms_per_face": round(1000 * seconds / max(faces_seen, 1), 2)}


def write_section(result: dict[str, Any], command: str, load_average: float) -> None:
    from m3agent.bench.environment import environment
    from m3agent.bench.results_io import replace_section, run_line

    t = result["tally"]
    lines = [run_line(environment(), command, load_average), "",
             "Labels: the catalogue's looks (see `bench/looks.py`); a person's value is the vote of their faces "
             "(named by at least half of the faces with the chest in view).", "",
             "| people labelled | right | not named | wrong | faces | chest in view | faces right |",
             "|---|---|---|---|---|---|---|",
             f"| {t['labelled']} | {t['right']} | {t['not named']} | {t['wrong']} | {result['faces']} | "
             f"{result['faces_named']} | {result['faces_right']} |", "",
             "| piece | look | label | measured (share of faces) | faces with the chest in view |",
             "|---|---|---|---|---|"]
    lines += [f"| {p['piece']} | {p['look']} | {p['want']} | {p['got'] or '–'} ({p['share'] or '–'}) | {p['faces']} |"
              for p in result["people"]]
    lines += ["", f"{result['ms_per_face']} ms a face."]
    replace_section(shared.REPO / "docs" / "benchmarks.md", HEADING, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    load_average = round(os.getloadavg()[0], 2)
    result = run(load_settings())
    print(json.dumps(result, indent=1))
    if not args.no_write:
        write_section(result, "python bench/looks.py", load_average)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
