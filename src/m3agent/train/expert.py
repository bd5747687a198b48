"""Expert iteration (rejection-sampling fine-tuning, as ReST-EM / STaR / RAFT): the CPU way to train the policy.

Why: GRPO samples its rollouts in transformers (fp32, ~0.2 s a sampled token on 2 cores); the packaged llama.cpp
runtime samples the same tokens ~2.5x faster and reads a prompt much faster still. Here every rollout is sampled
by that runtime, and transformers only runs the fine-tuning. Per iteration ``n`` (``iterations/<n>/`` in the run):

1. **Sample**: per training question, one greedy rollout and ``train.samples`` (K) rollouts at
   ``train.temperature`` of the agent loop (:class:`~m3agent.train.rollout.Rollout`: the agent prompts, the real
   store and search), played by the policy GGUF of iteration ``n - 1`` (the base GGUF first) in a llama.cpp worker
   continuing the rollout's own token sequence (:meth:`~m3agent.llm.llamacpp.LlamaCppChat.continue_tokens`), so
   the tokens trained on are exactly the ones sampled, in the runtime's chat template; each is scored by
   :func:`m3agent.train.reward.reward`. One JSON line per question (``rollouts.jsonl``) is written as soon as
   its rollouts are done: an interrupted iteration resumes after its last finished question.
2. **Keep** (:func:`kept`): per question the best ``train.keep_per_question`` distinct rollouts that reach
   ``train.keep_min_reward`` and (``train.keep = "beat_greedy"``) beat the greedy rollout of the same policy,
   so the policy learns what it does better only when it samples, not what it already does.
3. **Fine-tune** (:mod:`m3agent.train.sft`): TRL's ``SFTTrainer`` on the kept rollouts, the loss on the
   policy's sampled tokens only (template and observation tokens masked by the rollout's ``env_mask``), LoRA
   continued from iteration ``n - 1``'s adapter (a fresh one first).
4. **Export**: the adapter merged into the base and written as ``policy.gguf``
   (:mod:`m3agent.train.export`): the next iteration's sampler, and the product's model after the last.
5. **Record**: the iteration's figures (rewards, kept rollouts, trained tokens, minutes, held-out F1 when
   ``train.eval_questions`` is set) appended to ``metrics.jsonl`` and drawn in ``curve.png``; ``record.json``
   marks the iteration done. An iteration that keeps nothing trains nothing: the policy stays as it was.
"""

from __future__ import annotations

import json
import shutil
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.train.curve import append_step, plot

if TYPE_CHECKING:
    from m3agent.llm.llamacpp import LlamaCppChat
    from m3agent.settings import Settings, TrainSettings
    from m3agent.train.episodes import Episode, Split
    from m3agent.train.model import Base
    from m3agent.train.rollout import Rollout, Trajectory
    from m3agent.train.trainer import TrainResult

ITERATIONS = "iterations"
ROLLOUTS = "rollouts.jsonl"
POLICY = "policy.gguf"
RECORD = "record.json"
EVAL = "held_out.json"
SFT_ADAPTER = "adapter"
CONTEXT_MARGIN = 1024
"""Tokens of the worker's context past ``train.max_context_tokens`` and a reply: the last observation and reply
come after the check that ends a rollout (:meth:`Rollout._full`)."""

Evaluate = Callable[[Path], float]
"""Held-out mean answer F1 of the model in a GGUF file (agent loop through llama.cpp)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One scored rollout as stored: its token sequence, mask and reward terms."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    env_mask: tuple[int, ...]
    reward: float
    f1: float
    evidence_f1: float
    format_errors: int
    rounds: int
    answer: str

    @classmethod
    def of(cls, trajectory: Trajectory) -> Sample:
        score = trajectory.reward
        answer = trajectory.answer
        return cls(tuple(trajectory.prompt_ids), tuple(trajectory.completion_ids), tuple(trajectory.env_mask),
                   score.total if score else 0.0, score.f1 if score else 0.0, score.evidence_f1 if score else 0.0,
                   trajectory.format_errors, trajectory.rounds,
                   answer.text if answer is not None and answer.answered else "")  # fmt: skip

    @property
    def trained_tokens(self) -> int:
        """The policy's own tokens (the ones the fine-tuning's loss is taken on)."""
        return sum(self.env_mask)


@dataclass(frozen=True, slots=True)
class QuestionRollouts:
    """A question's greedy rollout and its K sampled ones (one line of ``rollouts.jsonl``)."""

    qid: str
    greedy: Sample
    sampled: tuple[Sample, ...]
    seconds: float

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> QuestionRollouts:
        raw = json.loads(line)
        return cls(raw["qid"], _sample(raw["greedy"]), tuple(_sample(s) for s in raw["sampled"]), raw["seconds"])


def _sample(raw: dict[str, Any]) -> Sample:
    return Sample(tuple(raw["prompt_ids"]), tuple(raw["completion_ids"]), tuple(raw["env_mask"]),
                  float(raw["reward"]), float(raw["f1"]), float(raw["evidence_f1"]), int(raw["format_errors"]),
                  int(raw["rounds"]), str(raw["answer"]))  # fmt: skip


def kept(rollouts: QuestionRollouts, train: TrainSettings) -> list[Sample]:
    """The rollouts of a question fine-tuned on: distinct, reaching ``keep_min_reward``, beating the greedy one
    (``keep = "beat_greedy"``), the best ``keep_per_question`` first."""
    bar = rollouts.greedy.reward if train.keep == "beat_greedy" else float("-inf")
    chosen: list[Sample] = []
    seen: set[tuple[int, ...]] = set()
    for sample in sorted(rollouts.sampled, key=lambda s: -s.reward):
        if sample.reward < train.keep_min_reward or sample.reward <= bar or sample.completion_ids in seen:
            continue
        seen.add(sample.completion_ids)
        chosen.append(sample)
    return chosen[: train.keep_per_question]


@dataclass
class LlamaPolicy:
    """The :class:`~m3agent.train.rollout.Policy` of a GGUF in a llama.cpp worker: continues the rollout's tokens.

    ``greedy`` samples at temperature 0 whatever the rollout asks; ``seed`` is the first call's sampling seed,
    each later call the next one, so the K rollouts of a question draw apart. (Draws repeat only from a fresh
    worker: a prompt prefix reused from an earlier call shifts the logits by rounding, so a resumed iteration
    samples its next question anew, which changes no statistics.)"""

    chat: LlamaCppChat
    stop_ids: tuple[int, ...]
    seed: int
    greedy: bool = False
    sampled_tokens: int = 0

    def generate(self, ids: Sequence[int], max_new_tokens: int, temperature: float,
                 schema: Mapping[str, Any] | None = None) -> list[int]:
        """The sampled ids (under ``schema``'s grammar when given); none when the context is full (the rollout
        then scores an unreadable reply, as the loop's own overflow would end the answer), so one long rollout
        does not stop the iteration."""
        from m3agent.errors import ContextOverflowError

        try:
            out = self.chat.continue_tokens(ids, max_tokens=max_new_tokens, stop_tokens=self.stop_ids, seed=self.seed,
                                            temperature=0.0 if self.greedy else temperature,
                                            schema=schema)  # fmt: skip
        except ContextOverflowError:
            out = []
        self.seed += 1
        self.sampled_tokens += len(out)
        return out


@dataclass(frozen=True, slots=True)
class Iteration:
    """The files of iteration ``number`` of a run."""

    folder: Path
    number: int

    @classmethod
    def at(cls, run_dir: Path, number: int) -> Iteration:
        return cls(run_dir / ITERATIONS / str(number), number)

    @property
    def rollouts(self) -> Path:
        return self.folder / ROLLOUTS

    @property
    def adapter(self) -> Path:
        return self.folder / SFT_ADAPTER

    @property
    def policy(self) -> Path:
        return self.folder / POLICY

    @property
    def done(self) -> bool:
        return (self.folder / RECORD).is_file()

    def trained(self) -> bool:
        return (self.adapter / "adapter_config.json").is_file()


def read_rollouts(path: Path) -> list[QuestionRollouts]:
    """The questions already rolled out in an iteration; a line cut short by an interruption is dropped."""
    if not path.is_file():
        return []
    done = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            done.append(QuestionRollouts.from_json(line))
        except (ValueError, KeyError, TypeError):
            continue
    return done


def latest_trained(run_dir: Path, before: int) -> Iteration | None:
    """The last iteration before ``before`` that fine-tuned (its adapter and policy GGUF), or None (the base)."""
    for number in range(before - 1, 0, -1):
        iteration = Iteration.at(run_dir, number)
        if iteration.trained() and iteration.policy.is_file():
            return iteration
    return None


def train_expert(
    settings: Settings,
    run_dir: Path,
    split: Split,
    rollout_for: Callable[[Any], Rollout],
    *,
    evaluate: Evaluate | None = None,
    show_progress: bool = True,
) -> TrainResult:
    """Run (or resume) expert iterations 1..``settings.train.iterations`` of the run in ``run_dir``.

    ``rollout_for(tokenizer)`` builds the episode environment; ``evaluate`` scores a GGUF on held-out questions
    (the base once, then each iteration's policy; None: no held-out curve)."""
    from m3agent.train.model import prepare_base, resolve_base
    from m3agent.train.trainer import ADAPTER, TrainResult, check_same_base, write_run

    started = time.perf_counter()
    train = settings.train
    base = resolve_base(settings, train.base)
    check_same_base(run_dir, base.sha256)
    run_dir.mkdir(parents=True, exist_ok=True)
    folder = prepare_base(base)
    environment = rollout_for(_tokenizer(folder))
    write_run(run_dir, settings, split, base)
    if evaluate is not None:
        _evaluate_base(run_dir, base, evaluate)
    for number in range(1, train.iterations + 1):
        iteration = Iteration.at(run_dir, number)
        if not iteration.done:
            _iterate(iteration, settings, run_dir, split.train, environment, base, folder, evaluate, show_progress)
            _say_left(run_dir, train.iterations - number, show_progress)
    last = latest_trained(run_dir, train.iterations + 1)
    adapter = run_dir / ADAPTER
    if last is not None:
        shutil.rmtree(adapter, ignore_errors=True)
        shutil.copytree(last.adapter, adapter)
    return TrainResult(run_dir, adapter, train.iterations, time.perf_counter() - started, plot(run_dir))


def _tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _iterate(iteration: Iteration, settings: Settings, run_dir: Path, episodes: Sequence[Episode],
             environment: Rollout, base: Base, folder: Path, evaluate: Evaluate | None, show_progress: bool
             ) -> None:  # fmt: skip
    """One iteration, each stage skipped when an earlier call finished it."""
    began, cpu = time.perf_counter(), cpu_seconds()
    previous = latest_trained(run_dir, iteration.number)
    sampler = previous.policy if previous is not None else base.gguf
    iteration.folder.mkdir(parents=True, exist_ok=True)
    rollouts, rollout_s, rollout_cpu = _sample_all(iteration, settings, episodes, environment, sampler, show_progress)
    examples = [s for q in rollouts for s in kept(q, settings.train)]
    sft: dict[str, Any] = {"sft_loss": None, "sft_s": 0.0, "sft_cpu_s": 0.0, "export_s": 0.0}
    policy = sampler
    if examples:
        sft = _fine_tune_and_export(iteration, settings, folder, base, previous, examples, run_dir.name)
        policy = iteration.policy
    held_out, eval_s = _evaluate(iteration, policy, evaluate)
    sampled_s = sum(q.seconds for q in rollouts)  # every call's, from the checkpoints: a resumed call sampled few
    record = _record(iteration.number, settings.train, rollouts, examples, sampled_s, sft, held_out, eval_s)
    record.update(minutes=round((time.perf_counter() - began - rollout_s + sampled_s) / 60, 2),
                  rollout_cpu_s=round(rollout_cpu, 1), cpu_s=round(cpu_seconds() - cpu, 1))  # fmt: skip
    append_step(run_dir, record)
    (iteration.folder / RECORD).write_text(json.dumps(record, indent=2), encoding="utf-8")
    plot(run_dir)


def cpu_seconds() -> float:
    """CPU seconds of this process and of its ended children (the llama.cpp worker, once closed), all threads:
    on a shared machine, CPU seconds / threads estimates an idle machine's time."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _sample_all(iteration: Iteration, settings: Settings, episodes: Sequence[Episode], environment: Rollout,
                sampler: Path, show_progress: bool) -> tuple[list[QuestionRollouts], float, float]:  # fmt: skip
    """Every question's rollouts (those already on disk read back), and the seconds and CPU seconds (the
    worker's included) the new ones took."""
    done = {q.qid: q for q in read_rollouts(iteration.rollouts)}
    if iteration.rollouts.is_file():  # rewritten whole: new lines must not continue a line an interruption cut
        iteration.rollouts.write_text("".join(q.to_json() + "\n" for q in done.values()), encoding="utf-8")
    todo = [e for e in episodes if e.qid not in done]
    began, cpu = time.perf_counter(), cpu_seconds()
    if todo:
        with _worker(sampler, settings.train) as chat, _bar(len(episodes), len(done), iteration.number,
                                                             show_progress) as advance:  # fmt: skip
            from m3agent.train.model import stop_ids

            stops = stop_ids(environment.frame.tokenizer, environment.frame.end_of_turn)
            with iteration.rollouts.open("a", encoding="utf-8") as out:
                for episode in todo:
                    result = _roll_out(episode, environment, chat, stops, settings.train, iteration.number)
                    out.write(result.to_json() + "\n")
                    out.flush()
                    done[episode.qid] = result
                    advance(result)
    return [done[e.qid] for e in episodes if e.qid in done], time.perf_counter() - began, cpu_seconds() - cpu


def _roll_out(episode: Episode, environment: Rollout, chat: LlamaCppChat, stops: tuple[int, ...],
              train: TrainSettings, number: int) -> QuestionRollouts:  # fmt: skip
    """The greedy rollout and K sampled ones of one question; seeds depend on the run's seed, the iteration,
    the question and the sample only."""
    began = time.perf_counter()
    greedy = environment.play(episode, LlamaPolicy(chat, stops, 0, greedy=True))
    sampled = []
    for k in range(train.samples):
        seed = zlib.crc32(f"{train.seed}:{number}:{episode.qid}:{k}".encode()) % (1 << 30)
        sampled.append(Sample.of(environment.play(episode, LlamaPolicy(chat, stops, seed * 16))))
    return QuestionRollouts(episode.qid, Sample.of(greedy), tuple(sampled), round(time.perf_counter() - began, 2))


@contextmanager
def _worker(gguf: Path, train: TrainSettings) -> Iterator[LlamaCppChat]:
    """A llama.cpp worker for ``gguf`` with ``train.threads`` threads, ended on leaving (its memory goes back
    before the fine-tuning loads transformers)."""
    from m3agent.llm.llamacpp import LlamaCppChat

    n_ctx = train.max_context_tokens + train.max_new_tokens + CONTEXT_MARGIN
    chat = LlamaCppChat(gguf, n_ctx=n_ctx, n_threads=train.threads, n_threads_batch=train.threads,
                        prompt_cache_mb=0, seed=train.seed)  # fmt: skip
    try:
        yield chat
    finally:
        chat.close()


@contextmanager
def _bar(total: int, done: int, number: int, show: bool) -> Iterator[Callable[[QuestionRollouts], None]]:
    """A progress bar over the iteration's questions with the time left (from the questions done in this call);
    where stderr is no terminal (a run under ``nohup`` writing a log), a plain line a question instead, since a
    bar there shows nothing until the iteration's rollouts are all done, hours later."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("left"), TimeRemainingColumn())  # fmt: skip
    console = Console(stderr=True)
    bar = Progress(*columns, console=console, disable=not show or not console.is_terminal)
    task = bar.add_task(f"iteration {number}: rollouts", total=total, completed=done)
    rewards: list[float] = []
    started, finished = time.perf_counter(), done

    def advance(result: QuestionRollouts) -> None:
        nonlocal finished
        rewards.extend(s.reward for s in result.sampled)
        finished += 1
        mean = sum(rewards) / len(rewards)
        bar.update(task, advance=1, description=f"iteration {number}: rollouts (reward {mean:.3f})")
        if show and not console.is_terminal:
            each = (time.perf_counter() - started) / (finished - done)
            console.print(f"iteration {number}: rollouts {finished}/{total} (reward {mean:.3f}), about "
                          f"{each * (total - finished) / 60:.0f} min left", soft_wrap=True, highlight=False)

    with bar:
        yield advance


def _fine_tune_and_export(iteration: Iteration, settings: Settings, folder: Path, base: Base,
                          previous: Iteration | None, examples: list[Sample], name: str) -> dict[str, Any]:  # fmt: skip
    """The fine-tuned adapter and its merged GGUF (either skipped when already on disk), with their figures."""
    from m3agent.train.export import merged_state, write_gguf
    from m3agent.train.sft import fine_tune

    figures: dict[str, Any] = {"sft_loss": None, "sft_s": 0.0, "sft_cpu_s": 0.0, "export_s": 0.0}
    if not iteration.trained():
        began, cpu = time.perf_counter(), cpu_seconds()
        figures["sft_loss"] = fine_tune(settings.train, folder, previous.adapter if previous else None, examples,
                                        iteration.adapter)  # fmt: skip
        figures["sft_s"], figures["sft_cpu_s"] = round(time.perf_counter() - began, 1), round(cpu_seconds() - cpu, 1)
    if not iteration.policy.is_file():
        began = time.perf_counter()
        write_gguf(base.gguf, merged_state(folder, iteration.adapter, settings.train.threads), iteration.policy,
                   f"{name}-iteration-{iteration.number}")  # fmt: skip
        figures["export_s"] = round(time.perf_counter() - began, 1)
    return figures


def _evaluate(iteration: Iteration, policy: Path, evaluate: Evaluate | None) -> tuple[float | None, float]:
    """Held-out F1 of the iteration's policy (kept in ``held_out.json``, so a resumed call does not redo it)."""
    path = iteration.folder / EVAL
    if evaluate is None:
        return None, 0.0
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        return float(saved["f1"]), float(saved["seconds"])
    began = time.perf_counter()
    f1 = evaluate(policy)
    seconds = round(time.perf_counter() - began, 1)
    path.write_text(json.dumps({"f1": f1, "seconds": seconds, "model": str(policy)}), encoding="utf-8")
    return f1, seconds


def _evaluate_base(run_dir: Path, base: Base, evaluate: Evaluate) -> None:
    """Iteration 0 of the held-out curve: the base model (recorded once)."""
    zero = Iteration.at(run_dir, 0)
    if zero.done:
        return
    zero.folder.mkdir(parents=True, exist_ok=True)
    f1, seconds = _evaluate(zero, base.gguf, evaluate)
    record = {"step": 0, "iteration": 0, "method": "expert", "held_out_f1": f1, "eval_s": seconds}
    append_step(run_dir, record)
    (zero.folder / RECORD).write_text(json.dumps(record, indent=2), encoding="utf-8")


def _record(number: int, train: TrainSettings, rollouts: list[QuestionRollouts], examples: list[Sample],
            rollout_s: float, sft: dict[str, Any], held_out: float | None, eval_s: float
            ) -> dict[str, Any]:  # fmt: skip
    """The iteration's figures: means over its sampled rollouts and over its greedy ones, what was kept."""
    sampled = [s for q in rollouts for s in q.sampled]
    greedy = [q.greedy for q in rollouts]

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 4) if values else 0.0

    return {
        "step": number, "iteration": number, "method": "expert", "questions": len(rollouts),
        "rollouts": len(sampled) + len(greedy), "reward": mean([s.reward for s in sampled]),
        "f1": mean([s.f1 for s in sampled]), "evidence_f1": mean([s.evidence_f1 for s in sampled]),
        "format_errors": mean([float(s.format_errors) for s in sampled]),
        "rounds": mean([float(s.rounds) for s in sampled]),
        "greedy_reward": mean([s.reward for s in greedy]), "greedy_f1": mean([s.f1 for s in greedy]),
        "kept": len(examples), "kept_questions": sum(1 for q in rollouts if kept(q, train)),
        "sampled_tokens": sum(s.trained_tokens for s in [*sampled, *greedy]),
        "sft_tokens": sum(s.trained_tokens for s in examples),
        "sft_sequence_tokens": sum(len(s.prompt_ids) + len(s.completion_ids) for s in examples),
        "rollout_s": round(rollout_s, 1), "rollout_s_per_question": round(sum(q.seconds for q in rollouts)
                                                                           / max(1, len(rollouts)), 1),
        **sft, "held_out_f1": held_out, "eval_s": eval_s,
    }  # fmt: skip


def _say_left(run_dir: Path, remaining: int, show: bool) -> None:
    """After an iteration: its minutes and the estimate for the iterations left (same questions, same K)."""
    from m3agent.train.curve import read_steps

    done = [s for s in read_steps(run_dir) if s.get("minutes") is not None]
    if not show or not done:
        return
    from rich.console import Console

    last = done[-1]
    Console(stderr=True).print(
        f"iteration {last['iteration']}: {last['minutes']:.1f} min, reward {last['reward']:.3f} (greedy "
        f"{last['greedy_reward']:.3f}), kept {last['kept']}; about {remaining * last['minutes']:.0f} min left "
        f"for {remaining} more")  # fmt: skip
