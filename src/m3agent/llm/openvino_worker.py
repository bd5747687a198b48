"""The OpenVINO GenAI model's own process: ``python -m m3agent.llm.openvino_worker`` answers chat requests with
``openvino_genai.LLMPipeline`` on the CPU, in the protocol of :mod:`m3agent.llm.worker` (one JSON line in, one
out), so that :class:`~m3agent.llm.model_process.ModelProcess` serves it unchanged and a native crash is an
error in the parent, not its end.

The first line in is ``{"model_path", "prepared_dir", "n_ctx", "n_threads"}`` (optionally ``prefix_cache_mb``:
the pipeline keeps the KV blocks of earlier prompts and skips a repeated prefix, 0 for off; ``precision`` and
``kv_cache``: the CPU plugin's inference and KV-cache precisions, empty for its own), answered by
``{"ready": {...}}`` or ``{"error": KIND, "message": ...}``; each ``{"messages", "grammar_schema" | null,
"max_tokens", "temperature"}`` is answered by ``{"text", "prompt_tokens", "completion_tokens", "cached_tokens",
"timings"}`` or an error. Kinds: ``missing`` (openvino-genai not installed), ``load``, ``overflow``, ``failed``.

Preparing a GGUF (once, under ``prepared_dir``): OpenVINO GenAI converts the GGUF into its own model format at
every load (14-25 s on 2 cores), so the converted model and tokenizer are saved and later loads read those. Its
GGUF reader (2026.4) knows F32, F16, Q4_0, Q4_1, Q4_K, Q6_K and Q8_0 tensors; a GGUF holding others (the packaged
Qwen2.5-0.5B's Q5_0) is first rewritten with those tensors as Q8_0, which keeps 8 bits for each 5-bit weight:
the values are those of the original up to Q8_0's rounding of each block's scale.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from m3agent.llm.worker import Answerer, serve
from m3agent.mapped_pages import PageReleaser

READABLE = frozenset({"F32", "F16", "Q4_0", "Q4_1", "Q4_K", "Q6_K", "Q8_0"})
"""GGUF tensor types OpenVINO GenAI's GGUF reader converts (others fail in ``gguf_tensor_to_f16``)."""
MODEL_FILES = ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml")
"""What a prepared folder holds (with the ``.bin`` of each tokenizer)."""


def main() -> int:
    """Serve requests until stdin ends; the exit status is 0 unless the first line was unusable."""
    return serve(_answerer)


def _answerer(init: dict[str, Any]) -> tuple[Answerer | None, dict[str, Any]]:
    pipe, ready = _load(init)
    if pipe is None:
        return None, ready
    releaser = PageReleaser(Path(str(init["prepared_dir"]))).start()

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        try:
            return _answer(pipe, request, init)
        finally:
            releaser.settle()

    return answer, ready


def _load(init: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The pipeline and the ready line, or ``None`` and the error line."""
    started = time.perf_counter()
    try:
        genai = importlib.import_module("openvino_genai")
    except ImportError as exc:
        return None, {"error": "missing", "message": str(exc)}
    folder = Path(str(init["prepared_dir"]))
    options = _pipeline_options(genai, init)
    try:
        prepared = _is_prepared(folder)
        if not prepared:
            _prepare(genai, Path(str(init["model_path"])), folder, options)
        pipe = genai.LLMPipeline(str(folder), "CPU", **options)
    except (RuntimeError, ValueError, OSError) as exc:
        return None, {"error": "load", "message": str(exc)}
    ready = {"load_s": round(time.perf_counter() - started, 3), "version": str(genai.get_version()),
             "prepared": prepared, "folder": str(folder)}
    return pipe, {"ready": ready}


def _pipeline_options(genai: Any, init: dict[str, Any]) -> dict[str, Any]:
    """CPU threads, the inference and KV-cache precisions when given (``precision``, ``kv_cache``), and the prefix
    cache (a paged KV cache of ``prefix_cache_mb`` MiB) when asked."""
    options: dict[str, Any] = {"INFERENCE_NUM_THREADS": int(init.get("n_threads") or 2)}
    if init.get("precision"):
        options["INFERENCE_PRECISION_HINT"] = str(init["precision"])
    if init.get("kv_cache"):
        options["KV_CACHE_PRECISION"] = str(init["kv_cache"])
    cache_mb = int(init.get("prefix_cache_mb", 0))
    if cache_mb > 0:
        scheduler = genai.SchedulerConfig()
        scheduler.enable_prefix_caching = True
        scheduler.cache_size = max(1, -(-cache_mb // 1024))  # GiB, rounded up
        options["scheduler_config"] = scheduler
    return options


def _is_prepared(folder: Path) -> bool:
    return all((folder / name).is_file() for name in MODEL_FILES)


def _prepare(genai: Any, gguf: Path, folder: Path, options: dict[str, Any]) -> None:
    """Convert ``gguf`` into ``folder`` (the model and tokenizers OpenVINO reads).

    Built in a sibling temporary folder renamed into place at the end, so an interrupted preparation leaves no
    half-written model under ``folder``. The converting pipeline is dropped and the caller loads the saved model,
    as every later process does: the converted weights then come from the file, whose pages
    :class:`~m3agent.mapped_pages.PageReleaser` can give back (the converting pipeline holds its own copy)."""
    building = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    try:
        source = building / "model.gguf"
        unreadable = unreadable_types(gguf)
        if unreadable:
            print(f"m3agent openvino worker: rewriting {', '.join(sorted(unreadable))} tensors as Q8_0",
                  file=sys.stderr)
            rewrite_gguf(gguf, source)
        else:
            source.symlink_to(gguf.resolve())
        genai.LLMPipeline(str(source), "CPU", **options, enable_save_ov_model=True)  # converts and saves
        source.unlink()
        if not _is_prepared(building):
            raise RuntimeError(f"OpenVINO GenAI did not save the converted model in {building}")
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
        building.rename(folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)


def unreadable_types(gguf: Path) -> set[str]:
    """The tensor types of ``gguf`` that OpenVINO GenAI's GGUF reader cannot convert (see :data:`READABLE`)."""
    reader = importlib.import_module("gguf").GGUFReader(str(gguf))
    return {t.tensor_type.name for t in reader.tensors} - READABLE


def rewrite_gguf(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` with every tensor of a type outside :data:`READABLE` re-quantized as Q8_0
    (F32 where a row is not a whole number of 32-value blocks). The metadata, tokenizer included, is copied as
    is. Measured: 38 s for the packaged 0.5B (133 Q5_0 tensors) on a busy 2-core machine."""
    gguf = importlib.import_module("gguf")
    np = importlib.import_module("numpy")
    quant = gguf.GGMLQuantizationType
    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(target), reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # written by the writer itself
        kind = field.types[0]
        writer.add_key_value(name, field.contents(), kind, field.types[-1] if kind == gguf.GGUFValueType.ARRAY
                             else None)
    for tensor in reader.tensors:
        data, kind = tensor.data, tensor.tensor_type
        if kind.name not in READABLE:
            values = gguf.quants.dequantize(data, kind).astype(np.float32)
            kind = quant.Q8_0 if values.shape[-1] % 32 == 0 else quant.F32
            data = gguf.quants.quantize(values, kind) if kind == quant.Q8_0 else values
        writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _answer(pipe: Any, request: dict[str, Any], init: dict[str, Any]) -> dict[str, Any]:
    """One chat completion; OpenVINO's errors become error lines (a crash ends the process)."""
    genai = importlib.import_module("openvino_genai")
    messages = request["messages"]
    max_tokens = int(request["max_tokens"])
    try:
        prompt = pipe.get_tokenizer().apply_chat_template(messages, add_generation_prompt=True)
        prompt_tokens = int(pipe.get_tokenizer().encode(prompt, add_special_tokens=False).input_ids.get_size())
        window = int(init.get("n_ctx") or 0)
        if window and prompt_tokens + max_tokens > window:
            return {"error": "overflow", "message": f"Requested tokens ({prompt_tokens} + {max_tokens} to write) "
                    f"exceed context window of {window}"}
        config = genai.GenerationConfig()
        config.max_new_tokens = max_tokens
        temperature = float(request["temperature"])
        config.do_sample = temperature > 0
        if temperature > 0:
            config.temperature = temperature
        schema = request.get("grammar_schema")
        if schema:
            config.structured_output_config = genai.StructuredOutputConfig(json_schema=str(schema))
        result = pipe.generate(genai.ChatHistory(messages), config)
    except (RuntimeError, ValueError) as exc:
        return {"error": "failed", "message": str(exc)}
    metrics = result.perf_metrics
    generated = int(metrics.get_num_generated_tokens())
    first_ms, per_token_ms = float(metrics.get_ttft().mean), float(metrics.get_tpot().mean)
    timings = {"prompt_evaluated": int(metrics.get_num_input_tokens()), "prompt_ms": round(first_ms, 1),
               "generated": generated, "generate_ms": round(per_token_ms * max(0, generated - 1), 1),
               "threads": int(init.get("n_threads") or 2)}
    return {"text": str(result.texts[0]) if result.texts else "", "prompt_tokens": prompt_tokens,
            "completion_tokens": generated, "cached_tokens": 0, "timings": timings}


if __name__ == "__main__":
    sys.exit(main())
