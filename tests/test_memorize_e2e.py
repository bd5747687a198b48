"""Memory writers against real local models: SmolLM2 behind llama-cpp-python's OpenAI-compatible
server (the mllm writer, text-only) and in-process (the local writer).

SmolLM2-135M writes poor memories; these tests assert the contract: the
reply is negotiated, validated and stored with only the clip's tags, and the
local writer's topics are grounded in the transcript.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_server import llama_server
from m3agent import tags
from m3agent.domain import EntityKind, MemoryKind
from m3agent.errors import MalformedReplyError
from m3agent.llm import create_chat_model
from m3agent.llm.openai_compat import OpenAIChat
from m3agent.memorize.rules import apply_write_rules
from m3agent.memorize.writers.local import LocalWriter
from m3agent.memorize.writers.mllm import MLLMOptions, MLLMWriter
from test_memorize_world import add_entities, clip_of, face_track, minilm, new_store, speech

pytestmark = [pytest.mark.llm, pytest.mark.slow]

TALK = ("We have to talk about the budget for next year. The taxes went up again and the office rent is too high.",
        "I think we should move the office to a cheaper building near the station.")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with llama_server(n_ctx=4096) as base:
        yield base


def test_mllm_writer_over_a_real_openai_compatible_server(server_url: str, tmp_path: Path) -> None:
    from m3agent.memorize import ClipInput

    spec = server_url.replace("http://", "openai://") + "?model=smollm2&max_string=80"
    chat = create_chat_model(spec, timeout_s=300)
    assert isinstance(chat, OpenAIChat)
    writer = MLLMWriter(chat, MLLMOptions(frames=0, faces=0, max_tokens=700, keep_perception=False))
    with new_store(tmp_path, minilm()) as store:
        face, voice, other = add_entities(store, clip_of(0), [EntityKind.FACE, EntityKind.VOICE, EntityKind.VOICE])
        clip = clip_of(1)
        with store.clip(clip) as clip_writer:
            inp = ClipInput(clip=clip, tracks=(face_track(clip, face, [32.0 + i / 2 for i in range(12)]),),
                            voices=(speech(clip, voice, 1, 8, TALK[0]), speech(clip, other, 9, 14, TALK[1])))
            try:
                out = writer.write(inp)
            except MalformedReplyError as exc:  # allowed by the contract, but not expected under a grammar
                pytest.fail(f"SmolLM2 under a grammar should give schema-valid JSON: {exc}")
            stats = apply_write_rules(store, clip_writer, inp, out, minilm())
        assert chat.structured_mode == "json_object_schema"  # the server refused json_schema, took the grammar
        assert 1 <= out.attempts <= 3 and out.usage.calls == out.attempts and out.usage.completion_tokens > 0
        allowed = {face, voice, other}
        for memory in out.memories:
            assert set(tags.entity_ids(memory.text)) <= allowed and memory.entity_ids == tags.entity_ids(memory.text)
            assert not any(t.kind == "character" for t in tags.find_tags(memory.text))
            assert (memory.video_id, memory.clip_index) == ("v1", 1) and memory.provenance.startswith("mllm-writer/1")
            assert clip.start_s <= memory.start_s <= memory.end_s <= clip.end_s
        assert all(e.source == "llm" and {e.face_id, e.voice_id} <= allowed for e in out.equivalences)
        stored = store.memories("v1", clip_index=1)
        assert len(stored) == stats.inserted and stats.inserted + stats.reinforced + stats.repeated == len(out.memories)


def test_local_writer_adds_grounded_topic_summaries() -> None:
    from m3agent.memorize import ClipInput

    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    clip = clip_of(0)
    inp = ClipInput(clip=clip, voices=(speech(clip, 7, 1, 9, TALK[0]), speech(clip, 8, 10, 16, TALK[1]),
                                       speech(clip, 7, 17, 18, "Okay.")))
    out = LocalWriter(create_chat_model("llamacpp:smollm2")).write(inp)
    episodic = [m for m in out.memories if m.kind == MemoryKind.EPISODIC]
    summaries = [m for m in out.memories if m.kind == MemoryKind.SEMANTIC]
    assert len(episodic) == 3 and out.usage.calls == 2  # one call per talkative voice
    assert summaries, out.dropped
    for summary in summaries:
        voice = summary.entity_ids[0]
        assert summary.text.startswith(f"<voice_{voice}> talks about ") and summary.confidence == 0.5
        said = " ".join(s.text for s in inp.voices if s.entity_id == voice).lower()
        topics = summary.text.removeprefix(f"<voice_{voice}> talks about ").rstrip(".")
        for word in topics.replace(",", " ").replace(" and ", " ").split():
            assert word in said or word.rstrip("s") in said or word + "es" in said, (word, said)
