"""The multimodal writer against a real local HTTP server with scripted replies.

The server (tests/test_llm_openai.py) records each request, so the tests see
what an OpenAI-compatible endpoint receives (images, transcripts, audio,
response_format) and how malformed replies are retried with feedback.
"""

from __future__ import annotations

import base64
import io
import json
import wave
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from m3agent.domain import Clip, Frame, MemoryKind
from m3agent.errors import ConfigError, EndpointError, MalformedReplyError
from m3agent.llm import create_chat_model, flatten_content, text_messages
from m3agent.llm.openai_compat import OpenAIChat
from m3agent.memorize import WRITERS, ClipInput, MemoryWriter, create_writer
from m3agent.memorize.writers.local import LocalWriter
from m3agent.memorize.writers.mllm import MLLMOptions, MLLMWriter
from m3agent.memorize.writers.perception import PerceptionWriter
from m3agent.settings import Settings
from test_llm_openai import FakeServer, completion, error
from test_memorize_world import face_track, speech

CLIP = Clip("v1", 2, 60.0, 90.0)
FACE, VOICE, OTHER_VOICE = 3, 7, 8


def jpeg(color: int) -> bytes:
    import cv2

    ok, data = cv2.imencode(".jpg", np.full((40, 32, 3), color, np.uint8))
    assert ok
    return bytes(data.tobytes())


def the_clip(**extra: Any) -> ClipInput:
    frames = tuple(Frame(60.0 + i / 2, np.full((720, 1280, 3), i * 4, np.uint8)) for i in range(60))
    audio = (0.1 * np.sin(np.arange(30 * 16000) / 10)).astype(np.float32)
    return ClipInput(
        clip=CLIP,
        tracks=(face_track(CLIP, FACE, [61.0 + i / 2 for i in range(10)], crop=jpeg(120)),),
        voices=(speech(CLIP, VOICE, 1, 4, "Hi, I'm Ann, I run the bakery."),
                speech(CLIP, OTHER_VOICE, 5, 7, "Nice to meet you."),
                speech(CLIP, None, 8, 9, "Hello?")),
        frames=frames, audio=audio, **extra)


VALID = {"episodic": [f"[1:01] <voice_{VOICE}> greets <voice_{OTHER_VOICE}>.", f"<face_{FACE}> smiles."],
         "semantic": [f"<voice_{VOICE}>'s name is Ann.", f"<voice_{VOICE}> runs a bakery."],
         "equivalences": [{"face": FACE, "voice": VOICE}]}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


def writer_for(server: FakeServer, **options: Any) -> MLLMWriter:
    chat = create_chat_model(server.url + "?model=omni", backoff_s=0.01)
    defaults: dict[str, Any] = {"keep_perception": False}
    return MLLMWriter(chat, MLLMOptions(**(defaults | options)))


def user_parts(request: tuple[str, str, dict[str, Any], dict[str, str]]) -> list[dict[str, Any]]:
    content = request[2]["messages"][1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def test_request_carries_frames_labelled_faces_and_transcripts(server: FakeServer) -> None:
    server.script = [completion(json.dumps(VALID))]
    out = writer_for(server, frames=3, frame_side=256).write(the_clip())
    [request] = server.requests
    body = request[2]
    assert body["model"] == "omni" and body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["episodic", "semantic", "equivalences"]
    parts = user_parts(request)
    images = [i for i, p in enumerate(parts) if p["type"] == "image_url"]
    assert len(images) == 4 and not any(p["type"] == "input_audio" for p in parts)
    assert parts[images[-1] - 1]["text"].endswith(f"<face_{FACE}> (on screen about 5 s):")
    crop = base64.b64decode(parts[images[-1]]["image_url"]["url"].split(",", 1)[1])
    assert crop == jpeg(120)
    frame = _decoded(parts[images[0]]["image_url"]["url"])
    assert max(frame.shape[:2]) == 256 and frame.shape[1] > frame.shape[0]
    text = "\n".join(p["text"] for p in parts if p["type"] == "text")
    assert f"<voice_{VOICE}> [1:01-1:04]: Hi, I'm Ann, I run the bakery." in text
    assert "(unidentified speaker, no tag) [1:08-1:09]: Hello?" in text
    assert out.attempts == 1 and out.usage.calls == 1
    assert [m.text for m in out.memories if m.kind == MemoryKind.SEMANTIC] == VALID["semantic"]
    [link] = out.equivalences
    assert (link.face_id, link.voice_id, link.source) == (FACE, VOICE, "llm")


def _decoded(url: str) -> Any:
    import cv2

    data = np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8)
    return cv2.imdecode(data, cv2.IMREAD_COLOR)


def test_audio_parts_only_when_enabled(server: FakeServer) -> None:
    server.script = [completion(json.dumps(VALID))]
    writer_for(server, audio=True).write(the_clip())
    parts = user_parts(server.requests[0])
    audio = [(parts[i - 1]["text"], p) for i, p in enumerate(parts) if p["type"] == "input_audio"]
    assert [label.splitlines()[-1] for label, _ in audio] == [f"<voice_{VOICE}>:", f"<voice_{OTHER_VOICE}>:"]
    with wave.open(io.BytesIO(base64.b64decode(audio[0][1]["input_audio"]["data"]))) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getnframes()) == (16000, 1, 3 * 16000)
    assert audio[0][1]["input_audio"]["format"] == "wav"


def test_not_json_then_valid_is_retried_with_feedback(server: FakeServer) -> None:
    server.script = [completion("Sure! Here are the memories: episodic..."), completion('{"episodic": "x"}'),
                     completion(json.dumps(VALID))]
    out = writer_for(server).write(the_clip())
    assert len(server.requests) == 3 and out.attempts == 3 and out.usage.calls == 3
    second, third = server.requests[1][2]["messages"], server.requests[2][2]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Sure! Here are the memories: episodic..."}
    assert "not JSON" in second[-1]["content"] and f"<face_{FACE}>" in second[-1]["content"]
    assert "expected array" in third[-1]["content"] and len(third) == len(second)  # feedback replaced, not piled
    assert len(out.memories) == 4


def test_malformed_replies_end_in_a_specific_error(server: FakeServer) -> None:
    server.script = [completion("garbage")] * 3 + [completion(json.dumps(VALID))]
    with pytest.raises(MalformedReplyError, match=r"clip 2 of 'v1'.*3 attempts") as info:
        writer_for(server).write(the_clip())
    assert len(server.requests) == 3 and "retried on the next run" in info.value.hint


def test_statements_with_foreign_tags_are_dropped_and_tags_repaired(server: FakeServer) -> None:
    reply = {"episodic": ["<face_99> walks in.", f"<Face {FACE}> hugs <voice_{FACE}>.", "<character_1> sits.",
                          f"<face_{FACE}> hugs <face_{FACE}>."],
             "semantic": [f"Equivalence: <face_{FACE}>, <voice_{OTHER_VOICE}>", "Equivalence: <face_99>, <voice_7>",
                          "The shop sells bread."],
             "equivalences": [{"face": VOICE, "voice": FACE}, {"face": FACE, "voice": 42}]}
    server.script = [completion(json.dumps(reply))]
    out = writer_for(server).write(the_clip())
    assert [m.text for m in out.memories] == [f"<face_{FACE}> hugs <face_{FACE}>.", "The shop sells bread."]
    assert out.memories[0].entity_ids == (FACE,) and out.memories[1].entity_ids == ()
    pairs = [(e.face_id, e.voice_id) for e in out.equivalences]
    assert pairs == [(FACE, OTHER_VOICE), (FACE, VOICE)]  # swapped fields fixed
    reasons = "\n".join(out.dropped)
    assert "<face_99>, which is not in this clip" in reasons and "<character_1>" in reasons
    assert "repeated" in reasons and "does not pair" in reasons and len(out.dropped) == 5


def test_a_reply_whose_every_statement_is_dropped_is_asked_again(server: FakeServer) -> None:
    bad = {"episodic": ["<face_99> walks in."], "semantic": [], "equivalences": []}
    server.script = [completion(json.dumps(bad)), completion(json.dumps(bad))]
    out = writer_for(server, attempts=2).write(the_clip())
    assert len(server.requests) == 2 and "every statement was dropped" in server.requests[1][2]["messages"][-1][
        "content"]
    assert out.memories == () and out.attempts == 2  # a well-formed last reply is accepted, empty


def test_episodic_times_become_spans() -> None:
    from m3agent.memorize.writers.statements import interpret

    parsed = {"episodic": ["[1:05-1:07] <voice_7> laughs.", "[9:00] <voice_7> leaves."], "semantic": [],
              "equivalences": []}
    result = interpret(parsed, CLIP, {7: "voice"}, provenance="t", confidence=0.8, link_confidence=0.6)
    first, second = result.memories
    assert (first.text, first.start_s, first.end_s) == ("At 1:05-1:07, <voice_7> laughs.", 65.0, 67.0)
    assert (second.start_s, second.end_s) == (CLIP.start_s, CLIP.end_s)  # outside the clip: ignored


def test_image_limit_refusal_shrinks_the_media_not_the_output_format(server: FakeServer) -> None:
    server.script = [error(400, "At most 1 image(s) may be provided in one prompt."), completion(json.dumps(VALID))]
    writer = writer_for(server)
    out = writer.write(the_clip())
    assert len(out.memories) == 4
    parts = user_parts(server.requests[1])
    assert sum(p["type"] == "image_url" for p in parts) == 1
    assert server.requests[1][2]["response_format"]["type"] == "json_schema"
    assert isinstance(writer.chat, OpenAIChat) and writer.chat.structured_mode == "json_schema"
    assert writer.budget.images == 1  # remembered for the next clips


def test_text_only_endpoints_get_plain_text(server: FakeServer) -> None:
    server.script = [completion(json.dumps(VALID))]
    out = writer_for(server, frames=0, faces=0, keep_perception=True).write(the_clip())
    content = server.requests[0][2]["messages"][1]["content"]
    assert isinstance(content, str) and f"<face_{FACE}> (on screen about 5 s; no picture)" in content
    perception = [m for m in out.memories if m.provenance.startswith("perception")]
    assert any('says: "Hi, I\'m Ann' in m.text for m in perception) and len(out.memories) == len(perception) + 4


def test_an_empty_clip_costs_no_call(server: FakeServer) -> None:
    out = writer_for(server).write(ClipInput(clip=CLIP))
    assert out.memories == () and server.requests == []


def test_registry_and_settings() -> None:
    assert set(WRITERS.names()) == {"perception", "mllm", "local"}
    settings = Settings(writer="mllm", writer_llm="openai://127.0.0.1:9/v1?model=Qwen2.5-Omni-7B")
    writer = create_writer(settings)
    assert isinstance(writer, MLLMWriter) and isinstance(writer, MemoryWriter)
    assert isinstance(writer.chat, OpenAIChat) and writer.chat.model == "Qwen2.5-Omni-7B"
    assert writer.options.frames == settings.memorize.frames and writer.options.attempts == 3
    inline = create_writer(Settings(), "mllm:openai://127.0.0.1:9/v1?model=gpt-4o")
    assert isinstance(inline, MLLMWriter) and isinstance(inline.chat, OpenAIChat) and inline.chat.model == "gpt-4o"
    assert isinstance(create_writer(Settings()), PerceptionWriter)
    local = create_writer(Settings(writer="local"))
    assert isinstance(local, LocalWriter) and "SmolLM2" in local.chat.name
    with pytest.raises(ConfigError, match="needs a chat endpoint"):
        create_writer(Settings(writer="mllm"))


def test_text_backends_flatten_media_parts_visibly() -> None:
    content = [{"type": "text", "text": "Frames:"}, {"type": "image_url", "image_url": {"url": "data:..."}},
               {"type": "input_audio", "input_audio": {"data": "..", "format": "wav"}}]
    assert flatten_content(content) == ("Frames:\n[image omitted: this model reads text only]\n"
                                        "[audio omitted: this model reads text only]")
    assert text_messages([{"role": "user", "content": content}])[0]["content"].startswith("Frames:\n[image")
    assert text_messages([{"role": "system", "content": "plain"}]) == [{"role": "system", "content": "plain"}]


def test_reference_key_names_are_mapped_not_retried(server: FakeServer) -> None:
    """The released M3-Agent-Memorization model writes video_descriptions / high_level_conclusions."""
    native = {"video_descriptions": [f"<face_{FACE}> walks into the bakery."],
              "high_level_conclusions": [f"Equivalence: <face_{FACE}>, <voice_{VOICE}>",
                                         f"<voice_{VOICE}> owns the bakery."]}
    server.script = [completion("<think>the clip shows a bakery</think>" + json.dumps(native))]
    out = writer_for(server).write(the_clip())
    assert len(server.requests) == 1 and out.attempts == 1
    assert [(m.kind, m.text) for m in out.memories] == [
        (MemoryKind.EPISODIC, f"<face_{FACE}> walks into the bakery."),
        (MemoryKind.SEMANTIC, f"<voice_{VOICE}> owns the bakery.")]
    assert [(e.face_id, e.voice_id) for e in out.equivalences] == [(FACE, VOICE)]


def test_an_endpoint_without_vision_gets_the_transcripts(server: FakeServer) -> None:
    server.script = [error(400, "Vision is not supported by this model"), completion(json.dumps(VALID))]
    writer = writer_for(server)
    out = writer.write(the_clip())
    assert writer.budget.images == 0 and len(out.memories) == 4
    assert isinstance(server.requests[1][2]["messages"][1]["content"], str)
    assert "refused the media" in out.dropped[0]
    server.script = [error(401, "invalid api key")]  # not about media: raised (the clip fails, retried later)
    with pytest.raises(EndpointError, match="invalid api key"):
        writer.write(the_clip())
