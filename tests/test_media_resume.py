"""Resuming a file at clip N decodes the media of clip N (regression: a WAV, which declares no start time,
took its origin from the first frame after the seek, so clip N held the audio of clip 2N)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3agent.media import iter_clips
from m3agent.media.snippets import wav_bytes
from m3agent.settings import MediaSettings

RATE, SECONDS = 16000, 60


def test_resuming_an_audio_file_gives_each_clip_its_own_audio(tmp_path: Path) -> None:
    ramp = np.arange(RATE * SECONDS, dtype=np.float32) / (RATE * SECONDS) * 0.9  # amplitude encodes time
    wav = tmp_path / "ramp.wav"
    wav.write_bytes(wav_bytes(ramp, RATE))
    media = MediaSettings(clip_seconds=2.0)
    clips = list(iter_clips(str(wav), media, start_clip=12))
    assert [c.clip.index for c in clips] == list(range(12, 30))
    for clip in (clips[0], clips[-1]):
        assert clip.audio is not None
        heard_at = float(np.mean(clip.audio)) / 0.9 * SECONDS
        assert abs(heard_at - (clip.clip.start_s + 1.0)) < 0.05, (clip.clip, heard_at)
