"""The OpenVINO GenAI chat backend (``openvino:``): registered like the others, clear errors, and a real run.

The real run answers on the packaged Qwen2.5-0.5B GGUF (skipped when openvino-genai is not installed or the
model is not pulled). Its converted copy is kept under the user's cache folder, as the backend keeps it, so only
the first run pays the conversion (about 40-80 s on 2 busy cores); later runs take about 10-25 s.
"""

from __future__ import annotations

import importlib.util
import os
import signal
from pathlib import Path

import pytest

from m3agent.errors import ConfigError, ContextOverflowError, MissingExtraError, ModelCrashError, ModelError
from m3agent.llm import CHAT_MODELS, create_chat_model
from m3agent.llm.openvino import OpenVinoChat, prepared_folder
from m3agent.llm.spec import ModelSpec
from m3agent.mapped_pages import resident_bytes

SCHEMA = {"type": "object", "properties": {
    "answer": {"type": "string", "minLength": 1, "maxLength": 80},
    "used": {"type": "array", "items": {"type": "string", "enum": ["m1", "m2"]}, "maxItems": 2}},
    "required": ["answer", "used"], "additionalProperties": False}
QUESTION = [{"role": "system", "content": "You answer from the numbered memories. Reply with JSON only."},
            {"role": "user", "content": "[m1] Dana says: \"I live in Oslo.\"\n[m2] Bo says: \"I like tea.\"\n"
                                        "Question: Where does Dana live?"}]


def test_openvino_is_a_registered_local_backend() -> None:
    assert "openvino" in CHAT_MODELS.names()
    assert ModelSpec.parse("openvino:qwen-1.5b").local, "control answers in grounded mode, as with llamacpp:"
    with pytest.raises(ConfigError, match="needs a model"):
        create_chat_model("openvino:")


def test_the_converted_model_is_keyed_by_the_file(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"one")
    first = prepared_folder(tmp_path / "ov", gguf)
    assert first.parent == tmp_path / "ov" and first.name.startswith("m-")
    gguf.write_bytes(b"other")
    assert prepared_folder(tmp_path / "ov", gguf) != first, "a changed file converts afresh"


def test_a_missing_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino_genai"
                        else real(name, *a))
    chat = OpenVinoChat(gguf, prepared_dir=tmp_path / "ov")
    with pytest.raises(MissingExtraError) as caught:
        chat.chat(QUESTION)
    assert "m3agent[openvino]" in str(caught.value.hint) and "openvino-genai" in str(caught.value.hint)


def _needs_runtime() -> None:
    if importlib.util.find_spec("openvino_genai") is None:
        pytest.skip("openvino-genai is not installed (pip install 'm3agent[openvino]')")


def test_a_file_it_cannot_read_is_a_load_error_with_the_fix(tmp_path: Path) -> None:
    _needs_runtime()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"this is not a GGUF file" * 100)
    chat = OpenVinoChat(broken, prepared_dir=tmp_path / "ov")
    try:
        with pytest.raises(ModelError) as caught:
            chat.chat(QUESTION)
    finally:
        chat.close()
    assert "OpenVINO GenAI could not load" in str(caught.value)
    assert "llamacpp:" in str(caught.value.hint), "the hint names a way out"
    assert not list((tmp_path / "ov").parent.glob("ov*")), "no half-converted model is left"


@pytest.mark.llm
@pytest.mark.slow
def test_the_packaged_model_answers_under_the_schema_refuses_an_overlong_prompt_and_survives_a_crash() -> None:
    _needs_runtime()
    from m3agent.llm import packaged
    from m3agent.settings import Settings

    cache = Settings().resolved_cache_dir()
    model = packaged.lookup("qwen-0.5b")
    if packaged.state(model, cache) == "missing":
        pytest.skip("the packaged qwen-0.5b is not pulled (m3agent models pull qwen-0.5b)")
    chat = create_chat_model("openvino:qwen-0.5b?n_ctx=256", cache_dir=cache)
    assert isinstance(chat, OpenVinoChat)
    try:
        reply = chat.chat(QUESTION, schema=SCHEMA, max_tokens=40)
        assert reply.parsed is not None, reply.error
        assert "oslo" in reply.parsed["answer"].lower() and set(reply.parsed["used"]) <= {"m1", "m2"}
        assert reply.usage.prompt_tokens > 30 and reply.usage.completion_tokens > 0
        assert chat.timings["prompt_ms"] > 0 and chat.process.ready["version"]
        folder = Path(chat.process.ready["folder"])
        held = resident_bytes(folder, chat.process.pid or 0)
        assert held < (folder / "openvino_model.bin").stat().st_size // 8, \
            f"after an answer the worker holds {held >> 20} MiB of the model file's pages (repacked, not read again)"
        with pytest.raises(ContextOverflowError, match="context window"):
            chat.chat([{"role": "user", "content": "word " * 300}], max_tokens=8)
        again = chat.chat(QUESTION, schema=SCHEMA, max_tokens=40)
        assert again.parsed == reply.parsed, "greedy: the same reply, and the worker survived the refusal"

        pid = chat.process.pid
        assert pid is not None
        os.kill(pid, signal.SIGSEGV)  # a native crash of the runtime
        with pytest.raises(ModelCrashError, match=r"OpenVINO GenAI .*SIGSEGV") as crashed:
            chat.chat(QUESTION, max_tokens=4)
        assert "openvino" in crashed.value.hint and "make setup" not in crashed.value.hint
    finally:
        chat.close()


@pytest.mark.llm
@pytest.mark.slow
def test_the_set_up_check_proves_the_openvino_runtime_and_reports_its_speed() -> None:
    """`m3agent models check` and doctor run the check prompt on OpenVINO too (a CPU where ``local:`` chooses it
    must prove it at set-up); the 0.5B is too small to find the answer, so only the run is required."""
    _needs_runtime()
    from m3agent.llm import packaged
    from m3agent.llm.runtime_check import OPENVINO_RUNTIME, check_runtime
    from m3agent.settings import Settings

    cache = Settings().resolved_cache_dir()
    if packaged.state(packaged.lookup("qwen-0.5b"), cache) == "missing":
        pytest.skip("the packaged qwen-0.5b is not pulled (m3agent models pull qwen-0.5b)")
    chat = create_chat_model("openvino:qwen-0.5b", cache_dir=cache)
    assert isinstance(chat, OpenVinoChat)
    try:
        result = check_runtime(chat, require_answer=False)
    finally:
        chat.close()
    assert result.runtime == OPENVINO_RUNTIME and result.prompt_tokens >= 300
    assert result.prompt_rate > 0 and result.reply_rate > 0 and "openvino-genai" in result.summary()


def test_a_precision_the_plugin_does_not_know_is_a_config_error(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match="precision='f8'"):
        OpenVinoChat(gguf, prepared_dir=tmp_path / "ov", precision="f8")
    with pytest.raises(ConfigError, match="kv_cache='i4'"):
        OpenVinoChat(gguf, prepared_dir=tmp_path / "ov", kv_cache="i4")
