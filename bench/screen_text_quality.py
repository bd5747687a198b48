"""On-screen text quality: the lines the screen-text stage keeps on the shared videos, against ground truth.

The real stage (shots, then :func:`m3agent.perception.scene.screen_text.read_screen_text`) runs on every video under
``../shared/media/video`` and on the 3-minute episode of bench/ingest.py (the same clips letterboxed to
640x360, so smaller text). Per video:

- ``lines``: lines kept (each becomes one ``On screen …`` memory);
- ``caption recall``: ground-truth captions (the debate's ``captions.tsv``) matched by a kept line;
- ``sign recall``: hand-labelled signs (``bench/labels/screen_text.tsv``) matched by a kept line;
- ``fragments``: kept lines that match no caption, sign or optional label (pieces of hidden lettering,
  a logo split into words, garbled reads);
- ``repeats``: kept lines of a clip matching a label that another kept line of that clip already matched
  (one text remembered twice).

A kept line matches a label when their spans overlap (give or take one frame period) and their letters and
digits (lower case, spaces ignored) are at least ``MATCH`` alike (difflib ratio) to one of the label's
alternatives. In the episode, each part's labels move by the part's start.

``--baseline REV`` runs the stage as it is at git revision REV too (``git archive REV src`` into a temporary
folder, this script run on it in a subprocess) for a before/after table; ``--write`` puts the table into the
section "Perception: on-screen text" of docs/benchmarks.md.

    .venv/bin/python bench/screen_text_quality.py [--baseline HEAD] [--no-episode] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import difflib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared"
VIDEO = SHARED / "media" / "video"
LABELS = BENCH / "labels" / "screen_text.tsv"
DEBATE = "iianet_debate_trump_clinton.mp4"
EPISODE = "episode (3 min, 640x360)"
MATCH = 0.8
SECTION = "Perception: on-screen text"


class Label(NamedTuple):
    """Text on screen from ``start_s`` to ``end_s``: a caption, a sign, or optional text; ``texts`` are alternatives."""

    kind: str
    start_s: float
    end_s: float
    texts: tuple[str, ...]


class Line(NamedTuple):
    """One kept line as the stage gave it (``clip``: index of the clip of the video it was read in)."""

    clip: int
    start_s: float
    end_s: float
    text: str
    confidence: float
    sightings: int


def letters(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def matches(line: Line, label: Label, slack: float) -> bool:
    """Whether ``line`` was read while ``label`` was shown and reads like one of its alternatives."""
    if line.start_s > label.end_s + slack or line.end_s < label.start_s - slack:
        return False
    key = letters(line.text)
    return any(difflib.SequenceMatcher(None, key, letters(t)).ratio() >= MATCH for t in label.texts)


def captions(path: Path) -> list[Label]:
    """The rows of a ``captions.tsv`` (start, end, text, … tab-separated; ``#`` comments)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            start, end, text = line.split("\t")[:3]
            rows.append(Label("caption", float(start), float(end), (text,)))
    return rows


def labels_of(video: str) -> list[Label]:
    """Captions (from the ``captions.tsv`` beside the video) and hand labels of ``video`` (relative to VIDEO)."""
    out = captions(VIDEO / video.replace(".mp4", ".captions.tsv")) if (
        VIDEO / video.replace(".mp4", ".captions.tsv")).exists() else []
    with LABELS.open(encoding="utf-8") as f:
        rows = csv.DictReader((ln for ln in f if not ln.startswith("#")), delimiter="\t")
        out += [Label(r["kind"], float(r["start_s"]), float(r["end_s"]), tuple(r["text"].split("|")))
                for r in rows if r["video"] == video]
    return out


def episode_labels(timeline: list[dict[str, Any]]) -> list[Label]:
    """Each part's labels moved by the part's start and cut at its end."""
    out = []
    for part in timeline:
        video = str(Path(part["source"]).resolve().relative_to(VIDEO.resolve()))
        for label in labels_of(video):
            start = part["start_s"] + label.start_s
            if start < part["end_s"]:
                out.append(Label(label.kind, start, min(part["end_s"], part["start_s"] + label.end_s), label.texts))
    return out


def score(lines: list[Line], labels: list[Label], slack: float) -> dict[str, Any]:
    """Lines kept, caption and sign recall, fragments and repeats (see the module docstring)."""
    hit = [[k for k, label in enumerate(labels) if matches(line, label, slack)] for line in lines]
    matched = {k for ks in hit for k in ks}
    per_clip: dict[tuple[int, int], int] = {}
    for line, ks in zip(lines, hit, strict=True):
        for k in ks:
            per_clip[(line.clip, k)] = per_clip.get((line.clip, k), 0) + 1

    def recall(kind: str) -> list[int]:
        wanted = [k for k, label in enumerate(labels) if label.kind == kind]
        return [sum(1 for k in wanted if k in matched), len(wanted)]

    return {"lines": len(lines), "captions": recall("caption"), "signs": recall("sign"),
            "fragments": [line.text for line, ks in zip(lines, hit, strict=True) if not ks],
            "repeats": sum(n - 1 for n in per_clip.values()),
            "kept": [f"{line.start_s:.1f}-{line.end_s:.1f} {line.text!r} (conf {line.confidence:.3f}, "
                     f"{line.sightings} read)" for line in lines]}


def read_lines(path: Path, settings: Any) -> list[Line]:
    """The kept lines of every clip of ``path`` (the stage as ingest runs it: shots, then screen text)."""
    from m3agent.media import iter_clips
    from m3agent.perception.scene.screen_text import read_screen_text
    from m3agent.perception.scene.shots import detect_shots

    out = []
    for clip in iter_clips(path, settings.media):
        shots = detect_shots(clip.frames, clip.clip, settings.senses.shot_threshold)
        out += [Line(clip.clip.index, t.start_s, t.end_s, t.text, t.confidence, t.sightings)
                for t in read_screen_text(clip.frames, shots, settings.senses)]
    return out


def videos(episode: bool) -> list[tuple[str, Path]]:
    """(name, path) of every shared video, and the episode (built on first use) unless ``episode`` is False."""
    out = [(str(p.relative_to(VIDEO)), p) for p in sorted(VIDEO.rglob("*.mp4"))]
    if episode:
        out.append((EPISODE, episode_path()[0]))
    return out


def episode_path() -> tuple[Path, list[dict[str, Any]]]:
    from m3agent.settings import Settings

    sys.path.insert(0, str(BENCH))
    import ingest

    cache = Settings().resolved_cache_dir() / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    path, timeline = ingest.episode(cache)
    return Path(path), timeline


def all_lines(episode: bool, judged: dict[str, list[Any]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Kept lines per video, as plain data (what the baseline subprocess prints); with ``judged``, also every
    line the quality floor judged, per video (:func:`floor_inputs`)."""
    from m3agent.settings import load_settings

    settings = load_settings(shared_dir=SHARED)
    out = {}
    for name, path in videos(episode):
        with floor_inputs() as seen:
            out[name] = [line._asdict() for line in read_lines(path, settings)]
        if judged is not None:
            judged[name] = seen
    return out


@contextlib.contextmanager
def floor_inputs() -> Iterator[list[Any]]:
    """The ScreenText lines given to the quality floor (``screen_text.worth_keeping``) while the block runs;
    none with a stage that has no such floor (the baseline)."""
    from m3agent.perception.scene import screen_text

    seen: list[Any] = []
    floor = getattr(screen_text, "worth_keeping", None)
    if floor is None:
        yield seen
        return

    def recording(line: Any) -> bool:
        seen.append(line)
        return bool(floor(line))

    screen_text.worth_keeping = recording
    try:
        yield seen
    finally:
        screen_text.worth_keeping = floor


def margins(judged: dict[str, list[Any]], slack: float) -> dict[str, Any]:
    """What separates the labelled lines from the fragments at the quality floor: for the lines of words
    (``MIN_CHARS`` and readable), the most sightings, confidence and common words a fragment had, and each
    caption or sign line with its figures (lines matching only optional text are left out). Clips are not told
    apart: only the figures matter here."""
    from m3agent.perception.scene.screen_text import MIN_CHARS, worth_keeping
    from m3agent.perception.scene.words import common_words, readable

    timeline = episode_path()[1] if EPISODE in judged else []
    fragments, labelled = [], []
    for name, lines in judged.items():
        labels = episode_labels(timeline) if name == EPISODE else labels_of(name)
        for t in lines:
            if sum(c.isalnum() for c in t.text) < MIN_CHARS or not readable(t.text):
                continue
            line = Line(0, t.start_s, t.end_s, t.text, t.confidence, t.sightings)
            kinds = {label.kind for label in labels if matches(line, label, slack)}
            if kinds == {"optional"}:
                continue  # real text, neither wanted nor a fragment
            kinds.discard("optional")
            row = {"video": name, "text": t.text, "sightings": t.sightings, "confidence": round(t.confidence, 3),
                   "common_words": common_words(t.text), "kept": worth_keeping(t), "label": "/".join(sorted(kinds))}
            (labelled if kinds else fragments).append(row)
    top = {k: max((r[k] for r in fragments), default=None) for k in ("sightings", "confidence", "common_words")}
    return {"fragment_max": top, "fragments": fragments, "labelled": labelled}


def baseline_lines(rev: str, episode: bool) -> dict[str, list[dict[str, Any]]]:
    """:func:`all_lines` with the package as it is at git revision ``rev`` (run in a subprocess)."""
    with tempfile.TemporaryDirectory(prefix="m3agent-baseline-") as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], check=True,
                                 capture_output=True).stdout
        archive_path = Path(tmp) / "src.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src")}
        args = [sys.executable, __file__, "--lines-only"] + ([] if episode else ["--no-episode"])
        out = subprocess.run(args, check=True, capture_output=True, text=True, env=env, cwd=tmp).stdout
    return dict(json.loads(out))


def evaluate(lines: dict[str, list[dict[str, Any]]], slack: float) -> dict[str, dict[str, Any]]:
    """:func:`score` of each video's lines against its labels."""
    timeline = episode_path()[1] if EPISODE in lines else []
    out = {}
    for name, rows in lines.items():
        labels = episode_labels(timeline) if name == EPISODE else labels_of(name)
        out[name] = score([Line(**r) for r in rows], labels, slack)
    return out


def shown(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]] | None) -> list[str]:
    """Videos worth a row: a line kept (before or after) or something labelled."""
    def kept(result: dict[str, dict[str, Any]] | None, name: str) -> int:
        return int(result[name]["lines"]) if result is not None and name in result else 0

    return [n for n, r in after.items() if kept(after, n) or kept(before, n) or r["captions"][1] or r["signs"][1]]


def cell(key: str, rows: list[dict[str, Any]]) -> str:
    """One figure over ``rows`` (per-video results): ``got/total`` for recalls, a count otherwise."""
    if key in ("captions", "signs"):
        got, total = (sum(r[key][i] for r in rows) for i in (0, 1))
        return f"{got}/{total}" if total else "–"
    return str(sum(len(r[key]) if key == "fragments" else r[key] for r in rows))


def table(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]] | None) -> list[str]:
    """Markdown rows per video (``before → after`` where a baseline ran) and a total row over all videos."""
    keys = ("lines", "captions", "signs", "fragments", "repeats")

    def row(name: str, names: list[str]) -> str:
        now = [cell(k, [after[n] for n in names]) for k in keys]
        if before is not None:
            then = [cell(k, [before[n] for n in names if n in before]) for k in keys]
            now = [f"{a} → {b}" for a, b in zip(then, now, strict=True)]
        return "| " + " | ".join([name, *now]) + " |"

    out = ["| video | lines kept | caption recall | sign recall | fragments | repeats |", "|---|---|---|---|---|---|"]
    out += [row(name, [name]) for name in shown(after, before)]
    out.append(row("**all**", list(after)))
    return out


def floor_lines(floor: dict[str, Any]) -> list[str]:
    """The floor's margins in words: the most a fragment reached, and what let each labelled line through."""
    from m3agent.perception.scene.screen_text import PERSISTENT, SENTENCE_WORDS, SURE

    top = floor["fragment_max"]
    kept = [r for r in floor["labelled"] if r["kept"]]
    dropped = [repr(r["text"]) for r in floor["labelled"] if not r["kept"]]
    clean = [r["confidence"] for r in kept if r["confidence"] >= SURE]
    sentences = [r for r in kept if r["confidence"] < SURE and r["sightings"] < PERSISTENT]
    judged = len(floor["fragments"]) + len(floor["labelled"])
    head = (f"Quality floor (perception/scene/screen_text.py: {PERSISTENT} detections, confidence {SURE} or "
            f"{SENTENCE_WORDS} common words), over the {judged} lines of words (4+ characters, readable) it judged: ")
    if top["sightings"] is None:
        frag = "no fragment among them; "
    else:
        frag = (f"the {len(floor['fragments'])} fragments among them reached at most {top['sightings']} sightings, "
                f"mean confidence {top['confidence']} and {top['common_words']} common words; ")
    return [head + frag + f"of the {len(kept)} caption and sign lines kept, {len(clean)} were read cleanly and "
            f"{len(sentences)} passed as sentences only (fewest common words "
            f"{min((r['common_words'] for r in sentences), default='–')}, lowest confidence "
            f"{min((r['confidence'] for r in sentences), default='–')}); caption and sign lines dropped: "
            f"{', '.join(dropped) or 'none'}."]


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    after, before = result["after"], result.get("before")
    quiet = [n for n in after if n not in shown(after, before)]
    lines = [run_line(result["environment"], command, result["load_average"]), "", *table(after, before), ""]
    if quiet:
        lines.append(f"No line kept and no caption or sign labelled: {', '.join(quiet)}.")
    if before is not None:
        gone = [repr(t) for r in before.values() for t in r["fragments"]]
        lines.append(f"Fragments before ({result['baseline']}): {', '.join(gone) or 'none'}.")
    left = [repr(t) for r in after.values() for t in r["fragments"]]
    lines.append(f"Fragments now: {', '.join(left) or 'none'}.")
    lines += ["", *floor_lines(result["floor"])]
    lines += ["",
              "A kept line matches a caption (the debate's captions.tsv) or a hand-labelled sign "
              "(bench/labels/screen_text.tsv) when their spans overlap, give or take one frame period, and their "
              f"letters and digits are {MATCH} alike; a fragment matches nothing labelled (optional text, such as a "
              "folded flag or a T-shirt print, is neither required nor a fragment); a repeat is a second kept line "
              "of one clip for one label. The stage keeps one line per text and shot, joins lines shown together, "
              "folds a line into a longer one it is part of, and keeps lines of words that pass the floor. "
              "The episode is the 3-minute one of bench/ingest.py (its clips letterboxed to 640x360); a text "
              "shown across a clip boundary is read in each clip (the PBS logo at 47-64 s: two memories)."]
    replace_section(REPO / "docs" / "benchmarks.md", SECTION, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REV", help="also run the stage as it is at this git revision")
    parser.add_argument("--no-episode", action="store_true", help="only the shared videos, not the 3-minute episode")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--lines-only", action="store_true", help=argparse.SUPPRESS)  # the baseline subprocess
    args = parser.parse_args(argv)
    if not VIDEO.is_dir():
        print(f"shared media not found at {VIDEO}", file=sys.stderr)
        return 2
    if args.lines_only:
        print(json.dumps(all_lines(not args.no_episode)))
        return 0
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    settings = load_settings(shared_dir=SHARED)
    slack = 1.0 / settings.media.frame_fps
    result: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2)}
    if args.baseline:
        result["baseline"] = args.baseline
        result["before"] = evaluate(baseline_lines(args.baseline, not args.no_episode), slack)
    judged: dict[str, list[Any]] = {}
    result["after"] = evaluate(all_lines(not args.no_episode, judged), slack)
    result["floor"] = margins(judged, slack)
    result["environment"] = environment(settings=settings.senses.model_dump(mode="json"))
    print(json.dumps(result, indent=2))
    print("\n".join(table(result["after"], result.get("before"))))
    if args.write:
        write_section(result, "python bench/screen_text_quality.py " + " ".join(argv or sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
