"""Non-speech sound events of a clip from YAMNet scores, smoothed over neighbouring windows.

Each 0.96 s window (every 0.48 s) gets 521 AudioSet scores. Speech classes are left to ASR and
acoustic-scene classes (silence, room tone, noise) say nothing worth remembering, so both are
ignored. A class's scores are averaged over ``SMOOTH`` neighbouring windows; runs at or above
``sound_min_score`` form an event from its first window's start to its last window's end, runs
separated by one window or less join, and events shorter than ``sound_min_seconds`` are dropped.
Silent audio yields no events; clipped or non-finite samples are limited to [-1, 1] first.

Laughter under speech is not heard. On the Hot Ones interview (128 s, three men joking, audible
laughter per its README) the quantised model's laughter classes (Laughter, Giggle, Snicker, Belly
laugh, Chuckle) stay at or below 0.011 in every window but one: at 54.2 s, the one window where
Speech also falls to 0.094, Laughter reaches 0.094 (Screaming 0.046), a single 0.96 s window that
3-window smoothing brings to 0.031. The snow video peaks at the same 0.094 (108.5 s), other media
below 0.03. A laughter threshold low enough for that window (with no smoothing) would be a guess
on one window per video with nothing labelled to check it against, so the thresholds stay one for
all classes; the model's outputs are quantised (steps of 0.757 in logit), which is why scores sit on
a few levels (0.0105, 0.0936, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3agent.domain import SoundEvent

if TYPE_CHECKING:
    from pathlib import Path

    from m3agent.settings import SensesSettings

SMOOTH = 3
JOIN_WINDOWS = 4  # runs of one class up to ~2 s apart are one event
# AudioSet indices left out: speech (ASR has it), whispering, speech babble, and silence, room tone,
# noise and other acoustic-scene labels (494-520).
IGNORED = frozenset({0, 1, 2, 3, 4, 5, 12, 65, *range(494, 521)})
SILENCE_RMS = 1e-4


def hear_sounds(audio: Any, rate: int, start_s: float, senses: SensesSettings, cache_dir: Path
                ) -> tuple[SoundEvent, ...]:
    """Sound events of a mono float waveform at ``rate`` Hz that starts at ``start_s`` (absolute times)."""
    from m3agent.perception.audio.yamnet import RATE, yamnet

    wave = _clean(audio, rate, RATE)
    if wave.size == 0 or float((wave**2).mean()) ** 0.5 < SILENCE_RMS:
        return ()
    model = yamnet(cache_dir)
    return events(model.scores(wave), model.classes, start_s, senses.sound_min_score,
                  senses.sound_min_seconds)


def events(scores: Any, classes: tuple[str, ...], start_s: float, min_score: float,
           min_seconds: float) -> tuple[SoundEvent, ...]:
    """Events from (windows, classes) scores, in time order."""
    import numpy as np

    from m3agent.perception.audio.yamnet import PATCH_HOP_SECONDS, PATCH_SECONDS

    kernel = np.ones(SMOOTH, np.float32) / SMOOTH
    out = []
    for index in np.flatnonzero(scores.max(0) >= min_score):
        if int(index) in IGNORED:
            continue
        smooth = np.convolve(scores[:, index], kernel, mode="same")
        for first, last in _runs(smooth >= min_score, gap=JOIN_WINDOWS):
            start = start_s + first * PATCH_HOP_SECONDS
            end = start_s + last * PATCH_HOP_SECONDS + PATCH_SECONDS
            if end - start >= min_seconds:
                peak = float(smooth[first:last + 1].max())
                out.append(SoundEvent(classes[int(index)], round(start, 2), round(end, 2), round(peak, 3)))
    return tuple(sorted(out, key=lambda e: (e.start_s, -e.score)))


def _runs(active: Any, gap: int) -> list[tuple[int, int]]:
    """(first, last) indices of True runs, joining runs separated by at most ``gap`` False values."""
    runs: list[tuple[int, int]] = []
    for i, on in enumerate(active.tolist()):
        if not on:
            continue
        if runs and i - runs[-1][1] <= gap + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _clean(audio: Any, rate: int, target: int) -> Any:
    import numpy as np

    wave = np.nan_to_num(np.asarray(audio, np.float32).ravel(), nan=0.0, posinf=1.0, neginf=-1.0)
    wave = np.clip(wave, -1.0, 1.0)
    if rate <= 0:
        raise ValueError(f"audio sample rate must be positive, got {rate}")
    if rate != target and wave.size:
        times = np.arange(round(wave.size * target / rate)) / target
        wave = np.interp(times, np.arange(wave.size) / rate, wave).astype(np.float32)
    return wave
