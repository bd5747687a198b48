"""OpenAI chat content parts for a clip's media: frames and face crops as JPEG data URLs,
voice audio as base64 WAV (``input_audio``).

Data URLs (not remote links) are used because every target accepts them:
OpenAI, vLLM, Gemini's OpenAI-compatible endpoint and Ollama (which accepts
nothing else).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent.domain import Frame

if TYPE_CHECKING:
    from m3agent.memorize.inputs import ClipInput

JPEG_QUALITY = 80
Part = dict[str, Any]


def text_part(text: str) -> Part:
    return {"type": "text", "text": text}


def image_part(jpeg: bytes) -> Part:
    url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def audio_part(wav: bytes) -> Part:
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode("ascii"), "format": "wav"}}


def pick_frames(frames: Sequence[Frame], count: int) -> list[Frame]:
    """``count`` frames spread evenly over the clip (centres of equal slices), in time order."""
    if count <= 0 or not frames:
        return []
    if len(frames) <= count:
        return list(frames)
    step = len(frames) / count
    return [frames[int(step * i + step / 2)] for i in range(count)]


def frame_jpeg(image: Any, max_side: int) -> bytes:
    """JPEG of an RGB ``uint8`` array, downscaled so its longer side is at most ``max_side``."""
    from m3agent.media.frames import encode_jpeg

    data = encode_jpeg(image, max_side, JPEG_QUALITY)
    if not data:
        raise ValueError("could not encode a frame as JPEG")
    return data


def voice_audio(inp: ClipInput, entity_id: int, max_seconds: float) -> Any | None:
    """The clip audio of ``entity_id``'s segments, joined, at most ``max_seconds`` long (``None`` if none)."""
    import numpy as np

    if inp.audio is None:
        return None
    audio = np.asarray(inp.audio, dtype=np.float32)
    pieces = []
    for seg in sorted((s for s in inp.voices if s.entity_id == entity_id), key=lambda s: s.start_s):
        lo = max(0, int((seg.start_s - inp.clip.start_s) * inp.audio_rate))
        hi = min(len(audio), int((seg.end_s - inp.clip.start_s) * inp.audio_rate))
        if hi > lo:
            pieces.append(audio[lo:hi])
    if not pieces:
        return None
    return np.concatenate(pieces)[: int(max_seconds * inp.audio_rate)]
