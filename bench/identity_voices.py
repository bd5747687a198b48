"""Voice entities per true speaker: talking heads, the debate, AMI/pyannote and the ~3-minute episode.

The episode (bench/ingest.py, built once into the cache) concatenates real clips; its timeline says which
part each second comes from, and media/README.md who speaks in each part. A voice entity is counted for
the part holding most of its speech; one heard (>= 1 s) in parts that share no speaker is a false join
(two people made one voice). The Oval Office part is left out of the count (its number of speakers,
interpretation included, is not known). Each figure is measured with the automatic voice merges of
identity/voice_merges.py on and off.

    .venv/bin/python bench/identity_voices.py [--no-write] [--skip-episode] [--voice-embedder NAME] [--merges-only]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared"
# Who is heard in each part of the episode (media/README.md); None: not known.
EPISODE_PEOPLE: dict[str, tuple[str, ...] | None] = {
    "iianet_debate_trump_clinton.mp4": ("Donald Trump", "Hillary Clinton"),
    "visualvoice_interview_2spk.mp4": ("interview left", "interview right"),
    "hdtf_talking_heads/WDA_AlexandriaOcasioCortez_000.mp4": ("Alexandria Ocasio-Cortez",),
    "hdtf_talking_heads/WDA_KatieHill_000.mp4": ("Katie Hill",),
    "pbs_oval_office_trump_mirziyoyev.mp4": None,
    "whitehouse_short_hamilton_clip.mp4": ("Lin-Manuel Miranda",),
    "videoagent_talking/segment_9.mp4": ("VideoAgent woman",),
    "videoagent_talking/segment_10.mp4": ("VideoAgent woman",),
    "videoagent_talking/segment_11.mp4": ("VideoAgent woman",),
    "hdtf_talking_heads/WDA_BobMenendez_000.mp4": ("Bob Menendez",),
    "visualvoice_noisy_restaurant_1spk.mp4": ("restaurant man",),
    "long_multi_person/flashvstream_example_playground.mp4": ("playground father",),
    "hdtf_talking_heads/WDA_EdMarkey0_000.mp4": ("Ed Markey",),
}
HEARD_S = 1.0  # seconds of speech in a part that count as being heard there


def with_merges(settings: Any, memory: Path, merge: bool) -> Any:
    perception = settings.perception.model_copy(update={"voice_merge": merge})
    return settings.model_copy(update={"memory": str(memory), "perception": perception})


def episode_voice_entities(settings: Any, workdir: Path, merge: bool = True) -> dict[str, Any]:
    """Ingest the episode (perception only) and count voice entities per true speaker."""
    sys.path.insert(0, str(BENCH))
    from ingest import episode
    from m3agent.media import default_video_id
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory

    cache = settings.resolved_cache_dir() / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    video, timeline = episode(cache)
    run = with_merges(settings, workdir / f"episode-{'merge' if merge else 'nomerge'}.db", merge)
    ingest_source(run, str(video), perception_only=True, show_progress=False)
    with open_memory(run, readonly=True, create=False) as store:
        spans = store.voice_spans(default_video_id(str(video)))
        merges = sum(1 for m in store.entity_merges() if m.source == "auto" and m.undone_at is None)
    parts = [(p["start_s"], p["end_s"], EPISODE_PEOPLE[p["source"].split("/video/", 1)[1]]) for p in timeline]
    return {**count_per_speaker(spans, parts), "auto_merges": merges}


def count_per_speaker(spans: list[tuple[float, float, int]],
                      parts: list[tuple[float, float, tuple[str, ...] | None]]) -> dict[str, Any]:
    """Voice entities of the parts with known speakers, per known speaker, and false joins."""
    heard: dict[int, dict[int, float]] = {}
    for start, end, voice in spans:
        for index, (p0, p1, _) in enumerate(parts):
            seconds = max(0.0, min(end, p1) - max(start, p0))
            if seconds > 0:
                heard.setdefault(voice, {}).setdefault(index, 0.0)
                heard[voice][index] += seconds
    known = [v for v, by_part in heard.items() if parts[max(by_part, key=by_part.__getitem__)][2] is not None]
    false_joins = 0
    for by_part in heard.values():
        people = [set(parts[i][2] or ()) for i, s in by_part.items() if s >= HEARD_S and parts[i][2] is not None]
        if len(people) > 1 and not set.intersection(*people):
            false_joins += 1
    speakers = {name for _, _, names in parts for name in names or ()}
    return {"voice_entities": len(heard), "voice_entities_known_parts": len(known), "speakers": len(speakers),
            "per_speaker": round(len(known) / len(speakers), 2), "false_joins": false_joins}


def with_voice_embedder(settings: Any, name: str) -> Any:
    """``settings`` with another perception.voice_embedder and that embedder's default voice similarities."""
    from m3agent.settings import PerceptionSettings

    own = {"voice_match_similarity", "voice_merge_similarity", "voice_embedder"}
    fields = {k: v for k, v in settings.perception.model_dump().items() if k not in own}
    return settings.model_copy(update={"perception": PerceptionSettings(**fields, voice_embedder=name)})


def measure(settings: Any, workdir: Path, skip_episode: bool,
            merges: tuple[bool, ...] = (True, False)) -> dict[str, Any]:
    import perception

    result: dict[str, Any] = {}
    for merge in merges:
        key = "merge" if merge else "no_merge"
        run = with_merges(settings, workdir / key / "x.db", merge)
        (workdir / key).mkdir(parents=True, exist_ok=True)
        heads = perception.identity_talking_heads(run, workdir / key)
        debate = perception.av_links_debate(run, workdir / key)
        audio = perception.voice_entities_audio(run, workdir / key)
        row = {"talking_heads": {"voice_entities": heads["voice_entities"], "speakers": len(perception.HEADS),
                                 "identity_talking_heads": heads["identity_talking_heads"]},
               "debate": {"voice_entities": debate["debate_entities"]["voices"], "speakers": 2,
                          "false_joins": debate["debate_false_joins"], "av_links_debate": debate["av_links_debate"]},
               **audio}
        if not skip_episode:
            row["episode"] = episode_voice_entities(settings, workdir / key, merge)
        row["all"] = totals(row)
        result[key] = row
    return result


def totals(row: dict[str, Any]) -> dict[str, Any]:
    """Voice entities per true speaker over every input (the episode's known parts) and all false joins."""
    entities = sum(r.get("voice_entities_known_parts", r["voice_entities"]) for r in row.values())
    speakers = sum(r["speakers"] for r in row.values())
    return {"voice_entities": entities, "speakers": speakers, "per_speaker_all": round(entities / speakers, 3),
            "false_joins": sum(r.get("false_joins", 0) for r in row.values())}


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import load_settings

    sys.path.insert(0, str(BENCH))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--skip-episode", action="store_true", help="leave out the 3-minute episode")
    parser.add_argument("--voice-embedder", choices=("resemblyzer", "campplus"),
                        help="perception.voice_embedder (with its default similarities); default: the settings'")
    parser.add_argument("--merges-only", action="store_true", help="measure with automatic merges on only")
    args = parser.parse_args(argv)
    settings = load_settings(shared_dir=SHARED)
    if args.voice_embedder:
        settings = with_voice_embedder(settings, args.voice_embedder)
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="m3agent-bench-voices-") as tmp:
        result = measure(settings, Path(tmp), args.skip_episode, (True,) if args.merges_only else (True, False))
    result["load_average"] = load
    result["environment"] = environment(settings={"asr_model": settings.perception.asr_model,
                                                  "voice_embedder": settings.perception.voice_embedder,
                                                  "voice_match_similarity":
                                                      settings.perception.voice_match_similarity,
                                                  "voice_merge_similarity":
                                                      settings.perception.voice_merge_similarity})
    print(json.dumps(result, indent=2))
    if not args.no_write and not args.merges_only:
        write_section(result, "python bench/identity_voices.py " + " ".join(argv if argv is not None
                                                                           else sys.argv[1:]))
    return 0


def write_section(result: dict[str, Any], command: str) -> None:
    from m3agent.bench.results_io import replace_section, run_line

    lines = [run_line(result["environment"], command, result["load_average"]), "",
             "Voice entities / true speakers (1.0 is ideal; above: one person split, below: people joined or "
             "not heard). Episode: parts with known speakers; false joins = voice entities heard in parts that "
             "share no speaker (debate, AMI, pyannote: voice entities in which two true speakers each hold 1 s and "
             "a quarter of the entity's single-speaker speech, by captions or RTTM). all: every input, the "
             "episode's known parts.", "",
             "| input | merges on | merges off |", "|---|---|---|"]
    on, off = result["merge"], result["no_merge"]
    for name in on:
        lines.append(f"| {name} | {_cell(on[name])} | {_cell(off[name])} |")
    replace_section(REPO / "docs" / "benchmarks.md", "Identity: voice entities per speaker", "\n".join(lines))


def _cell(row: dict[str, Any]) -> str:
    if "per_speaker" in row:
        return (f"{row['voice_entities_known_parts']}/{row['speakers']} = {row['per_speaker']} "
                f"({row['voice_entities']} voices in all, {row['false_joins']} false joins, "
                f"{row['auto_merges']} automatic merges)")
    if "per_speaker_all" in row:
        return f"{row['voice_entities']}/{row['speakers']} = {row['per_speaker_all']}, {row['false_joins']} false joins"
    joins = f", {row['false_joins']} false joins" if "false_joins" in row else ""
    return f"{row['voice_entities']}/{row['speakers']}{joins}"


if __name__ == "__main__":
    raise SystemExit(main())
