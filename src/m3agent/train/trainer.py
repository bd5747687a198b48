"""``train_control``: GRPO (TRL) with LoRA adapters (PEFT) on the agent loop, on the CPU, resumable.

Why TRL's ``rollout_func`` and not its tool loop: TRL's own multi-turn tools speak the chat template's
tool-call format, while the product's runtime speaks the agent schema (one JSON object a turn, under a
grammar). The rollouts are therefore played here (:mod:`m3agent.train.rollout`: the agent prompts, the real
search, the real store) and handed to TRL as ``prompt_ids`` / ``completion_ids`` with an ``env_mask`` that
keeps observation and template tokens out of the loss; TRL computes the group advantages and the loss
(``loss_type="dapo"`` by default: token-level, normalised over the active tokens; clip-higher through
``epsilon_high``; no reference model at ``beta=0``), and checkpoints the adapter, optimizer and scheduler
every ``save_every`` steps, so a stopped run resumes from its last checkpoint.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.train.curve import append_step, plot
from m3agent.train.episodes import Episode, Split

if TYPE_CHECKING:
    from m3agent.settings import Settings
    from m3agent.train.model import Base
    from m3agent.train.rollout import Rollout, Trajectory

CHECKPOINTS = "checkpoints"
ADAPTER = "adapter"
RUN_FILE = "run.json"


@dataclass(frozen=True, slots=True)
class TrainResult:
    """What a run left: its folder, the adapter, the steps done and the seconds this call took."""

    run_dir: Path
    adapter: Path
    steps: int
    seconds: float
    curve: Path | None


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` folder of a run (``None``: start from the base model)."""
    found = sorted((run_dir / CHECKPOINTS).glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    return found[-1] if found else None


def train_control(
    settings: Settings,
    run_dir: Path,
    split: Split,
    rollout_for: Callable[[Any], Rollout],
    *,
    show_progress: bool = True,
) -> TrainResult:
    """Train (or resume) the run in ``run_dir`` on ``split.train`` up to ``settings.train.steps`` steps.

    ``rollout_for(tokenizer)`` builds the episode environment (it needs the tokenizer's chat frame).
    """
    from m3agent.train.model import load_model, prepare_base, resolve_base

    started = time.perf_counter()
    train = settings.train
    base = resolve_base(settings, train.base)
    check_same_base(run_dir, base.sha256)
    run_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_model(prepare_base(base), train.threads)
    rollout = rollout_for(tokenizer)
    recorder = _Recorder(run_dir, {e.qid: e for e in split.train}, rollout, started)
    trainer = _trainer(settings, run_dir, split, model, tokenizer, recorder)
    quiet(trainer)
    trainer.add_callback(_callback(recorder, train.steps, show_progress))
    write_run(run_dir, settings, split, base)
    checkpoint = latest_checkpoint(run_dir)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    adapter = run_dir / ADAPTER
    trainer.model.save_pretrained(adapter)
    tokenizer.save_pretrained(adapter)
    steps = int(trainer.state.global_step)
    del trainer, model, recorder
    gc.collect()  # the trainer, its callbacks and the model hold each other: free the weights before returning
    return_freed_memory()
    return TrainResult(run_dir, adapter, steps, time.perf_counter() - started, plot(run_dir))


def return_freed_memory() -> None:
    """Hand the freed heap back to the system (glibc keeps a step's activations, gigabytes, as free heap
    otherwise, and a second run in the same process, a resume or the export, starts on top of them)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return
    if trim is not None:  # glibc only
        trim(0)


def _trainer(settings: Settings, run_dir: Path, split: Split, model: Any, tokenizer: Any, recorder: _Recorder
             ) -> Any:  # fmt: skip
    from datasets import Dataset
    from peft import LoraConfig
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    from m3agent.errors import ConfigError

    train = settings.train
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented choice (above)
    rollouts = train.questions_per_step * train.group
    micro = train.micro_batch or rollouts
    if rollouts % micro:
        raise ConfigError(f"train.micro_batch {micro} does not divide the {rollouts} rollouts of a step",
                          hint=f"use a divisor of questions_per_step x group ({rollouts})")  # fmt: skip
    # one generation batch (the step's rollouts) per optimizer step, its loss taken `micro` rollouts at a time
    config = GRPOConfig(
        output_dir=str(run_dir / CHECKPOINTS), max_steps=train.steps, learning_rate=train.learning_rate,
        per_device_train_batch_size=micro, num_generations=train.group,
        gradient_accumulation_steps=rollouts // micro, steps_per_generation=rollouts // micro,
        loss_type=train.loss, beta=train.beta, epsilon_high=train.epsilon_high,
        temperature=train.temperature, max_completion_length=train.max_context_tokens,
        logging_steps=1, save_strategy="steps", save_steps=train.save_every, report_to=[], use_cpu=True,
        bf16=False, fp16=False, seed=train.seed, disable_tqdm=True, remove_unused_columns=False,
        dataloader_num_workers=0, log_completions=False,
        activation_checkpointing=train.gradient_checkpointing,
    )  # fmt: skip
    lora = LoraConfig(r=train.lora_r, lora_alpha=train.lora_alpha, lora_dropout=train.lora_dropout,
                      target_modules=list(train.lora_targets), task_type="CAUSAL_LM")  # fmt: skip
    dataset = Dataset.from_list([{"prompt": e.qid} for e in split.train])
    return GRPOTrainer(model=model, reward_funcs=[_rollout_reward], args=config, train_dataset=dataset,
                       processing_class=tokenizer, peft_config=lora, rollout_func=recorder.rollout)  # fmt: skip


def quiet(trainer: Any) -> None:
    """Drop transformers' own log printing and bars: the run's bar and ``metrics.jsonl`` say it all."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def _rollout_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The reward the rollout computed (:func:`m3agent.train.reward.reward`), handed through TRL."""
    return [float(r) for r in kwargs["rollout_reward"]]


class _Recorder:
    """Plays each batch's rollouts with the current policy and keeps the step's figures for the record."""

    def __init__(self, run_dir: Path, episodes: dict[str, Episode], rollout: Rollout, started: float) -> None:
        self.run_dir = run_dir
        self.episodes = episodes
        self.environment = rollout
        self.started = started
        self.cpu_started = time.process_time()
        self.batch: list[Trajectory] = []
        self.batch_seconds = 0.0
        self.batch_cpu = 0.0

    def rollout(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from m3agent.train.model import TorchPolicy, stop_ids

        began, cpu = time.perf_counter(), time.process_time()
        tokenizer = trainer.processing_class
        frame = self.environment.frame
        policy = TorchPolicy(trainer.model, stop_ids(tokenizer, frame.end_of_turn), int(tokenizer.pad_token_id))
        self.batch = [self.environment.play(self.episodes[str(p)], policy) for p in prompts]
        self.batch_seconds, self.batch_cpu = time.perf_counter() - began, time.process_time() - cpu
        rewards = [t.reward for t in self.batch]
        return {
            "prompt_ids": [t.prompt_ids for t in self.batch],
            "completion_ids": [t.completion_ids for t in self.batch],
            "logprobs": None,
            "env_mask": [t.env_mask for t in self.batch],
            "rollout_reward": [r.total if r else 0.0 for r in rewards],
        }

    def record(self, step: int, logs: dict[str, Any]) -> dict[str, Any]:
        """The step's figures (means over its rollouts), appended to ``metrics.jsonl``.

        Seconds are wall time since this call started (``elapsed_s``) and CPU seconds of the process
        (``cpu_s``, all threads): on a shared machine, CPU seconds / threads estimates an idle machine's time.
        """
        rewards = [t.reward for t in self.batch if t.reward is not None]
        n = max(1, len(rewards))
        record = {
            "step": step, "reward": sum(r.total for r in rewards) / n, "f1": sum(r.f1 for r in rewards) / n,
            "evidence_f1": sum(r.evidence_f1 for r in rewards) / n,
            "format_errors": sum(r.format_errors for r in rewards) / n,
            "leaks": sum(r.leaked for r in rewards) / n,
            "rounds": sum(t.rounds for t in self.batch) / max(1, len(self.batch)),
            "sampled_tokens": sum(sum(t.env_mask) for t in self.batch),
            "rollout_s": round(self.batch_seconds, 2), "elapsed_s": round(time.perf_counter() - self.started, 2),
            "rollout_cpu_s": round(self.batch_cpu, 2), "cpu_s": round(time.process_time() - self.cpu_started, 2),
            "loss": logs.get("loss"), "learning_rate": logs.get("learning_rate"),
        }  # fmt: skip
        append_step(self.run_dir, record)
        return record


def _callback(recorder: _Recorder, total: int, show_progress: bool) -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from transformers import TrainerCallback

    class Record(TrainerCallback):  # type: ignore[misc]
        """Per step: the record, the plot, and the progress bar with the time left."""

        def __init__(self) -> None:
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("left"), TimeRemainingColumn())  # fmt: skip
            self.bar = Progress(*columns, console=Console(stderr=True), disable=not show_progress)
            self.task = self.bar.add_task("GRPO steps", total=total)

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.bar.start()
            self.bar.update(self.task, completed=state.global_step)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs and "loss" in logs:
                record = recorder.record(state.global_step, logs)
                plot(recorder.run_dir)
                self.bar.update(self.task, completed=state.global_step,
                                description=f"GRPO steps (reward {record['reward']:.3f}, F1 {record['f1']:.3f})")

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.bar.stop()

    return Record()


def check_same_base(run_dir: Path, sha256: str) -> None:
    """A run resumes only from the base it started from (its checkpoints are adapters of those weights)."""
    from m3agent.errors import ModelError

    path = run_dir / RUN_FILE
    record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    recorded = record.get("base_sha256")
    if recorded and recorded != sha256:
        was = record.get("train", {}).get("base", "?")
        raise ModelError(f"run {run_dir.name} was trained from another base ({was}, sha256 {str(recorded)[:12]}; "
                         f"this one: {sha256[:12]})", hint=f"resume it with --base {was}, or start a new run "
                         "with another --name")  # fmt: skip


def write_run(run_dir: Path, settings: Settings, split: Split, base: Base) -> None:
    """``run.json``: the settings, the base (the packaged name or the file's absolute path, and the GGUF's
    sha256) and the split, so the card, the export and a resumed run say what was trained on."""
    path = run_dir / RUN_FILE
    record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    record.update({
        "train": {**settings.train.model_dump(), "base": base.label}, "base_sha256": base.sha256,
        "base_name": base.short_name, "embedder": settings.embedder,
        "train_conversations": list(split.train_conversations),
        "held_out_conversations": list(split.held_out_conversations), "train_episodes": len(split.train),
    })  # fmt: skip
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")
