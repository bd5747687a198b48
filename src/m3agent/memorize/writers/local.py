"""The local writer: perception memories plus short topic summaries from a small local LLM.

For each voice that says enough in the clip, the model (``llamacpp:smollm2`` by
default, grammar-constrained to ``prompts/memorize_local.json``) names up to
three topics; a topic is kept only when its words occur in that voice's
transcript, so the summary can be wrong in emphasis but never invents a
subject. Kept topics become one semantic memory per voice, e.g.
``<voice_7> talks about the budget and taxes.`` (confidence 0.5). A 135M model
is weak: this adds searchable gist, nothing more. A reply that does not
parse costs only that summary, never the clip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.domain import Memory, MemoryKind, VoiceSegment
from m3agent.llm import Usage
from m3agent.memorize.inputs import ClipInput, WriterOutput
from m3agent.memorize.writers.perception import PerceptionWriter
from m3agent.text import STOPWORDS, stem, words

if TYPE_CHECKING:
    from m3agent.llm import ChatModel
    from m3agent.registry import BackendSpec
    from m3agent.settings import Settings

PROMPT = "memorize_local"
DEFAULT_MODEL = "llamacpp:smollm2"
MIN_WORDS = 8
MAX_TRANSCRIPT_CHARS = 1500
CONFIDENCE = 0.5


class LocalWriter:
    """:class:`PerceptionWriter` memories plus one verified topic summary per talkative voice."""

    def __init__(self, chat: ChatModel, *, max_tokens: int = 60) -> None:
        self.chat = chat
        self.max_tokens = max_tokens
        self.provenance = f"local-writer/1:{chat.name}"

    def write(self, clip_input: ClipInput) -> WriterOutput:
        from m3agent.llm.prompts import load_prompt_set

        base = PerceptionWriter().write(clip_input)
        prompts = load_prompt_set(PROMPT)
        summaries: list[Memory] = []
        usage, dropped = Usage(), list(base.dropped)
        for entity, segments in _speech_by_voice(clip_input).items():
            transcript = " ".join(s.text.strip() for s in segments)[:MAX_TRANSCRIPT_CHARS]
            messages = [{"role": "system", "content": prompts.render("system")},
                        {"role": "user", "content": prompts.render("speaker", text=transcript)}]
            reply = self.chat.chat(messages, schema=prompts.schema, max_tokens=self.max_tokens)
            usage = usage + reply.usage
            topics = grounded_topics(reply.parsed.get("topics", []) if reply.parsed else [], transcript)
            if not topics:
                why = reply.error or repr(reply.text)
                dropped.append(f"{tags.voice(entity)}: no topic found in the transcript ({why})")
                continue
            summaries.append(self._summary(clip_input, entity, segments, topics))
        return WriterOutput(memories=(*base.memories, *summaries), dropped=tuple(dropped), usage=usage,
                            attempts=usage.calls)

    def _summary(self, inp: ClipInput, entity: int, segments: list[VoiceSegment], topics: list[str]) -> Memory:
        clip = inp.clip
        text = f"{tags.voice(entity)} talks about {_join(topics)}."
        return Memory(kind=MemoryKind.SEMANTIC, text=text, video_id=clip.video_id, clip_index=clip.index,
                      start_s=segments[0].start_s, end_s=segments[-1].end_s, entity_ids=(entity,),
                      confidence=CONFIDENCE, provenance=self.provenance)


def _speech_by_voice(inp: ClipInput) -> dict[int, list[VoiceSegment]]:
    """Segments of each voice that says at least :data:`MIN_WORDS` words in the clip, in time order."""
    by_voice: dict[int, list[VoiceSegment]] = {}
    for seg in sorted(inp.voices, key=lambda s: s.start_s):
        if seg.entity_id is not None and seg.text.strip():
            by_voice.setdefault(seg.entity_id, []).append(seg)
    return {e: segs for e, segs in by_voice.items() if sum(len(s.text.split()) for s in segs) >= MIN_WORDS}


def grounded_topics(topics: list[Any], transcript: str) -> list[str]:
    """Distinct topics (at most 3) whose content words all occur in ``transcript`` (plural-tolerant)."""
    said = {stem(w) for w in words(transcript)}
    kept: dict[str, str] = {}  # stemmed content words -> phrase as written
    for topic in topics:
        topic_words = words(str(topic))
        content = [stem(w) for w in topic_words if w not in STOPWORDS]
        key = " ".join(content)
        if content and len(topic_words) <= 5 and all(w in said for w in content) and key not in kept:
            kept[key] = " ".join(topic_words)
    return list(kept.values())[:3]


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def create(spec: BackendSpec, *, settings: Settings | None = None, chat: ChatModel | None = None,
           **_: Any) -> LocalWriter:
    """Factory of ``local`` (model: ``settings.writer_llm`` or ``llamacpp:smollm2``) and ``local:SPEC``."""
    from m3agent.llm import create_chat_model, endpoint_options

    if chat is None:
        model = spec.raw.partition(":")[2].strip() or (settings.writer_llm if settings else None) or DEFAULT_MODEL
        keys = endpoint_options(settings) if settings else {}
        chat = create_chat_model(model, **keys)
    return LocalWriter(chat)
