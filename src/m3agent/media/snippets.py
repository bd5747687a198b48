"""Voice snippets: a few seconds of each voice entity's speech per clip, as WAV bytes.

The store keeps one snippet per (voice entity, clip), cut from the middle of
the entity's longest segment in the clip, so a person can listen to who a
``<voice_N>`` is (the web inspector will play them) without the store growing
with every word: 3 s of 16 kHz 16-bit mono is 96 kB. WAV is written with the
standard library so any browser or player opens it; FLAC would halve the size
but needs libsndfile on every reader.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m3agent.domain import ClipMedia, VoiceSegment


def wav_bytes(samples: object, rate: int) -> bytes:
    """Mono float samples in [-1, 1] as a 16-bit PCM WAV file (values outside are clipped)."""
    import numpy as np

    pcm = (np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767.0).round().astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


def voice_snippets(media: ClipMedia, voices: Sequence[VoiceSegment], seconds: float) -> dict[int, bytes]:
    """``{index in voices: WAV}`` for the longest segment of each identified voice entity of the clip.

    The snippet is the middle ``seconds`` of that segment (all of it when
    shorter), cut from ``media.audio``. Unidentified segments, a clip without
    audio and ``seconds <= 0`` give no snippet.
    """
    audio = media.audio
    if audio is None or seconds <= 0:
        return {}
    longest: dict[int, int] = {}
    for i, seg in enumerate(voices):
        if seg.entity_id is None:
            continue
        best = longest.get(seg.entity_id)
        if best is None or seg.end_s - seg.start_s > voices[best].end_s - voices[best].start_s:
            longest[seg.entity_id] = i
    snippets = {}
    for i in sorted(longest.values()):
        samples = _middle(audio, media, voices[i], seconds)
        if len(samples):
            snippets[i] = wav_bytes(samples, media.audio_rate)
    return snippets


def _middle(audio: Any, media: ClipMedia, seg: VoiceSegment, seconds: float) -> Any:
    """The clip ``audio`` of the middle ``seconds`` of ``seg`` (absolute times), clipped to the clip."""
    span = min(seconds, seg.end_s - seg.start_s)
    centre = (seg.start_s + seg.end_s) / 2.0
    rate = media.audio_rate
    start = max(0, round((centre - span / 2.0 - media.clip.start_s) * rate))
    end = max(start, round((centre + span / 2.0 - media.clip.start_s) * rate))
    return audio[start:end]
