"""Back into the product: merge the LoRA adapter and write a GGUF that ``--llm llamacpp:PATH`` runs.

The GGUF is written with the ``gguf`` package's writer (llama.cpp's converter is not installed with the
runtime). Everything but the weights is copied from the base model's GGUF: the architecture's numbers, the
tokenizer and the chat template, so the runtime reads the trained model exactly as it reads the packaged
one. Each weight of the base GGUF is replaced by the merged tensor of the same name (transformers names are
mapped with ``gguf.get_tensor_name_map``); matrices are stored Q8_0 (8.5 bits a weight, the base was 5-8),
vectors F32. A model card (Markdown) is written beside the file.
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

    reader = gguf.GGUFReader(str(base_gguf))
    arch = str(reader.fields["general.architecture"].contents())
    blocks = int(reader.fields[f"{arch}.block_count"].contents())
    by_gguf = _by_gguf_name(state, gguf.get_tensor_name_map(_arch_enum(gguf, arch), blocks))
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
    lines = [f"# {facts['name']}", "",
             f"The control policy of m3agent's agent loop, trained with reinforcement learning (TRL GRPO, "
             f"loss `{facts['train']['loss']}`, PEFT LoRA r={facts['train']['lora_r']}) from the packaged "
             f"`{facts['train']['base']}`, merged and stored Q8_0. Run it with `--llm llamacpp:{out}` "
             f"(`--mode agent`).", "",
             "## Data", "",
             f"LoCoMo conversations ingested as memories (embedder `{facts['embedder']}`), split by conversation: "
             f"trained on {', '.join(facts['train_conversations'])} ({facts['train_episodes']} questions); "
             f"held out: {', '.join(facts['held_out_conversations'])}.", "",
             "## Training", "",
             f"- steps: {facts['steps']} x {facts['train']['questions_per_step']} questions x group "
             f"{facts['train']['group']}; rounds {facts['train']['rounds']}, "
             f"{facts['train']['max_new_tokens']} tokens a reply, temperature {facts['train']['temperature']}",
             f"- reward: {facts['train']['f1_weight']} x answer F1 + {facts['train']['evidence_weight']} x "
             f"evidence F1 - {facts['train']['format_penalty']} x format errors - "
             f"{facts['train']['leak_penalty']} x leaked ids (m3agent.train.reward)",
             f"- last steps' mean reward {facts.get('final_reward', 'n/a')}, answer F1 {facts.get('final_f1', 'n/a')}",
             "", "## Scores", "", "```json", json.dumps(facts.get("scores") or {}, indent=2), "```", ""]  # fmt: skip
    card.write_text("\n".join(lines), encoding="utf-8")
    return card
