"""Voice embedders compared on the shared speaker sets: CAM++ (192-d) against Resemblyzer (256-d).

Every set is a list of speech segments with a true speaker; each embedder gives one vector per
segment (``embed``, the call identity uses for a speaker's speech in a clip). Sets:

* ``librispeech``: LibriSpeech test-other, 10 speakers x 10 utterances (the calibration set);
* ``trump_debate``: the 5 Donald Trump clips of ``speaker_id/donald_trump_real`` cut into 6 s pieces,
  and the debate video's captioned Trump and Clinton turns (caption speaker guesses; joined turns of
  at least 1.5 s): one voice over two channels, and a second voice;
* ``diarization``: single-speaker stretches (>= 1.5 s, cut at 6 s, no other speaker within) of the
  RTTM-labelled recordings (AMI 1 min, pyannote sample and debug files, Picovoice Falcon); trials
  and clusters only within one recording (its labels are local to it).

Per set and embedder: EER and AUC of same- vs different-speaker cosine scores; the clustering of the
segments (average linkage, cut at the embedder's identity threshold ``voice_match_similarity``)
as clusters / true speakers, purity (share of segments in their cluster's majority speaker) and
splits (speakers spread over more than one cluster); the same at the best threshold for that set;
and embedding seconds per audio second (one thread, models loaded beforehand).

``clip_merges``: the diarizer's speakers of each 30 s clip of bench/perception_audio.py's recordings
re-embedded with CAM++ and joined while two score at least ``voice_clip_merge_similarity`` (what
``voice_embedder = "campplus"`` does): DER (collar 0.25 s) and speakers found vs true, per threshold.

``audio_cost``: seconds per media second of the whole audio perception (``perceive_audio``: VAD, d-vector
diarization, CAM++ re-embedding when chosen, ASR) on bench/perception_audio.py's speed files in 30 s clips.

``--end-to-end`` adds, once per embedder, voice entities per true speaker after ingesting (perception only,
automatic merges on) the debate, AMI/pyannote and the ~3-minute episode (see :func:`end_to_end`).

    nice -n 15 .venv/bin/python bench/voice_embedders.py [--no-write] [--end-to-end]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared"
AUDIO = SHARED / "media" / "audio"
DEBATE = SHARED / "media" / "video" / "iianet_debate_trump_clinton.mp4"
DIAR_FILES = {  # name -> (wav, rttm, file id)
    "ami_1min": ("ami_mixture_1min/mixture.wav", "ami_mixture_1min/mixture.rttm", "mixture"),
    "pyannote_sample": ("pyannote_sample/sample.wav", "pyannote_sample/sample.rttm", "sample"),
    "pyannote_dev00": ("pyannote_debug/dev00.wav", "pyannote_debug/debug.development.rttm", "dev00"),
    "pyannote_dev01": ("pyannote_debug/dev01.wav", "pyannote_debug/debug.development.rttm", "dev01"),
    "pyannote_tst00": ("pyannote_debug/tst00.wav", "pyannote_debug/debug.test.rttm", "tst00"),
    "pyannote_tst01": ("pyannote_debug/tst01.wav", "pyannote_debug/debug.test.rttm", "tst01"),
    "picovoice_falcon": ("picovoice_falcon/test.wav", "picovoice_falcon/test.rttm", "test"),
}
RATE = 16000
MIN_S, MAX_S = 1.5, 6.0
EMBEDDERS = ("resemblyzer", "campplus")
# Thresholds at which false accepts, false rejects and clusters are listed (calibration).
SWEEP = {"resemblyzer": (0.6, 0.65, 0.7, 0.75, 0.8, 0.85), "campplus": (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55)}

Segment = tuple[str, str, Any, str]  # (group: trials and clusters stay inside it, speaker, audio, source)


def librispeech() -> list[Segment]:
    from m3agent.media import read_audio

    root = AUDIO / "speaker_id" / "librispeech_test-other"
    return [("librispeech", f.parent.name, read_audio(f), f.name) for f in sorted(root.glob("*/*.flac"))]


def trump_debate() -> list[Segment]:
    from m3agent.media import read_audio

    out: list[Segment] = []
    for clip in sorted((AUDIO / "speaker_id" / "donald_trump_real").glob("*.mp3")):
        audio = read_audio(clip)
        step = round(MAX_S * RATE)
        out += [("trump", "Donald Trump", audio[i : i + step], clip.name)
                for i in range(0, len(audio) - step + 1, step)]
    debate = read_audio(DEBATE)
    turns: list[list[Any]] = []
    for line in DEBATE.with_suffix(".captions.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        start, end, _, speaker = line.split("\t")
        if turns and turns[-1][2] == speaker and float(start) - turns[-1][1] < 0.3:
            turns[-1][1] = float(end)
        else:
            turns.append([float(start), float(end), speaker])
    for start, end, speaker in turns:
        if speaker in ("Donald Trump", "Hillary Clinton") and end - start >= MIN_S:
            out += [("trump", speaker, piece, "debate") for piece in _pieces(debate, start, end)]
    return out


def diarization() -> list[Segment]:
    from m3agent.media import read_audio
    from m3agent.perception.audio.scoring import read_rttm

    out: list[Segment] = []
    for name, (wav, rttm, file_id) in DIAR_FILES.items():
        audio = read_audio(AUDIO / "diarization" / wav)
        turns = read_rttm(AUDIO / "diarization" / rttm, file_id)
        for turn in turns:
            others = [(t.start_s, t.end_s) for t in turns if t.speaker != turn.speaker
                      and t.end_s > turn.start_s and t.start_s < turn.end_s]
            start, end = turn.start_s, turn.end_s
            for o0, o1 in others:  # keep the longest side free of the other speaker
                if o0 - start >= end - o1:
                    end = min(end, o0)
                else:
                    start = max(start, o1)
            if end - start >= MIN_S:
                out += [(name, turn.speaker, piece, name) for piece in _pieces(audio, start, end)]
    return out


def _pieces(audio: Any, start: float, end: float) -> list[Any]:
    """``[start, end)`` cut into pieces of at most MAX_S (at least MIN_S each)."""
    n = max(1, int((end - start) // MAX_S) + (1 if (end - start) % MAX_S >= MIN_S else 0))
    edges = [start + (end - start) * i / n for i in range(n + 1)]
    return [audio[round(a * RATE) : round(b * RATE)] for a, b in itertools.pairwise(edges)]


def embedder(name: str) -> Any:
    from m3agent.perception.audio.campplus import CamppEmbedder
    from m3agent.perception.audio.speakers import SpeakerEncoder

    return CamppEmbedder(threads=1) if name == "campplus" else SpeakerEncoder(threads=1)


def embed_all(name: str, segments: list[Segment]) -> tuple[Any, float]:
    import numpy as np

    model = embedder(name)
    model.embed(segments[0][2])  # load and warm up
    start = time.perf_counter()
    vectors = np.stack([model.embed(audio) for _, _, audio, _ in segments])
    return vectors, time.perf_counter() - start


def pair_scores(vectors: Any, segments: list[Segment]) -> tuple[Any, Any]:
    """Cosine scores and same-speaker flags of all pairs inside one group."""
    import numpy as np

    groups = np.array([g for g, *_ in segments])
    speakers = np.array([f"{g}/{s}" for g, s, *_ in segments])
    scores = vectors @ vectors.T
    i, j = np.triu_indices(len(segments), 1)
    keep = groups[i] == groups[j]
    return scores[i[keep], j[keep]], (speakers[i] == speakers[j])[keep]


def eer_auc(scores: Any, same: Any) -> tuple[float, float, float]:
    """Equal error rate, its threshold, and the area under the ROC curve."""
    import numpy as np

    pos, neg = np.sort(scores[same]), np.sort(scores[~same])
    if not len(pos) or not len(neg):
        return float("nan"), float("nan"), float("nan")
    thresholds = np.unique(np.concatenate([pos, neg]))
    frr = np.searchsorted(pos, thresholds, side="left") / len(pos)
    far = 1 - np.searchsorted(neg, thresholds, side="left") / len(neg)
    k = int(np.argmin(np.abs(far - frr)))
    auc = float(np.searchsorted(neg, pos, side="left").sum() / (len(pos) * len(neg)))
    return float((far[k] + frr[k]) / 2), float(thresholds[k]), auc


def clusters(vectors: Any, similarity: float) -> Any:
    import numpy as np
    from sklearn.cluster import AgglomerativeClustering

    if len(vectors) < 2:
        return np.zeros(len(vectors), dtype=np.int64)
    ahc = AgglomerativeClustering(n_clusters=None, distance_threshold=1 - similarity, metric="cosine",
                                  linkage="average")
    return ahc.fit_predict(vectors)


def clustering(vectors: Any, segments: list[Segment], similarity: float) -> dict[str, Any]:
    """Per group clustered alone, summed: clusters, true speakers, purity, split speakers, joined clusters."""
    from collections import Counter

    import numpy as np

    groups = np.array([g for g, *_ in segments])
    found = speakers = split = joined = majority = 0
    for group in dict.fromkeys(groups.tolist()):
        rows = np.flatnonzero(groups == group)
        labels = clusters(vectors[rows], similarity)
        truth = [segments[r][1] for r in rows]
        found += len(set(labels.tolist()))
        speakers += len(set(truth))
        split += sum(1 for s in set(truth) if len({lab for lab, t in zip(labels, truth, strict=True) if t == s}) > 1)
        for lab in set(labels.tolist()):
            counts = Counter(t for la, t in zip(labels, truth, strict=True) if la == lab)
            majority += max(counts.values())
            joined += len(counts) > 1
    return {"clusters": found, "speakers": speakers, "purity": round(majority / len(segments), 3),
            "split_speakers": split, "mixed_clusters": joined}


def best_clustering(vectors: Any, segments: list[Segment]) -> dict[str, Any]:
    """The threshold (0.05 steps) with the fewest errors: segments outside their cluster's majority plus splits."""
    import numpy as np

    best: dict[str, Any] = {}
    for similarity in np.arange(0.05, 0.96, 0.05):
        row = clustering(vectors, segments, float(similarity))
        wrong = round((1 - row["purity"]) * len(segments))
        cost = wrong + row["split_speakers"] + abs(row["clusters"] - row["speakers"])
        if not best or cost < best["cost"]:
            best = {**row, "similarity": round(float(similarity), 2), "cost": cost}
    best.pop("cost")
    return best


def match_threshold(name: str) -> float:
    from m3agent.settings import PerceptionSettings

    return PerceptionSettings(voice_embedder=name).voice_match_similarity


def measure() -> dict[str, Any]:
    import numpy as np

    sets = {"librispeech": librispeech(), "trump_debate": trump_debate(), "diarization": diarization()}
    out: dict[str, Any] = {}
    for set_name, segments in sets.items():
        seconds = sum(len(s[2]) for s in segments) / RATE
        row: dict[str, Any] = {"segments": len(segments), "audio_s": round(seconds, 1)}
        for name in EMBEDDERS:
            vectors, spent = embed_all(name, segments)
            scores, same = pair_scores(vectors, segments)
            eer, at, auc = eer_auc(scores, same)
            threshold = match_threshold(name)
            row[name] = {
                "eer": round(eer, 4), "eer_threshold": round(at, 3), "auc": round(auc, 4),
                "same_mean": round(float(scores[same].mean()), 3),
                "different_mean": round(float(scores[~same].mean()), 3),
                "same_p05": round(float(np.quantile(scores[same], 0.05)), 3),
                "different_max": round(float(scores[~same].max()), 3),
                "different_p999": round(float(np.quantile(scores[~same], 0.999)), 3),
                "false_accept_at_match": round(float((scores[~same] >= threshold).mean()), 4),
                "false_reject_at_match": round(float((scores[same] < threshold).mean()), 4),
                "match_threshold": threshold,
                "at_match": clustering(vectors, segments, threshold),
                "best": best_clustering(vectors, segments),
                "sweep": {f"{t:.2f}": [round(float((scores[~same] >= t).mean()), 4),
                                       round(float((scores[same] < t).mean()), 4),
                                       clustering(vectors, segments, t)["clusters"]]
                          for t in SWEEP[name]},
                "s_per_audio_s": round(spent / seconds, 4),
            }
            if set_name == "trump_debate":
                row[name]["trump_channels"] = _trump_channels(vectors, segments)
        out[set_name] = row
    return out


def _trump_channels(vectors: Any, segments: list[Segment]) -> dict[str, float]:
    """Mean scores: Trump clips vs debate Trump (one voice, two channels) and vs debate Clinton."""
    import numpy as np

    clips = [i for i, s in enumerate(segments) if s[3] != "debate"]
    debate_trump = [i for i, s in enumerate(segments) if s[3] == "debate" and s[1] == "Donald Trump"]
    clinton = [i for i, s in enumerate(segments) if s[1] == "Hillary Clinton"]

    def mean(a: list[int], b: list[int]) -> float:
        return round(float((vectors[a] @ vectors[b].T).mean()), 3)

    top3 = np.sort(vectors[debate_trump] @ vectors[clips].T, axis=1)[:, -3:].mean()
    return {"clips_vs_debate_trump": mean(clips, debate_trump), "clips_vs_debate_clinton": mean(clips, clinton),
            "debate_trump_vs_clinton": mean(debate_trump, clinton),
            "debate_trump_top3_to_clips": round(float(top3), 3)}


CLIP_MERGES = ((1.0, 1.0), (0.7, 0.7), (0.6, 0.6), (0.55, 0.55), (0.5, 0.5), (0.6, 0.5), (0.6, 0.45), (0.6, 0.4))
"""(voice_clip_merge_similarity, voice_clip_short_merge_similarity) pairs; 1.0: no merges."""
CROP_SECONDS = (1.0, 1.5, 2.5, 4.0)


def short_crops(seed: int = 0) -> dict[str, Any]:
    """CAM++ similarity of one random crop per segment, by crop length: same-speaker median and 10th percentile,
    different-speaker 99th percentile and maximum (pairs inside one recording group only)."""
    import numpy as np

    from m3agent.perception.audio.campplus import CamppEmbedder

    campp, rng, out = CamppEmbedder(threads=1), np.random.default_rng(seed), {}
    for set_name, segments in {"librispeech": librispeech(), "trump_debate": trump_debate(),
                               "diarization": diarization()}.items():
        for seconds in CROP_SECONDS:
            n = round(seconds * RATE)
            crops = [(group, speaker, campp.embed(audio[s : s + n]))
                     for group, speaker, audio, _ in segments if len(audio) >= n
                     for s in [int(rng.integers(0, len(audio) - n + 1))]]
            same = [float(a[2] @ b[2]) for i, a in enumerate(crops) for b in crops[i + 1:]
                    if a[0] == b[0] and a[1] == b[1]]
            different = [float(a[2] @ b[2]) for i, a in enumerate(crops) for b in crops[i + 1:]
                         if a[0] == b[0] and a[1] != b[1]]
            if same and different:
                out[f"{set_name} {seconds:.1f} s"] = {
                    "crops": len(crops), "same_p10": round(float(np.percentile(same, 10)), 2),
                    "same_median": round(float(np.median(same)), 2),
                    "different_p99": round(float(np.percentile(different, 99)), 2),
                    "different_max": round(max(different), 2)}
    return out


def clip_merges(clip_s: float = 30.0) -> dict[str, Any]:
    """DER and speaker count over 30 s clips, per within-clip merge threshold (1.0: no merges)."""
    sys.path.insert(0, str(BENCH))
    from m3agent.media import read_audio
    from m3agent.perception.audio.campplus import CamppEmbedder
    from m3agent.perception.audio.diarize import diarize
    from m3agent.perception.audio.scoring import Turn, diarization_error_rate, read_rttm
    from m3agent.perception.audio.speakers import SpeakerEncoder
    from m3agent.perception.audio.voices import speaker_embeddings
    from perception_audio import DIAR, DIARIZATION_SETS

    encoder, campp = SpeakerEncoder(threads=1), CamppEmbedder(threads=1)
    errors = dict.fromkeys(CLIP_MERGES, 0.0)
    found = dict.fromkeys(CLIP_MERGES, 0)
    reference_s, true_speakers, clips = 0.0, 0, 0
    for wav, rttm, file_id, scored in DIARIZATION_SETS.values():
        audio = read_audio(DIAR / wav)
        reference = read_rttm(DIAR / rttm, file_id)
        end = scored[1] if scored else len(audio) / RATE
        start = 0.0
        while start < end - 1e-6:
            stop = min(start + clip_s, end)
            piece = audio[round(start * RATE) : round(stop * RATE)]
            ref = [Turn(max(t.start_s, start), min(t.end_s, stop), t.speaker) for t in reference
                   if t.end_s > start and t.start_s < stop]
            diarization = diarize(piece, encoder)
            clips += 1
            true_speakers += len({t.speaker for t in ref})
            for threshold in CLIP_MERGES:
                merged = (speaker_embeddings(piece, diarization, campp, *threshold) if diarization.turns
                          else diarization)
                hyp = [Turn(t.start_s + start, t.end_s + start, str(t.speaker)) for t in merged.turns]
                score = diarization_error_rate(ref, hyp, collar_s=0.25, scored=(start, stop))
                errors[threshold] += score.missed_s + score.false_alarm_s + score.confusion_s
                found[threshold] += len({t.speaker for t in merged.turns})
            reference_s += score.reference_s
            start = stop
    return {"clips": clips, "true_speakers": true_speakers,
            "by_threshold": {f"{t:.2f}, short {short:.2f}": {"der": round(errors[(t, short)] / reference_s, 4),
                                                             "speakers": found[(t, short)]}
                             for t, short in CLIP_MERGES}}


def audio_cost() -> dict[str, Any]:
    """perceive_audio wall seconds per media second, per embedder, and its voice_embed share (models warm)."""
    sys.path.insert(0, str(BENCH))
    from m3agent.media import iter_clips
    from m3agent.perception.audio.voices import audio_models, perceive_audio
    from m3agent.settings import MediaSettings, PerceptionSettings, Settings
    from perception_audio import AUDIO as AUDIO_DIR
    from perception_audio import RTF_FILES

    media = MediaSettings(clip_seconds=30.0, frame_fps=1.0)
    clips = [c for f in RTF_FILES for c in iter_clips(AUDIO_DIR / f, media)]
    duration = sum(c.clip.duration_s for c in clips)
    out: dict[str, Any] = {"media_s": round(duration, 1)}
    for name in EMBEDDERS:
        settings = Settings(shared_dir=SHARED, perception=PerceptionSettings(voice_embedder=name))
        models = audio_models(settings)
        perceive_audio(clips[0], settings, models=models)  # load the models
        timings: dict[str, float] = {}
        start = time.perf_counter()
        for clip in clips:
            perceive_audio(clip, settings, timings, models=models)
        out[name] = {"rtf": round((time.perf_counter() - start) / duration, 4),
                     **{f"{k}_rtf": round(v / duration, 4) for k, v in timings.items()}}
    return out


def end_to_end() -> dict[str, Any]:
    """Voice entities per true speaker, once per embedder (its default similarities), automatic merges on:
    the debate, AMI/pyannote and the ~3-minute episode ingested perception-only (bench/identity_voices.py's
    inputs less the talking heads, whose full ingest runs the local LLM)."""
    import tempfile

    sys.path.insert(0, str(BENCH))
    import identity_voices
    import perception
    from m3agent.settings import load_settings

    out: dict[str, Any] = {"note": "perception only, automatic merges on: the debate, AMI/pyannote and the episode"}
    for name in EMBEDDERS:
        settings = identity_voices.with_voice_embedder(load_settings(shared_dir=SHARED), name)
        with tempfile.TemporaryDirectory(prefix="m3agent-bench-embedders-") as tmp:
            workdir = Path(tmp)
            run = identity_voices.with_merges(settings, workdir / "x.db", True)
            debate = perception.av_links_debate(run, workdir)
            rows: dict[str, Any] = {"debate": {"voice_entities": debate["debate_entities"]["voices"], "speakers": 2}}
            rows.update(perception.voice_entities_audio(run, workdir))
            rows["episode"] = identity_voices.episode_voice_entities(settings, workdir, True)
        out[name] = {"rows": rows}
    return out


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--end-to-end", action="store_true", help="also ingest (bench/identity_voices.py, minutes)")
    parser.add_argument("--merges-only", action="store_true",
                        help="only the within-clip merge table and the short-crop scores, printed as markdown")
    args = parser.parse_args(argv)
    if args.merges_only:
        print("\n".join(merge_lines(clip_merges()) + crop_lines(short_crops())))
        return 0
    load = round(os.getloadavg()[0], 2)
    result: dict[str, Any] = {"sets": measure(), "clip_merges": clip_merges(), "short_crops": short_crops(),
                              "audio_cost": audio_cost(),
                              "load_average": load, "environment": environment()}
    if args.end_to_end:
        result["end_to_end"] = end_to_end()
    print(json.dumps(result, indent=2))
    if not args.no_write:
        write_section(result, "nice -n 15 .venv/bin/python bench/voice_embedders.py "
                      + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0


def merge_lines(merges: dict[str, Any]) -> list[str]:
    lines = ["", f"Speakers of one clip joined by CAM++ ({merges['clips']} clips of 30 s, "
             f"{merges['true_speakers']} true speakers in all; 1.00 = the d-vector diarizer alone; short: the bar "
             "when one of the two spoke under 2 s):", "",
             "| voice_clip_merge_similarity, short | DER | speakers found |", "|---|---|---|"]
    return lines + [f"| {threshold} | {row['der']:.3f} | {row['speakers']} |"
                    for threshold, row in merges["by_threshold"].items()]


def crop_lines(crops: dict[str, Any]) -> list[str]:
    lines = ["", "CAM++ similarity of one random crop per segment, by crop length (pairs inside one recording):", "",
             "| set, crop | crops | same speaker p10 / median | different speakers p99 / max |", "|---|---|---|---|"]
    return lines + [f"| {k} | {r['crops']} | {r['same_p10']:.2f} / {r['same_median']:.2f} | "
                    f"{r['different_p99']:.2f} / {r['different_max']:.2f} |" for k, r in crops.items()]


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [run_line(result["environment"], command, result["load_average"]), "", TABLE_NOTE, "",
             "| set | embedder | EER | AUC | same / different mean | clusters / speakers at match "
             "(purity, split, mixed) | best threshold: clusters / speakers (purity, split) | s per audio s |",
             "|---|---|---|---|---|---|---|---|"]
    for set_name, row in result["sets"].items():
        for name in EMBEDDERS:
            r = row[name]
            m, b = r["at_match"], r["best"]
            lines.append(
                f"| {set_name} ({row['segments']} segments) | {name} | {r['eer']:.3f} | {r['auc']:.3f} | "
                f"{r['same_mean']:.2f} / {r['different_mean']:.2f} | {m['clusters']}/{m['speakers']} at "
                f"{r['match_threshold']} ({m['purity']:.2f}, {m['split_speakers']}, {m['mixed_clusters']}) | "
                f"{b['clusters']}/{b['speakers']} at {b['similarity']} ({b['purity']:.2f}, {b['split_speakers']}) | "
                f"{r['s_per_audio_s']:.4f} |")
    lines += ["", "False accepts / false rejects of single pairs, and clusters, by threshold (calibration):", "",
              "| set | embedder | " + " | ".join(["threshold: FA / FR, clusters"]) + " |", "|---|---|---|"]
    for set_name, row in result["sets"].items():
        for name in EMBEDDERS:
            cells = [f"{t}: {fa:.3f} / {fr:.3f}, {n}" for t, (fa, fr, n) in row[name]["sweep"].items()]
            lines.append(f"| {set_name} | {name} | " + "; ".join(cells) + " |")
    lines += ["", CALIBRATION]
    lines += merge_lines(result["clip_merges"])
    if "short_crops" in result:
        lines += crop_lines(result["short_crops"])
    cost = result["audio_cost"]
    lines += ["", f"Audio perception speed ({cost['media_s']} s of media in 30 s clips, wall seconds per media second, "
              "models loaded):", "", "| embedder | all audio perception | diarize | CAM++ re-embedding | asr |",
              "|---|---|---|---|---|"]
    for name in EMBEDDERS:
        c = cost[name]
        lines.append(f"| {name} | {c['rtf']:.3f} | {c.get('diarize_rtf', 0):.3f} | {c.get('voice_embed_rtf', 0):.3f} | "
                     f"{c.get('asr_rtf', 0):.3f} |")
    if "end_to_end" in result:
        import identity_voices

        e2e = result["end_to_end"]
        note = e2e.get("note", "bench/identity_voices.py's inputs, automatic merges on")
        lines += ["", f"Voice entities / true speakers after ingesting ({note}; the section Identity: voice entities "
                  "per speaker explains the episode cell):", "",
                  "| input | " + " | ".join(EMBEDDERS) + " |", "|---|" + "---|" * len(EMBEDDERS)]
        for key in e2e[EMBEDDERS[0]]["rows"]:
            cells = [identity_voices._cell(e2e[name]["rows"][key]) for name in EMBEDDERS]
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
    replace_section(REPO / "docs" / "benchmarks.md", "Voice embedders: CAM++ vs Resemblyzer", "\n".join(lines))


TABLE_NOTE = ("One embedding per segment (`embed`); EER/AUC over same- vs different-speaker pairs (inside one "
              "recording for the diarization set); clusters: average linkage on cosine similarity cut at the "
              "embedder's `voice_match_similarity`, then at the best threshold for the set (0.05 steps); split = "
              "speakers spread over several clusters, mixed = clusters holding several speakers.")


CALIBRATION = (
    "Calibration (CAM++; fixed on librispeech, checked on the other sets): `voice_match_similarity` 0.45 is the "
    "lowest 0.05 step at which no different-speaker pair of librispeech scores (Resemblyzer's 0.75 sits at its own "
    "librispeech EER); `voice_merge_similarity` 0.30 keeps Resemblyzer's distance below the match bar (0.15); "
    "`voice_clip_merge_similarity` 0.6 (two speakers of one clip re-joined) is 0.1 above the highest "
    "different-speaker score on any set (0.49, diarization), and the clip table below checks it against DER "
    "and the true number of speakers.")


if __name__ == "__main__":
    raise SystemExit(main())
