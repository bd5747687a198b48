"""Back into the product: merge the LoRA adapter and write a GGUF that ``--llm llamacpp:PATH`` runs.

The GGUF is written with the ``gguf`` package's writer (llama.cpp's converter is not installed with the
runtime). Everything but the weights is copied from the base model's GGUF: the architecture's numbers, the
tokenizer and the chat template, so the runtime reads the trained model exactly as it reads the packaged
one. Each weight of the base GGUF is replaced by the merged tensor of the same name (transformers names are
mapped with ``gguf.get_tensor_name_map``); matrices are stored Q8_0 (8.5 bits a weight, the base was 4-8),
vectors F32. A model card (Markdown) is written beside the file.

Where llama.cpp's converter reorders a tensor and transformers undoes that on reading a GGUF, the export
redoes it: a ``llama`` GGUF (SmolLM2, Llama, Mistral) stores the query and key projections with each
head's rotary halves interleaved (``convert_hf_to_gguf.py``, ``LlamaModel.permute``). ``qwen2`` is stored as
is. Other architectures are refused before training (:func:`m3agent.train.model.check_architecture`), since their
transformers readers may change tensors in ways this writer does not know.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

_SKIPPED_KEYS = ("GGUF.", "general.architecture", "general.file_type", "general.name", "general.finetune")
FILE_TYPE_Q8_0 = 7
"""``general.file_type`` of a mostly-Q8_0 model (llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0)."""
def merged_state(base_folder: Path, adapter: Path, threads: int) -> dict[str, Any]:
    """The base model's weights with the adapter merged in, as float32 tensors by transformers name."""
    from peft import PeftModel

    from m3agent.train.model import load_model

    model, _ = load_model(base_folder, threads)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    state = {k: v.detach() for k, v in merged.state_dict().items()}
    if "lm_head.weight" not in state and "model.embed_tokens.weight" in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]  # tied embeddings
    return state


def write_gguf(base_gguf: Path, state: dict[str, Any], out: Path, name: str) -> Path:
    """Write ``state`` as a GGUF at ``out`` with ``base_gguf``'s metadata; every base tensor must be found."""
    import gguf

    from m3agent.train.model import check_architecture

    reader = read_gguf(base_gguf)
    arch = str(reader.fields["general.architecture"].contents())
    blocks = int(reader.fields[f"{arch}.block_count"].contents())
    check_architecture(arch, base_gguf)
    by_gguf = _by_gguf_name(state, gguf.get_tensor_name_map(_arch_enum(gguf, arch), blocks))
    if arch == "llama":
        heads = int(reader.fields[f"{arch}.attention.head_count"].contents())
        kv_field = reader.fields.get(f"{arch}.attention.head_count_kv")
        kv_heads = int(kv_field.contents()) if kv_field is not None else heads
        by_gguf = {k: _rope_permuted(v, heads if ".attn_q." in k else kv_heads) if _is_qk(k) else v
                   for k, v in by_gguf.items()}  # fmt: skip
    missing = [t.name for t in reader.tensors if t.name not in by_gguf]
    if missing:
        raise ModelError(f"the merged model lacks {len(missing)} tensors of {base_gguf.name} ({missing[:3]}...)",
                         hint="export a model trained from this base GGUF")  # fmt: skip
    partial = out.with_name(out.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), arch)
    _copy_metadata(gguf, reader, writer)
    writer.add_name(name)
    writer.add_file_type(FILE_TYPE_Q8_0)
    for tensor in reader.tensors:
        data, qtype = _stored(gguf, by_gguf[tensor.name])
        writer.add_tensor(tensor.name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(out)
    return out


def read_gguf(path: Path) -> Any:
    """``gguf.GGUFReader`` of ``path``, 3x faster: the reader slices its memory map once per value (the
    tokenizer's 49k-152k strings and merges), and numpy's memmap subclass bookkeeping on each slice was most
    of its time; here the slices come from a plain array view of the same mapping (same bytes, same fields)."""
    import gguf
    import numpy as np

    class Reader(gguf.GGUFReader):  # type: ignore[misc]
        def _get(self, offset: int, dtype: Any, count: int = 1, override_order: Any = None) -> Any:
            plain = self.__dict__.get("_plain")
            if plain is None:
                plain = self.__dict__["_plain"] = self.data.view(np.ndarray)
            count = int(count)
            values = plain[offset : offset + np.dtype(dtype).itemsize * count].view(dtype=dtype)[:count]
            return values.view(values.dtype.newbyteorder(self.byte_order if override_order is None else override_order))

    return Reader(str(path))


def _is_qk(name: str) -> bool:
    return ".attn_q." in name or ".attn_k." in name


def _rope_permuted(tensor: Any, heads: int) -> Any:
    """llama.cpp's order of a query / key projection (``LlamaModel.permute``): the inverse of transformers'
    ``LlamaTensorProcessor._reverse_permute_weights``. ``heads``: the query heads, or the key/value heads."""
    shape = tuple(tensor.shape)
    return tensor.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def _arch_enum(gguf: Any, arch: str) -> Any:
    for value, label in gguf.MODEL_ARCH_NAMES.items():
        if label == arch:
            return value
    raise ModelError(f"the gguf package does not know the architecture {arch!r}", hint="upgrade gguf")


def _by_gguf_name(state: dict[str, Any], names: Any) -> dict[str, Any]:
    found = {}
    for key, tensor in state.items():
        mapped = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if mapped is not None:
            found[mapped] = tensor
    return found


def _stored(gguf: Any, tensor: Any) -> tuple[np.ndarray, Any]:
    """Matrices (rows a multiple of 32 wide) as Q8_0, everything else as F32."""
    import numpy as np

    data = tensor.detach().to("cpu").float().numpy().astype(np.float32)
    if data.ndim == 2 and data.shape[-1] % 32 == 0:
        return gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0
    return data, gguf.GGMLQuantizationType.F32


def _copy_metadata(gguf: Any, reader: Any, writer: Any) -> None:
    """Every key of the base GGUF but the file's own and the ones the export sets (name, file type)."""
    for key, field in reader.fields.items():
        if key.startswith(_SKIPPED_KEYS):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)


def write_card(out: Path, facts: dict[str, Any]) -> Path:
    """``<model>.md`` beside the GGUF: what the model is, what it was trained on, how, and its scores."""
    card = out.with_suffix(".md")
    train = facts["train"]
    expert = train.get("method") == "expert"
    how = ("expert iteration: rollouts sampled by llama.cpp, the best beating the greedy policy kept, TRL SFT"
           if expert else f"TRL GRPO, loss `{train['loss']}`")
    lines = [f"# {facts['name']}", "",
             f"The control policy of m3agent's agent loop, trained with reinforcement learning ({how}, PEFT LoRA "
             f"r={train['lora_r']}) from `{train['base']}`, merged and stored Q8_0. Run it with "
             f"`--llm llamacpp:{out}` (`--mode agent`).", "",
             "## Data", "",
             f"LoCoMo conversations ingested as memories (embedder `{facts['embedder']}`), split by conversation: "
             f"trained on {', '.join(facts['train_conversations'])} ({facts['train_episodes']} questions); "
             f"held out: {', '.join(facts['held_out_conversations'])}.", "",
             "## Training", "",
             *(_expert_lines(facts) if expert else [
                 f"- steps: {facts['steps']} x {train['questions_per_step']} questions x group {train['group']}; "
                 f"rounds {train['rounds']}, {train['max_new_tokens']} tokens a reply, temperature "
                 f"{train['temperature']}"]),
             f"- reward: {facts['train']['f1_weight']} x answer F1 + {facts['train']['evidence_weight']} x "
             f"evidence F1 + {facts['train'].get('early_answer_weight', 0.0)} x answer F1 x rounds left unused "
             f"- {facts['train']['format_penalty']} x format errors - "
             f"{facts['train']['leak_penalty']} x leaked ids (m3agent.train.reward)",
             f"- the last {'iteration' if expert else 'step'}'s mean reward {facts.get('final_reward', 'n/a')}, answer "
             f"F1 {facts.get('final_f1', 'n/a')}",
             "", "## Scores", "", "```json", json.dumps(facts.get("scores") or {}, indent=2), "```", ""]  # fmt: skip
    card.write_text("\n".join(lines), encoding="utf-8")
    return card


def _expert_lines(facts: dict[str, Any]) -> list[str]:
    """The card's account of an expert iteration run: its settings, then one line per iteration."""
    train = facts["train"]
    count = f"{facts['steps']} iteration{'s' if facts['steps'] != 1 else ''}"
    lines = [f"- {count} of {facts['train_episodes']} questions x {train['samples']} sampled "
             f"rollouts (and a greedy one); rounds {train['rounds']}, {train['max_new_tokens']} tokens a reply, "
             f"temperature {train['temperature']}; kept: the best {train['keep_per_question']} a question with "
             f"reward >= {train['keep_min_reward']}" + (" beating the greedy rollout" if train["keep"] == "beat_greedy"
                                                        else "") +
             f"; SFT {train['sft_epochs']} epochs at {train['sft_learning_rate']}"]  # fmt: skip
    for it in facts.get("iterations") or []:
        held = it.get("held_out_f1")
        lines.append(f"- iteration {it['iteration']}: reward {it['reward']:.3f} (greedy {it['greedy_reward']:.3f}), "
                     f"kept {it['kept']} rollouts ({it['sft_tokens']} tokens trained), {it['minutes']:.1f} min"
                     + (f", held-out F1 {held:.3f}" if held is not None else ""))  # fmt: skip
    return lines
