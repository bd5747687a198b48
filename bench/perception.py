"""Perception benchmark: one JSON object with every perception target of the perception issue.

Face clustering and split-screen identity come from bench/perception_faces.py, diarization and
ASR from bench/perception_audio.py; this script adds cross-clip identity on the four HDTF talking
heads ingested into one memory, voice entities per true speaker (talking heads, debate, AMI/pyannote and
the benchmark episode), and the speed of full perception (decode + faces + voices, run as
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
HEARD_S = 1.0  # seconds of one person's speech that count as being heard in a voice entity
HEADS = ["WDA_AlexandriaOcasioCortez_000", "WDA_KatieHill_000", "WDA_BobMenendez_000", "WDA_EdMarkey0_000"]
RTF_VIDEOS = ["iianet_debate_trump_clinton.mp4", "long_multi_person/videollava_sample_demo_16_snow.mp4"]
TARGETS = {
    "face_pairwise_precision": (">=", 0.98), "face_pairwise_recall": (">=", 0.90),
    "der_pyannote_sample": ("<=", 0.20), "der_ami_1min": ("<=", 0.40), "wer_asr": ("<=", 0.08),
    "face_video_precision": (">=", 0.99), "face_video_recall": (">=", 0.95),
    "rtf_perception": ("<=", 0.5), "peak_rss_gb": ("<=", 3.0),
    "av_links_debate": ("==", True), "av_links_interview": ("==", True),
    "cross_video_trump_joined": ("==", True), "cross_video_false_merges": ("<=", 0),
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
    return {"identity_talking_heads": ok, "heads_voice_entities_per_speaker": round(len(voices) / len(HEADS), 2),
            "face_entities": len(faces), "voice_entities": len(voices),
            "links": len(links), "correct_links": correct}


DEBATE = MEDIA / "video" / "iianet_debate_trump_clinton.mp4"
INTERVIEW = MEDIA / "video" / "visualvoice_interview_2spk.mp4"
DEBATE_SIDES = {"Hillary Clinton": "right", "Donald Trump": "left"}  # media/README.md


def _ingest_links(settings: Any, video: Path, workdir: Path) -> tuple[dict[int, float], list[Any], list[Any]]:
    """Ingest one video (perception only); each face entity's mean box centre x as a share of the frame
    width, the accepted links, and the voice spans."""
    from m3agent.domain import EntityKind
    from m3agent.media import default_video_id
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory

    run = settings.model_copy(update={"memory": str(workdir / f"{video.stem}.db")})
    ingest_source(run, str(video), perception_only=True, show_progress=False)
    vid = default_video_id(str(video))
    with open_memory(run, readonly=True, create=False) as store:
        width = max(f.bbox.x2 for f in store.faces(vid))
        centre: dict[int, list[float]] = {}
        for face in store.faces(vid):
            if face.entity_id is not None:
                centre.setdefault(face.entity_id, []).append((face.bbox.x1 + face.bbox.x2) / 2 / width)
        faces = {e.id: sum(centre.get(e.id, [0.5])) / max(len(centre.get(e.id, [])), 1)
                 for e in store.entities(EntityKind.FACE)}
        links = store.links(min_confidence=store.link_confidence)
        spans = store.voice_spans(vid)
    return faces, links, spans


def _caption_speakers() -> list[tuple[float, float, str]]:
    rows = []
    for line in DEBATE.with_suffix(".captions.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        start, end, _, speaker = line.split("\t")
        if speaker in DEBATE_SIDES:
            rows.append((float(start), float(end), speaker))
    return rows


def _true_speaker(voice_id: int, spans: list[Any], truth: list[tuple[float, float, str]]) -> str | None:
    """The captioned speaker who overlaps the voice's speech most (None when no attributed caption does)."""
    overlap: dict[str, float] = {}
    for start, end, voice in spans:
        if voice == voice_id:
            for t0, t1, speaker in truth:
                overlap[speaker] = overlap.get(speaker, 0.0) + max(0.0, min(end, t1) - max(start, t0))
    best = max(overlap.items(), key=lambda kv: kv[1], default=(None, 0.0))
    return best[0] if best[1] > 0 else None


def av_links_debate(settings: Any, workdir: Path) -> dict[str, Any]:
    """Debate clip: every accepted link joins a voice to its speaker's face side, and both speakers are linked."""
    faces, links, spans = _ingest_links(settings, DEBATE, workdir)
    truth = _caption_speakers()
    rows, linked = [], set()
    for link in links:
        speaker = _true_speaker(link.voice_id, spans, truth)
        side = "right" if faces.get(link.face_id, 0.5) > 0.5 else "left"
        ok = speaker is not None and DEBATE_SIDES[speaker] == side
        linked.update({speaker} if ok else set())
        rows.append({"face": link.face_id, "side": side, "voice": link.voice_id, "speaker": speaker,
                     "confidence": link.confidence, "correct": ok})
    all_ok = bool(rows) and all(r["correct"] for r in rows) and linked == set(DEBATE_SIDES)
    voices = {v for _, _, v in spans}
    return {"av_links_debate": all_ok, "av_links_debate_detail": rows, "debate_false_joins": false_joins(spans, truth),
            "debate_voice_entities_per_speaker": round(len(voices) / len(DEBATE_SIDES), 2),
            "debate_entities": {"faces": len(faces), "voices": len(voices)}}


def av_links_interview(settings: Any, workdir: Path) -> dict[str, Any]:
    """Split-screen interview (no labels): two voices linked to two different faces, each face to one voice."""
    faces, links, spans = _ingest_links(settings, INTERVIEW, workdir)
    per_face: dict[int, set[int]] = {}
    for link in links:
        per_face.setdefault(link.face_id, set()).add(link.voice_id)
    consistent = len(per_face) >= 2 and all(len(v) == 1 for v in per_face.values())
    return {"av_links_interview": consistent,
            "av_links_interview_detail": {str(f): sorted(v) for f, v in per_face.items()},
            "interview_entities": {"faces": len(faces), "voices": len({v for _, _, v in spans})}}


OVAL = MEDIA / "video" / "pbs_oval_office_trump_mirziyoyev.mp4"
DIAR = MEDIA / "audio" / "diarization"
AUDIO_SPEAKERS = {"ami_1min": ("ami_mixture_1min/mixture.wav", "ami_mixture_1min/mixture.rttm", "mixture"),
                  "pyannote_sample": ("pyannote_sample/sample.wav", "pyannote_sample/sample.rttm", "sample")}


def voice_entities_audio(settings: Any, workdir: Path) -> dict[str, Any]:
    """Voice entities per true speaker (RTTM) after ingesting each labelled recording into its own memory."""
    from m3agent.domain import EntityKind
    from m3agent.media import default_video_id
    from m3agent.perception.audio.scoring import read_rttm
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory

    out = {}
    for name, (wav, rttm, file_id) in AUDIO_SPEAKERS.items():
        run = settings.model_copy(update={"memory": str(workdir / f"{name}.db")})
        ingest_source(run, str(DIAR / wav), perception_only=True, show_progress=False)
        with open_memory(run, readonly=True, create=False) as store:
            voices = len(store.entities(EntityKind.VOICE))
            spans = store.voice_spans(default_video_id(str(DIAR / wav)))
        truth = [(t.start_s, t.end_s, t.speaker) for t in read_rttm(DIAR / rttm, file_id)]
        out[name] = {"voice_entities": voices, "speakers": len({s for _, _, s in truth}),
                     "false_joins": false_joins(spans, truth)}
    return out


JOIN_SHARE = 0.25


def false_joins(spans: list[tuple[float, float, int]], truth: list[tuple[float, float, str]]) -> int:
    """Voice entities in which two true speakers each hold at least ``HEARD_S`` seconds and ``JOIN_SHARE`` of
    the entity's speech that only one person speaks (overlapped speech counts for nobody); a second of a
    neighbour's words at a mis-timed segment edge is not a join, another person's turns are."""
    import numpy as np

    end = max([e for _, e, _ in spans] + [e for _, e, _ in truth] + [0.0])
    grid = np.arange(0.0, end, 0.01)
    people = sorted({s for _, _, s in truth})
    talking = np.zeros((len(people), len(grid)), dtype=bool)
    for start, stop, speaker in truth:
        talking[people.index(speaker), (grid >= start) & (grid < stop)] = True
    alone = talking.sum(axis=0) == 1
    joins = 0
    for voice in sorted({v for _, _, v in spans}):
        mine = np.zeros(len(grid), dtype=bool)
        for start, stop, owner in spans:
            if owner == voice:
                mine |= (grid >= start) & (grid < stop)
        seconds = (talking & (mine & alone)).sum(axis=1) * 0.01
        total = float(seconds.sum())
        joins += int(sum(1 for s in seconds if s >= HEARD_S and s >= JOIN_SHARE * total) > 1)
    return joins


def voice_entities_episode(settings: Any, workdir: Path) -> dict[str, Any]:
    """Voice entities per true speaker on the ~3-minute benchmark episode (bench/identity_voices.py)."""
    sys.path.insert(0, str(BENCH))
    import identity_voices

    return identity_voices.episode_voice_entities(settings, workdir)


def cross_video_identity(settings: Any, workdir: Path) -> dict[str, Any]:
    """Debate then Oval Office into one memory: is Trump one face entity, and is nobody else joined?

    Trump is the debate's left face and, in the Oval Office clip, the face in the right third during
    the first 6 s (checked by eye); any other entity seen in both videos is a false merge.
    """
    from m3agent.media import default_video_id
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory

    run = settings.model_copy(update={"memory": str(workdir / "cross.db")})
    for video in (DEBATE, OVAL):
        ingest_source(run, str(video), perception_only=True, show_progress=False)
    seen: dict[int, set[str]] = {}
    with open_memory(run, readonly=True, create=False) as store:
        trump: dict[str, set[int]] = {}
        for video, is_trump in ((DEBATE, lambda x, t: x < 0.5), (OVAL, lambda x, t: x > 0.66 and t < 6.0)):
            vid = default_video_id(str(video))
            faces = store.faces(vid)
            width = max(f.bbox.x2 for f in faces)
            for face in faces:
                if face.entity_id is None:
                    continue
                seen.setdefault(face.entity_id, set()).add(vid)
                if is_trump((face.bbox.x1 + face.bbox.x2) / 2 / width, face.time_s):
                    trump.setdefault(vid, set()).add(face.entity_id)
    shared = {e for e, videos in seen.items() if len(videos) > 1}
    joined = bool(set.intersection(*trump.values()) & shared) if len(trump) == 2 else False
    false_merges = len(shared - set.intersection(*trump.values())) if len(trump) == 2 else len(shared)
    return {"cross_video_identity": f"{int(joined)}/1", "cross_video_trump_joined": joined,
            "cross_video_false_merges": false_merges, "cross_video_face_entities": len(seen)}


def perception_rtf(settings: Any) -> dict[str, Any]:
    """Wall seconds / media seconds of decode + perception, the way ingest perceives clips (the next clip decoded
    while one is perceived: :func:`m3agent.pipeline.perceived_ahead`)."""
    from m3agent.media import iter_clips
    from m3agent.pipeline import perceived_ahead

    rows: dict[str, Any] = {}
    for name in RTF_VIDEOS:
        started, media_s = time.perf_counter(), 0.0
        stages: dict[str, float] = {}
        with perceived_ahead(iter_clips(MEDIA / "video" / name, settings.media), settings) as perceived:
            for clip, perception in perceived:
                if isinstance(perception, Exception):
                    raise perception
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
        value = result.get(key)
        if op == "==" and key in result:
            out[key] = value == bound
        elif isinstance(value, (int, float)):
            out[key] = value >= bound if op == ">=" else value <= bound
    return out


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--skip-quality", action="store_true", help="only identity and speed")
    parser.add_argument("--skip-scene", action="store_true", help="leave out the scene stages (text, objects, ...)")
    parser.add_argument("--links-only", action="store_true", help="only the face-voice link checks (quick)")
    args = parser.parse_args(argv)
    if not MEDIA.is_dir():
        print(f"shared media not found at {MEDIA}", file=sys.stderr)
        return 2
    settings = load_settings(shared_dir=SHARED)
    result: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2)}
    if args.links_only:
        with tempfile.TemporaryDirectory(prefix="m3agent-bench-links-") as tmp:
            result.update(av_links_debate(settings, Path(tmp)))
            result.update(av_links_interview(settings, Path(tmp)))
            result.update(cross_video_identity(settings, Path(tmp)))
        print(json.dumps(result, indent=2))
        return 0
    result["model_load_s"] = round(warm_up(settings), 1)
    rtf = perception_rtf(settings)
    result["rtf_perception"] = max(row["rtf"] for row in rtf.values())
    result["rtf_per_video"] = rtf
    with tempfile.TemporaryDirectory(prefix="m3agent-bench-perception-") as tmp:
        result.update(identity_talking_heads(settings, Path(tmp)))
        result.update(av_links_debate(settings, Path(tmp)))
        result.update(av_links_interview(settings, Path(tmp)))
        result.update(cross_video_identity(settings, Path(tmp)))
        result["voice_entities_audio"] = voice_entities_audio(settings, Path(tmp))
        result["voice_entities_episode"] = voice_entities_episode(settings, Path(tmp))
    episode = result["voice_entities_episode"]
    counted = [(result["heads_voice_entities_per_speaker"] * len(HEADS), len(HEADS)),
               (result["debate_voice_entities_per_speaker"] * len(DEBATE_SIDES), len(DEBATE_SIDES)),
               *((row["voice_entities"], row["speakers"]) for row in result["voice_entities_audio"].values()),
               (episode["voice_entities_known_parts"], episode["speakers"])]
    result["voice_entities_per_speaker"] = round(sum(v for v, _ in counted) / sum(n for _, n in counted), 2)
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
    audio = ", ".join(f"{k} {v['voice_entities']}/{v['speakers']}" for k, v in result["voice_entities_audio"].items())
    episode = result["voice_entities_episode"]
    audio += (f", episode {episode['voice_entities_known_parts']}/{episode['speakers']} "
              f"({episode['false_joins']} false joins, {episode['auto_merges']} automatic merges)")
    lines.append(f"| voice_entities_per_speaker | {result['voice_entities_per_speaker']} (talking heads "
                 f"{result['heads_voice_entities_per_speaker']}, debate {result['debate_voice_entities_per_speaker']}, "
                 f"{audio}) | 1.0 is ideal | - |")
    lines.append(f"| cross_video_identity | {result['cross_video_identity']} (people joined / people in several "
                 f"videos; {result['cross_video_false_merges']} false merges) | Trump joined | "
                 f"{'yes' if result['cross_video_trump_joined'] else 'no'} |")
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
