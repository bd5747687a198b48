"""A realistic memory corpus for the search benchmarks, scaled to any size from real text.

Texts: LoCoMo dialog turns (split into sentences), the images they share (BLIP captions), the
observation facts and event summaries about the speakers, and real ASR ground-truth transcripts
(``shared/media/audio/asr``). Queries: the LoCoMo and M3-Bench questions.

Rows take the store's real memory shapes: each video has :data:`PEOPLE` characters (a face and a
voice entity linked into one character, each named in a semantic memory ``"<face_k>'s name is Ann"``),
20 memories per 30 s clip: episodic utterances ``<voice_k> says: "..."`` (1-3 real sentences),
episodic sightings ``<face_k> shows a photo of ...`` and semantic facts (an observation with its
speaker's name replaced by the person's tag). The vocabulary is the sources' own (about 10^4 words).

Vectors: embedding 10^6 texts with MiniLM on 2 cores takes hours, so each distinct base sentence is
embedded once with the default MiniLM (cached under ``~/.cache/m3agent/bench``) and a row's vector is
the normalised mean of its sentences' vectors (tags and the ``says:`` frame are not embedded). This
keeps the neighbourhood structure of real sentence embeddings; it is not what ingest would store.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PER_CLIP = 20
CLIPS_PER_VIDEO = 250
PEOPLE = 4
NAMES = ("Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Audrey", "Andrew",
         "James", "Deborah", "Jolene", "Evan", "Sam", "Calvin", "Dave", "Lily", "Anna", "Lucas", "Emma",
         "Oliver", "Sofia", "Daniel", "Chloe", "Henry", "Grace", "Victor", "Nora")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORDS = re.compile(r"[A-Za-z']+")


def shared_dir() -> Path:
    import os

    return Path(os.environ.get("M3AGENT_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))


def cache_dir() -> Path:
    path = Path.home() / ".cache" / "m3agent" / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Sources:
    """Distinct base sentences by role, and the questions."""

    speech: tuple[str, ...]
    captions: tuple[str, ...]
    facts: tuple[tuple[str, str], ...]  # (speaker name, fact sentence)
    questions: tuple[str, ...]


def load_sources(shared: Path | None = None) -> Sources:
    """Every sentence of the shared LoCoMo, ASR and M3-Bench files, deduplicated, in file order."""
    root = shared or shared_dir()
    samples = json.loads((root / "data" / "locomo" / "locomo10.json").read_text())
    speech: dict[str, None] = {}
    captions: dict[str, None] = {}
    facts: dict[tuple[str, str], None] = {}
    questions: dict[str, None] = {}
    for sample in samples:
        for key, turns in sample["conversation"].items():
            if not key.startswith("session_") or key.endswith("date_time"):
                continue
            for turn in turns:
                speech.update(dict.fromkeys(_sentences(turn["text"])))
                if turn.get("blip_caption"):
                    captions[turn["blip_caption"].removeprefix("a photo of ").strip()] = None
        for session in sample["observation"].values():
            for speaker, items in session.items():
                facts.update(dict.fromkeys((speaker, text) for text, *_ in items if _usable(text)))
        for events in sample["event_summary"].values():
            for speaker, items in events.items():
                if isinstance(items, list):
                    facts.update(dict.fromkeys((speaker, text) for text in items if _usable(text)))
        questions.update(dict.fromkeys(q["question"] for q in sample["qa"] if q.get("question")))
    for transcript in sorted((root / "media" / "audio" / "asr").rglob("*.txt")):
        for line in transcript.read_text(encoding="utf-8-sig").splitlines():
            speech.update(dict.fromkeys(_sentences(line.split("\t")[-1])))
    for name in ("robot.json", "web.json"):
        for video in json.loads((root / "data" / "m3bench" / name).read_text()).values():
            questions.update(dict.fromkeys(q["question"] for q in video["qa_list"] if q.get("question")))
    return Sources(tuple(speech), tuple(captions), tuple(facts), tuple(questions))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if _usable(s)]


def _usable(text: str) -> bool:
    return len(_WORDS.findall(text)) >= 3


def base_vectors(sources: Sources) -> dict[str, np.ndarray]:
    """MiniLM vectors of every base sentence (speech, captions, facts), cached by content hash."""
    return embedded(sorted({*sources.speech, *sources.captions, *(f for _, f in sources.facts)}))


def name_line(name: str) -> str:
    """What a name memory's vector embeds (its tag left out)."""
    return f"The person's name is {name}."


def embedded(texts: list[str]) -> dict[str, np.ndarray]:
    """``texts`` and their MiniLM vectors (float16), cached by content hash."""
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache_dir() / f"search-corpus-{digest}.npy"
    if path.exists():
        vectors = np.load(path)
    else:
        from m3agent.embed.minilm import MiniLMEmbedder

        vectors = MiniLMEmbedder().embed(texts).astype(np.float16)
        np.save(path, vectors)
    return {"texts": np.asarray(texts, dtype=object), "vectors": vectors}


@dataclass(frozen=True)
class Row:
    """One memory of the corpus (before it is stored)."""

    kind: str  # "episodic" | "semantic"
    text: str
    person: int  # 0..PEOPLE-1 within the video
    voice: bool  # the tag is the person's voice entity (else the face)
    start_s: float
    vector: np.ndarray


class Corpus:
    """Rows of a video/clip layout generated from the sources; deterministic for a seed."""

    def __init__(self, sources: Sources, seed: int = 0) -> None:
        base, names = base_vectors(sources), embedded([name_line(n) for n in NAMES])
        self.sources = sources
        self.seed = seed
        texts = [*base["texts"], *names["texts"]]
        self._index = {str(t): i for i, t in enumerate(texts)}
        self._vectors = np.concatenate([base["vectors"], names["vectors"]]).astype(np.float32)

    def names(self, video: int) -> list[str]:
        """The names of the video's people (distinct within a video, shared across videos)."""
        rng = random.Random(f"{self.seed}-names-{video}")
        return rng.sample(NAMES, PEOPLE)

    def clip_rows(self, video: int, clip: int, tag_of: list[tuple[str, str]]) -> list[Row]:
        """The :data:`PER_CLIP` memories of one clip; ``tag_of[p]`` = (face tag, voice tag) of person p."""
        rng = random.Random(f"{self.seed}-{video}-{clip}")
        rows = []
        if clip == 0:
            for person, name in enumerate(self.names(video)):
                rows.append(self._row("semantic", f"{tag_of[person][0]}'s name is {name}.", [name_line(name)],
                                      person, False, clip * 30.0 + person))
        while len(rows) < PER_CLIP:
            person, at = rng.randrange(PEOPLE), clip * 30.0 + len(rows) * 1.5
            roll = rng.random()
            if roll < 0.6:
                said = rng.sample(self.sources.speech, rng.choice((1, 2, 2, 3)))
                rows.append(self._row("episodic", f"{tag_of[person][1]} says: \"{' '.join(said)}\"", said,
                                      person, True, at))
            elif roll < 0.75:
                seen = rng.choice(self.sources.captions)
                rows.append(self._row("episodic", f"{tag_of[person][0]} shows a photo of {seen}.", [seen],
                                      person, False, at))
            else:
                picked = rng.sample(self.sources.facts, rng.choice((1, 2)))
                text = " ".join(_tagged(fact, speaker, tag_of[person][0]) for speaker, fact in picked)
                rows.append(self._row("semantic", text, [f for _, f in picked], person, False, at))
        return rows

    def _row(self, kind: str, text: str, parts: list[str], person: int, voice: bool, start: float) -> Row:
        vector = self._vectors[[self._index[p] for p in parts]].mean(axis=0)
        return Row(kind, text, person, voice, start, vector / np.linalg.norm(vector))


def _tagged(fact: str, speaker: str, tag: str) -> str:
    """``fact`` about ``speaker`` with the speaker's name (and possessive) as the person's tag."""
    return re.sub(rf"\b{re.escape(speaker)}\b", tag, fact)


# queries ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Query:
    """A question, and the scope a search of it runs in."""

    text: str
    video_id: str | None = None
    before_clip: int | None = None


def queries(sources: Sources, corpus_videos: int, count: int, *, character: bool, seed: int = 5) -> list[Query]:
    """``count`` real questions; ``character``: each names a person of a random video (``<character_k>``
    tags are not stable across stores, so the person is named; the searcher restricts to that character)."""
    rng = random.Random(seed)
    picked = rng.sample(sources.questions, count)
    out = []
    for question in picked:
        if not character:
            out.append(Query(question))
            continue
        video = rng.randrange(corpus_videos)
        name = random.Random(f"0-names-{video}").sample(NAMES, PEOPLE)[rng.randrange(PEOPLE)]
        out.append(Query(_with_name(question, name)))
    return out


def _with_name(question: str, name: str) -> str:
    """The question about ``name``: its first name (or first "the man/woman/person") replaced."""
    for candidate in NAMES:
        if re.search(rf"\b{candidate}\b", question):
            return re.sub(rf"\b{candidate}\b", name, question, count=1)
    swapped = re.sub(r"\b[Tt]he (man|woman|person|boy|girl|robot)\b", name, question, count=1)
    return swapped if swapped != question else f"{question.rstrip('?')} for {name}?"


def iter_videos(n: int) -> Iterator[tuple[int, int, int]]:
    """(video, clip, rows in this clip) covering ``n`` memories."""
    for total in range(0, n, PER_CLIP):
        video, clip = divmod(total // PER_CLIP, CLIPS_PER_VIDEO)
        yield video, clip, min(PER_CLIP, n - total)


def summary(sources: Sources) -> dict[str, Any]:
    words = {w.lower() for text in (*sources.speech, *sources.captions, *(f for _, f in sources.facts))
             for w in _WORDS.findall(text)}
    return {"speech_sentences": len(sources.speech), "captions": len(sources.captions),
            "facts": len(sources.facts), "questions": len(sources.questions), "vocabulary": len(words)}


# the store ----------------------------------------------------------------------------------------
def build_store(path: Path, n: int, corpus: Corpus, *, progress: bool = True) -> dict[str, Any]:
    """Write ``n`` memories clip by clip through the store's clip writer; returns rows/s and file size.

    Each video's first clip creates a face and a voice entity per person, linked (confidence 1) into one
    character, and the name lines; every memory has an edge to the entity its text tags.
    """
    import sys
    import time

    from m3agent.domain import Clip, EntityKind, FaceVoiceLink, LinkSource, Memory, MemoryKind, Video
    from m3agent.embed.minilm import DIM, MODEL_NAME
    from m3agent.store import open_store

    started = time.perf_counter()
    bank = [np.eye(128, dtype=np.float32)[0]]
    entities: dict[int, list[tuple[int, int]]] = {}
    with open_store(str(path)) as store:
        store.set_embedding_model(MODEL_NAME, DIM)
        for video, clip, count in iter_videos(n):
            video_id = f"video{video:04d}"
            if clip == 0:
                store.add_video(Video(video_id, f"/bench/{video_id}.mp4", CLIPS_PER_VIDEO * 30.0))
            span = Clip(video_id, clip, clip * 30.0, clip * 30.0 + 30.0)
            with store.clip(span) as writer:
                if clip == 0:
                    pairs = []
                    for _ in range(PEOPLE):
                        face = writer.add_entity(EntityKind.FACE, bank)
                        voice = writer.add_entity(EntityKind.VOICE, bank)
                        writer.set_link(FaceVoiceLink(face.id, voice.id, 1.0, LinkSource.LLM, "bench"))
                        pairs.append((face.id, voice.id))
                    entities[video] = pairs
                pairs = entities[video]
                tag_of = [(_tag("face", f), _tag("voice", v)) for f, v in pairs]
                for row in corpus.clip_rows(video, clip, tag_of)[:count]:
                    entity = pairs[row.person][1 if row.voice else 0]
                    writer.add_memory(Memory(MemoryKind(row.kind), row.text, video_id, clip, row.start_s,
                                             row.start_s + 1.5, (entity,), embedding=row.vector))
            if progress and (video * CLIPS_PER_VIDEO + clip) % 5000 == 0:
                print(f"  built {(video * CLIPS_PER_VIDEO + clip) * PER_CLIP:,} / {n:,}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return {"rows": n, "seconds": round(seconds, 1), "rows_per_s": round(n / seconds), "db_mib": round(size / 2**20)}


def _tag(kind: str, entity_id: int) -> str:
    from m3agent import tags

    return tags.face(entity_id) if kind == "face" else tags.voice(entity_id)
