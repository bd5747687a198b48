"""The policy's weights: the packaged GGUF dequantised into transformers once, and a sampling wrapper.

transformers reads a GGUF (``gguf_file=``, the ``gguf`` package) and dequantises it; on a busy 2-core machine
that takes minutes (the 151k-token vocabulary is converted in Python), so the result is saved once as a
transformers folder under ``<cache>/train/base/<name>-<sha>/`` and every later run loads that in seconds.
The tokenizer and its chat template come from the same GGUF, so training renders prompts exactly as the
llama.cpp runtime does.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import MissingExtraError

if TYPE_CHECKING:
    from m3agent.settings import Settings

BASE_FOLDER = ("train", "base")
SAVED_DTYPE = "bfloat16"
"""Stored half-size; the weights were quantised (5-8 bits) in the GGUF, so bfloat16 keeps all they hold."""


def require_train_extra() -> None:
    """:class:`MissingExtraError` naming the extra when torch, transformers, TRL, PEFT or gguf is missing."""
    import importlib.util

    for package in ("torch", "transformers", "trl", "peft", "gguf"):
        if importlib.util.find_spec(package) is None:
            raise MissingExtraError("training the control policy", "train", package=package)


def base_dir(settings: Settings, name: str) -> Path:
    """Where the dequantised copy of packaged model ``name`` lives (keyed by the GGUF's pinned hash)."""
    from m3agent.llm.packaged import lookup

    model = lookup(name)
    return settings.resolved_cache_dir().joinpath(*BASE_FOLDER) / f"{model.name}-{model.sha256[:12]}"


def base_gguf(settings: Settings, name: str) -> Path:
    """The verified packaged GGUF ``name`` (an error saying what to pull when it is missing)."""
    from m3agent.llm.packaged import lookup, verified_path

    return verified_path(lookup(name), settings.resolved_cache_dir())


def prepare_base(settings: Settings, name: str) -> Path:
    """The transformers folder of packaged model ``name``, dequantised from its GGUF on first use."""
    folder = base_dir(settings, name)
    if (folder / "config.json").is_file():
        return folder
    require_train_extra()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf = base_gguf(settings, name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # dequantize=True: plain dense weights to train (transformers may otherwise keep GGUF blocks, untrainable)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                 quantization_config=GgufConfig(dequantize=True))  # fmt: skip
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _save_plain(model, partial)
    tokenizer.save_pretrained(partial)
    partial.rename(folder)
    return folder


def _save_plain(model: Any, folder: Path) -> None:
    """Weights, config and generation config as a plain (unquantised) transformers folder.

    transformers marks a model read from a GGUF as quantised, which it neither saves nor trains; the
    dequantised tensors are what is wanted, so they are written directly and the mark is left behind.
    """
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    dtype = getattr(torch, SAVED_DTYPE)
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def load_model(folder: Path, threads: int) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a transformers folder, in float32 on the CPU with ``threads`` threads."""
    require_train_extra()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # the run has its own bar
    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


@dataclass
class TorchPolicy:
    """Samples from a transformers causal LM (a PEFT-wrapped one included); stops at ``stop_ids``.

    Plain sampling at ``temperature`` (no top-k/top-p, no repetition penalty): the trainer scores the
    sampled tokens under exactly that distribution.
    """

    model: Any
    stop_ids: tuple[int, ...]
    pad_id: int

    def generate(self, ids: Sequence[int], max_new_tokens: int, temperature: float) -> list[int]:
        import torch

        inputs = torch.tensor([list(ids)], dtype=torch.long)
        training = self.model.training
        self.model.eval()  # with gradient checkpointing on, training mode turns the KV cache off
        try:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=max_new_tokens,
                    do_sample=True, temperature=temperature, top_p=1.0, top_k=0, repetition_penalty=1.0,
                    eos_token_id=list(self.stop_ids), pad_token_id=self.pad_id, use_cache=True,
                )  # fmt: skip
        finally:
            self.model.train(training)
        return [int(t) for t in out[0, inputs.shape[1]:]]


def stop_ids(tokenizer: Any, end_of_turn: str) -> tuple[int, ...]:
    """The end-of-turn token of the chat template (``<|im_end|>`` for Qwen) and the tokenizer's end token."""
    ids = {int(tokenizer.eos_token_id)} if tokenizer.eos_token_id is not None else set()
    if end_of_turn:
        found = tokenizer.convert_tokens_to_ids(end_of_turn)
        if isinstance(found, int) and found != tokenizer.unk_token_id:
            ids.add(found)
    return tuple(sorted(ids))
