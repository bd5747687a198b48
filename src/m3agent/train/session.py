"""``m3agent train control``: split, train (or resume), export, and score before / after on held-out questions.

Each stage is its own function so a long run can be stopped after training and exported or scored later.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.train.catalogue import model_path, run_dir
from m3agent.train.episodes import Split, ingest, load_samples, locomo_store_path, split_by_conversation

if TYPE_CHECKING:
    from m3agent.embed import Embedder
    from m3agent.settings import Settings
    from m3agent.store.protocol import MemoryStore
    from m3agent.train.episodes import Episode
    from m3agent.train.model import Base
    from m3agent.train.rollout import Rollout
    from m3agent.train.trainer import TrainResult


@dataclass(frozen=True, slots=True)
class Plan:
    """What a command trains on: the settings, the split and the store path."""

    settings: Settings
    split: Split
    store_path: Path
    data: Path | None = None


def plan(settings: Settings, *, data: Path | None = None, max_held_out: int | None = None,
         store_path: Path | None = None) -> Plan:  # fmt: skip
    """The split of LoCoMo by conversation under ``settings.train``."""
    from m3agent.embed import create_embedder

    train = settings.train
    samples = load_samples(settings, data)
    split = split_by_conversation(samples, train.held_out, train.categories, max_train=train.max_questions,
                                  max_held_out=max_held_out, seed=train.seed)  # fmt: skip
    path = store_path or locomo_store_path(settings, create_embedder(settings.embedder))
    return Plan(settings, split, path, data)


def train(the_plan: Plan, name: str, *, show_progress: bool = True) -> TrainResult:
    """Train run ``name`` (resuming where it stopped) on the plan's training episodes, by ``train.method``:
    expert iteration (:mod:`m3agent.train.expert`) or GRPO (:mod:`m3agent.train.trainer`)."""
    from m3agent.embed import create_embedder
    from m3agent.store import open_store
    from m3agent.train.expert import train_expert
    from m3agent.train.trainer import train_control

    settings = the_plan.settings
    embedder = create_embedder(settings.embedder)
    the_plan.store_path.parent.mkdir(parents=True, exist_ok=True)
    folder = run_dir(settings.resolved_cache_dir(), name)
    expert = settings.train.method == "expert"
    held_out = _drawn(the_plan.split.held_out, settings.train.eval_questions, settings.train.seed) if expert else ()
    with open_store(str(the_plan.store_path)) as store:
        _ingest_episodes(store, embedder, settings, the_plan, [*the_plan.split.train, *held_out])

        def environment(tokenizer: Any) -> Rollout:
            return rollout(settings, store, embedder, tokenizer)

        if not expert:
            return train_control(settings, folder, the_plan.split, environment, show_progress=show_progress)

        def evaluate(gguf: Path) -> float:
            return held_out_f1(settings, store, embedder, held_out, gguf)

        return train_expert(settings, folder, the_plan.split, environment,
                            evaluate=evaluate if held_out else None, show_progress=show_progress)  # fmt: skip


def _drawn(episodes: Sequence[Episode], count: int, seed: int) -> Sequence[Episode]:
    """A seeded draw of ``count`` episodes (all when fewer), so a held-out curve spans the held-out conversations."""
    import random

    return episodes if count >= len(episodes) else random.Random(seed).sample(list(episodes), count)


def held_out_f1(settings: Settings, store: MemoryStore, embedder: Embedder, episodes: Sequence[Episode],
                gguf: Path) -> float:  # fmt: skip
    """Mean answer F1 of the model in ``gguf`` on ``episodes`` in the agent loop through llama.cpp (the product's
    path, at the run's threads and rounds)."""
    from m3agent.train.evaluate import answer_f1

    threads = settings.train.threads
    spec = f"llamacpp:{gguf}?n_threads={threads}&n_threads_batch={threads}"
    records = answer_f1(settings, store, embedder, episodes, spec, rounds=settings.train.rounds)
    return round(sum(float(r["f1"]) for r in records) / max(1, len(records)), 4)


def rollout(settings: Settings, store: MemoryStore, embedder: Embedder, tokenizer: Any) -> Rollout:
    """The episode environment over ``store`` with the tokenizer's chat frame and the agent's settings."""
    from m3agent.control import AgentConfig
    from m3agent.train.rollout import ChatFrame, Rollout

    config = AgentConfig.from_settings(settings.control, None, mode="agent", rounds=settings.train.rounds)
    return Rollout(store, embedder, ChatFrame.of(tokenizer), config, settings.train)


def export(settings: Settings, name: str) -> Path:
    """Merge run ``name``'s adapter into the base and write ``<cache>/models/trained/<name>.gguf`` + card."""
    from m3agent.train.curve import read_steps
    from m3agent.train.export import merged_state, write_card, write_gguf
    from m3agent.train.model import prepare_base
    from m3agent.train.trainer import ADAPTER, RUN_FILE

    cache = settings.resolved_cache_dir()
    folder = run_dir(cache, name)
    facts = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    base = trained_base(settings, facts)
    out = model_path(cache, name)
    out.parent.mkdir(parents=True, exist_ok=True)
    _check_trained(folder, facts)
    policy = _last_policy(folder, facts)
    if policy is not None:  # expert iteration exported its last policy already: the same merge, copied
        shutil.copyfile(policy, out.with_name(out.name + ".partial"))
        out.with_name(out.name + ".partial").replace(out)
    else:
        write_gguf(base.gguf, merged_state(prepare_base(base), folder / ADAPTER, settings.train.threads), out, name)
    steps = [s for s in read_steps(folder) if s.get("reward") is not None]
    expert = facts["train"].get("method") == "expert"
    last = steps[-1:] if expert else steps[-5:]
    facts.update(name=name, steps=steps[-1]["step"] if steps else 0, scores=facts.get("scores"),
                 final_reward=round(sum(s["reward"] for s in last) / len(last), 4) if last else None,
                 final_f1=round(sum(s["f1"] for s in last) / len(last), 4) if last else None,
                 iterations=steps if expert else None)  # fmt: skip
    (folder / RUN_FILE).write_text(json.dumps(facts, indent=2), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(facts, indent=2), encoding="utf-8")
    write_card(out, facts)
    return out


def _check_trained(folder: Path, facts: dict[str, Any]) -> None:
    """A :class:`ModelError` saying what to change when the run has no adapter (nothing was ever kept)."""
    from m3agent.errors import ModelError
    from m3agent.train.trainer import ADAPTER

    if (folder / ADAPTER / "adapter_config.json").is_file():
        return
    if facts["train"].get("method") == "expert":
        raise ModelError(f"run {folder.name} has no trained adapter: no iteration kept a rollout to fine-tune on",
                         hint="sample more (--samples), lower train.keep_min_reward, or use train.keep = "
                              "'threshold'; then run `m3agent train control` again with more --iterations")  # fmt: skip
    raise ModelError(f"run {folder.name} has no trained adapter", hint="run `m3agent train control` first")


def _last_policy(folder: Path, facts: dict[str, Any]) -> Path | None:
    """The last expert iteration's policy GGUF (the run's adapter merged), or None (GRPO: merge it now)."""
    if facts["train"].get("method") != "expert":
        return None
    from m3agent.train.expert import latest_trained

    last = latest_trained(folder, int(facts["train"]["iterations"]) + 1)
    return last.policy if last is not None else None


def trained_base(settings: Settings, facts: dict[str, Any]) -> Base:
    """The base run ``facts`` (its ``run.json``) was trained from, refused when its file changed since."""
    from m3agent.errors import ModelError
    from m3agent.train.model import resolve_base

    base = resolve_base(settings, str(facts["train"]["base"]))
    trained_from = facts.get("base_sha256")
    if trained_from and trained_from != base.sha256:
        raise ModelError(f"{base.gguf} is not the file this run was trained from (sha256 {base.sha256[:12]}, "
                         f"trained from {str(trained_from)[:12]})",
                         hint="restore that GGUF at this path, or train a new run (--name) from this one")  # fmt: skip
    return base


def before_after(the_plan: Plan, name: str) -> dict[str, Any]:
    """Held-out F1 of the base model and of trained model ``name`` in the agent loop (same questions, same
    rounds as training), and of the base model's one-shot grounded answers (what the loop must beat to be worth
    its time), with bootstrap intervals and the paired differences. Each answer is kept as it comes in the run's
    ``held_out/<side>.jsonl``, so a call stopped mid-way resumes where it stopped (for the same model and
    questions)."""
    from m3agent.embed import create_embedder
    from m3agent.store import open_store
    from m3agent.train.evaluate import answer_f1, mean_interval, paired_difference
    from m3agent.train.model import resolve_base

    settings = the_plan.settings
    embedder = create_embedder(settings.embedder)
    base = resolve_base(settings, settings.train.base).spec
    trained = f"llamacpp:{model_path(settings.resolved_cache_dir(), name)}"
    sides = {"grounded": (base, "grounded"), "before": (base, "agent"), "after": (trained, "agent")}  # quickest first
    episodes = the_plan.split.held_out
    folder = run_dir(settings.resolved_cache_dir(), name) / HELD_OUT
    folder.mkdir(parents=True, exist_ok=True)
    f1: dict[str, list[float]] = {}
    with open_store(str(the_plan.store_path)) as store:
        _ingest_episodes(store, embedder, settings, the_plan, episodes)
        for side, (spec, mode) in sides.items():
            kept = _Answers(folder / f"{side}.jsonl", spec, mode, settings.train.rounds)
            records = answer_f1(settings, store, embedder, episodes, spec, rounds=settings.train.rounds, mode=mode,
                                done=kept.read(), on_answer=kept.add)  # fmt: skip
            f1[side] = [float(r["f1"]) for r in records]
    return {"questions": len(episodes), "conversations": list(the_plan.split.held_out_conversations),
            "rounds": settings.train.rounds, "models": {side: spec for side, (spec, _) in sides.items()},
            **{side: mean_interval(values).to_dict() for side, values in f1.items()},
            "difference": paired_difference(f1["before"], f1["after"]).to_dict(),
            "after_vs_grounded": paired_difference(f1["grounded"], f1["after"]).to_dict()}  # fmt: skip


HELD_OUT = "held_out"
"""The run's folder of held-out answers, one JSONL file per side (before, after, grounded)."""


class _Answers:
    """The held-out answers of one side, kept line by line (:class:`~m3agent.bench.results_io.JsonlLog`: a line
    torn by a killed run is dropped) with the model, mode and rounds they were given with: lines given otherwise
    are not reused."""

    def __init__(self, path: Path, spec: str, mode: str, rounds: int) -> None:
        from m3agent.bench.results_io import JsonlLog

        self.log, self.key = JsonlLog(path), {"model": spec, "mode": mode, "rounds": rounds}

    def read(self) -> dict[str, dict[str, Any]]:
        return {r["qid"]: r for r in self.log.read() if all(r.get(k) == v for k, v in self.key.items())}

    def add(self, record: dict[str, Any]) -> None:
        self.log.append({**record, **self.key})


def add_scores(settings: Settings, name: str, scores: dict[str, Any]) -> None:
    """Record held-out scores in the trained model's facts and card, and in the run's curve."""
    from m3agent.train.export import write_card

    out = model_path(settings.resolved_cache_dir(), name)
    facts_file = out.with_suffix(".json")
    facts = json.loads(facts_file.read_text(encoding="utf-8"))
    facts["scores"] = scores
    facts_file.write_text(json.dumps(facts, indent=2), encoding="utf-8")
    write_card(out, facts)
    _curve_with_scores(run_dir(settings.resolved_cache_dir(), name), scores)


def _curve_with_scores(run: Path, scores: dict[str, Any]) -> None:
    """The held-out F1 of the untrained loop (iteration 0) and of the trained one (the last iteration) in an expert
    iteration run's record and curve, where the iterations measured none themselves (a run trained with
    ``eval_questions`` 0 and scored afterwards): the plot beside the run then shows what training did."""
    from m3agent.train.curve import append_step, plot, read_steps

    steps = read_steps(run)
    iterations = [s for s in steps if s.get("iteration")]
    if not iterations:
        return  # a GRPO run's steps, or nothing trained yet
    held = {int(s["iteration"]) for s in steps if s.get("iteration") is not None and s.get("held_out_f1") is not None}
    if 0 not in held:
        append_step(run, {"step": 0, "iteration": 0, "method": "expert", "held_out_f1": scores["before"]["mean"],
                          "held_out_questions": scores["questions"]})  # fmt: skip
    last = iterations[-1]
    if int(last["iteration"]) not in held:
        append_step(run, {**last, "held_out_f1": scores["after"]["mean"], "held_out_questions": scores["questions"]})
    plot(run)


def _ingest_episodes(store: MemoryStore, embedder: Embedder, settings: Settings, the_plan: Plan,
                     episodes: Sequence[Episode]) -> None:  # fmt: skip
    """Make sure the conversations of ``episodes`` are in the store, and only those: a conversation costs
    minutes to embed on 2 cores (all ten: ~15 min), and a run drawing a few questions needs a few."""
    wanted = {e.video_id for e in episodes}
    samples = [s for s in load_samples(settings, the_plan.data) if s.sample_id in wanted]
    ingest(store, embedder, samples, settings.media.clip_seconds)
