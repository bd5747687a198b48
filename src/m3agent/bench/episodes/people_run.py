"""``m3agent bench episode``: build the evaluation episode, ingest it with the given settings, answer its questions.

The episode is built once into the cache (keyed by the set's parts) and ingested into a memory file beside it
(an interrupted ingest resumes; ``fresh`` starts over). Every question is answered as ``m3agent ask`` would
with the settings' mode and model, scored by keywords and, when a judge model is given, by the judge, and
timed. The report gives accuracy, evidence hit rate and latency per question type, and the answers that
leak internal ids.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.bench.episodes.people_eval import (
    TYPES,
    EvalQuestion,
    EvalSet,
    Timeline,
    evidence_hit,
    internal_ids,
    keyword_correct,
    load_eval_set,
    render,
    timeline_of,
)
from m3agent.control.modes.grounded import PLAN_THOUGHT
from m3agent.control.steps import Thought
from m3agent.errors import BenchmarkError
from m3agent.store.location import parse_location

if TYPE_CHECKING:
    from m3agent.bench.judge import Judge
    from m3agent.control.steps import Answer
    from m3agent.embed import Embedder
    from m3agent.llm import ChatModel
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore


@dataclass(frozen=True, slots=True)
class Scored:
    """One answered question and how it scored (``judged`` None without a judge or when the judge failed)."""

    id: str
    type: str
    question: str
    gold: str
    answer: str
    keyword: bool
    judged: bool | None
    evidence_hit: bool
    latency_s: float
    leaked_ids: tuple[str, ...]
    plan: str | None = None
    """The operation of the query plan the model wrote (None: no plan was made)."""
    plan_right: bool | None = None


def episode_files(eval_set: EvalSet, settings: Settings) -> tuple[Path, Path]:
    """Where the episode video and its timeline are cached (the key: the set's parts)."""
    key = hashlib.sha256(json.dumps([asdict(p) for p in eval_set.parts], sort_keys=True).encode()).hexdigest()[:12]
    folder = settings.resolved_cache_dir() / "bench"
    return folder / f"{eval_set.name}-{key}.mp4", folder / f"{eval_set.name}-{key}.json"


def build(eval_set: EvalSet, settings: Settings) -> tuple[Path, Timeline]:
    """The built episode and its timeline (built on first use, from ``settings.shared_dir``'s media)."""
    from m3agent.bench.episodes.build import build_episode

    video, timeline_file = episode_files(eval_set, settings)
    if not (video.is_file() and timeline_file.is_file()):
        media = settings.shared_dir.expanduser() / "media"
        missing = [f for p in eval_set.parts for f in p.files() if not (media / f).is_file()]
        if missing:
            raise BenchmarkError(f"{len(missing)} media files of the set are missing, e.g. {media / missing[0]}",
                                 hint="put the shared media beside the repository (--shared-dir)")
        parts = build_episode([p.source(media) for p in eval_set.parts], video)
        timeline_file.write_text(json.dumps([asdict(p) for p in parts], indent=1))
    return video, timeline_of(eval_set.parts, json.loads(timeline_file.read_text()))


def run_people_eval(settings: Settings, *, set_name: str | None = None, memory: str | None = None,
                    chat: ChatModel | None = None, judge: Judge | None = None, limit: int | None = None,
                    fresh: bool = False, show_progress: bool = True) -> dict[str, Any]:
    """Build, ingest and answer; the report (see :func:`summary`) with every scored answer under ``answers``.

    ``memory``: where the episode is ingested (default: a file beside the cached episode; ``fresh`` deletes
    that file first, so the run measures the current code's ingest). ``chat``: the answering model (default:
    the one ``settings.llm`` names); a judge may share it.
    """
    eval_set = load_eval_set(set_name) if set_name else load_eval_set()
    return run_eval_set(settings, eval_set, memory=memory, chat=chat, judge=judge, limit=limit, fresh=fresh,
                        show_progress=show_progress)


def run_eval_set(settings: Settings, eval_set: EvalSet, *, memory: str | None = None, chat: ChatModel | None = None,
                 judge: Judge | None = None, limit: int | None = None, fresh: bool = False,
                 show_progress: bool = True) -> dict[str, Any]:
    """:func:`run_people_eval` on a set given as a value (a generated episode's, say): the same build, ingest,
    answering and scoring."""
    from m3agent.control.answering import config_for
    from m3agent.pipeline import ingest_source
    from m3agent.store import open_memory

    video, timeline = build(eval_set, settings)
    default = video.with_suffix(".db")
    if fresh and memory is None:
        for old in default.parent.glob(default.name + "*"):  # the file, its WAL and its lock folder
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    run = settings.model_copy(update={"memory": parse_location(memory or str(default))})
    started = time.perf_counter()
    report = ingest_source(run, str(video), video_id=eval_set.name, show_progress=show_progress)
    ingest_s = time.perf_counter() - started
    questions = eval_set.questions[:limit]
    with open_memory(run, readonly=True, create=False) as store:
        scored = _answer_all(questions, store, run, timeline, (chat, judge), eval_set.name, show_progress)
    result = summary(scored)
    result.update(set=eval_set.name, episode_s=round(max(e for _, e in timeline.values()), 1),
                  ingest_s=round(ingest_s, 1), ingest_rtf=round(report.rtf, 3), memories=report.memories_written,
                  mode=config_for(run).mode, graph=run.control.graph, llm=run.llm,
                  judge=None if judge is None else judge.info(), answers=[asdict(s) for s in scored])
    return result


def _answer_all(questions: tuple[EvalQuestion, ...], store: MemoryStore, settings: Settings, timeline: Timeline,
                models: tuple[ChatModel | None, Judge | None], video_id: str, show_progress: bool) -> list[Scored]:
    from m3agent.bench.progress import progress
    from m3agent.embed import embedder_for_store
    from m3agent.llm import chat_model_from_settings
    from m3agent.llm.spec import uses_llm

    chat, judge = models
    if chat is None and uses_llm(settings.llm):
        chat = chat_model_from_settings(settings)
    embedder = embedder_for_store(store.embedding_model(), settings.embedder)
    out = []
    with progress("questions", len(questions), enabled=show_progress) as advance:
        for q in questions:
            out.append(_score(q, store, settings, timeline, (chat, embedder), judge, video_id))
            advance()
    return out


def _score(q: EvalQuestion, store: MemoryStore, settings: Settings, timeline: Timeline,
           models: tuple[ChatModel | None, Embedder], judge: Judge | None, video_id: str) -> Scored:
    from m3agent.control.answering import answer_steps, run_to_answer

    question, gold = render(q.question, timeline), render(q.answer, timeline)
    started = time.perf_counter()
    steps = list(answer_steps(question, store, settings, chat=models[0], embedder=models[1], video_id=video_id))
    result = run_to_answer(iter(steps))
    latency = time.perf_counter() - started
    plan = next((s.text.removeprefix(PLAN_THOUGHT).split()[0] for s in steps
                 if isinstance(s, Thought) and s.text.startswith(PLAN_THOUGHT)), None)
    verdict = judge.judge(question, gold, result.text).correct if judge is not None else None
    return Scored(q.id, q.type, question, gold, result.text, keyword_correct(q, result.text, timeline), verdict,
                  evidence_hit(q, _cited_spans(result), timeline), round(latency, 2),
                  tuple(internal_ids(result.text)), plan, None if plan is None or not q.asks else plan in q.asks)


def _cited_spans(result: Answer) -> list[tuple[float, float]]:
    cited = [e for e in result.evidence if e.cited] or list(result.evidence)
    return [(e.start_s, e.end_s) for e in cited]


def summary(scored: list[Scored]) -> dict[str, Any]:
    """Per type and overall: questions, keyword and judged accuracy, evidence hit rate, p50 latency; leaks."""
    by_type = {t: _figures([s for s in scored if s.type == t]) for t in TYPES if any(s.type == t for s in scored)}
    return {"overall": _figures(scored), "by_type": by_type,
            "leaked_ids": {s.id: list(s.leaked_ids) for s in scored if s.leaked_ids}}


def _figures(rows: list[Scored]) -> dict[str, Any]:
    judged = [s.judged for s in rows if s.judged is not None]
    planned = [s.plan_right for s in rows if s.plan_right is not None]
    return {
        "questions": len(rows),
        "keyword_accuracy": round(sum(s.keyword for s in rows) / len(rows), 3) if rows else None,
        "judged_accuracy": round(sum(judged) / len(judged), 3) if judged else None,
        "evidence_hit_rate": round(sum(s.evidence_hit for s in rows) / len(rows), 3) if rows else None,
        "p50_latency_s": round(statistics.median(s.latency_s for s in rows), 2) if rows else None,
        "plan_accuracy": round(sum(planned) / len(planned), 3) if planned else None,
    }
