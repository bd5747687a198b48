"""The fine-tuning step of expert iteration: TRL's ``SFTTrainer`` with LoRA on kept rollouts, policy tokens only.

Each kept rollout is one training sequence, its token ids exactly as sampled (prompt, replies, observations in
the runtime's chat template). The loss is taken on the tokens the policy sampled (the rollout's ``env_mask``,
handed to TRL as ``completion_mask`` with ``completion_only_loss``): the system prompt, the observations and the
template's own tokens are context, not targets, since the policy never chooses them. The adapter continues from
the previous iteration's (``is_trainable``), or starts fresh with the run's LoRA settings.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from m3agent.settings import TrainSettings


class Sample(Protocol):
    """What fine-tuning reads of a kept rollout (:class:`m3agent.train.expert.Sample` is one): its tokens and
    which of them the policy sampled."""

    @property
    def prompt_ids(self) -> tuple[int, ...]: ...

    @property
    def completion_ids(self) -> tuple[int, ...]: ...

    @property
    def env_mask(self) -> tuple[int, ...]: ...


def examples(kept: Sequence[Sample]) -> list[dict[str, list[int]]]:
    """The SFT rows: ``input_ids`` (prompt then completion) and ``completion_mask`` (1 on sampled tokens only)."""
    return [{"input_ids": [*s.prompt_ids, *s.completion_ids],
             "completion_mask": [0] * len(s.prompt_ids) + [int(m) for m in s.env_mask]} for s in kept]  # fmt: skip


def fine_tune(train: TrainSettings, base_folder: Path, previous: Path | None, kept: Sequence[Sample], out: Path
              ) -> float | None:  # fmt: skip
    """Fine-tune a LoRA adapter of the base in ``base_folder`` (continuing ``previous`` when given) on ``kept``;
    save it to ``out`` (written whole or not at all) and return the mean training loss."""
    import shutil

    from m3agent.train.model import load_model
    from m3agent.train.trainer import quiet, return_freed_memory

    model, tokenizer = load_model(base_folder, train.threads)
    model, lora = _adapted(model, train, previous)
    trainer = _trainer(train, model, tokenizer, lora, kept, out.with_name(out.name + ".work"))
    quiet(trainer)
    output = trainer.train()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    trainer.model.save_pretrained(partial)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    shutil.rmtree(out.with_name(out.name + ".work"), ignore_errors=True)
    loss = getattr(output, "training_loss", None)
    del trainer, model
    gc.collect()
    return_freed_memory()
    return round(float(loss), 4) if loss is not None else None


def _adapted(model: Any, train: TrainSettings, previous: Path | None) -> tuple[Any, Any]:
    """The model with the previous adapter loaded trainable (no new LoRA config), or the config of a fresh one."""
    from peft import LoraConfig, PeftModel

    if previous is not None:
        return PeftModel.from_pretrained(model, str(previous), is_trainable=True), None
    return model, LoraConfig(r=train.lora_r, lora_alpha=train.lora_alpha, lora_dropout=train.lora_dropout,
                             target_modules=list(train.lora_targets), task_type="CAUSAL_LM")  # fmt: skip


def _trainer(train: TrainSettings, model: Any, tokenizer: Any, lora: Any, kept: Sequence[Sample], work: Path
             ) -> Any:  # fmt: skip
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar
    from trl.trainer.sft_config import SFTConfig
    from trl.trainer.sft_trainer import SFTTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    disable_progress_bar()  # the run has its own bar; a bar per tiny dataset step is noise
    config = SFTConfig(
        output_dir=str(work), num_train_epochs=train.sft_epochs, learning_rate=train.sft_learning_rate,
        lr_scheduler_type="constant", per_device_train_batch_size=1, gradient_accumulation_steps=train.sft_accumulation,
        completion_only_loss=True, max_length=None, packing=False, logging_steps=1, save_strategy="no",
        report_to=[], use_cpu=True, bf16=False, fp16=False, seed=train.seed, disable_tqdm=True,
        dataloader_num_workers=0, activation_checkpointing=train.gradient_checkpointing,
    )  # fmt: skip
    return SFTTrainer(model=model, args=config, train_dataset=Dataset.from_list(examples(kept)),
                      processing_class=tokenizer, peft_config=lora)  # fmt: skip
