"""The optional scene stages of one clip: shots first, then on-screen text, objects and sounds.

Each stage is its own module with one typed output (:class:`~m3agent.domain.ClipSenses` holds them),
switched on or off in ``settings.senses``. A stage that fails on a clip (a broken model file, a
frame it cannot read, a missing package) is recorded as a :class:`~m3agent.domain.StageSkip` with
the reason, and the clip is still ingested with everything else. Text and objects sample frames
per shot, so without the shot stage the whole clip counts as one shot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from m3agent.domain import ClipSenses, SenseStage, Shot, StageSkip

if TYPE_CHECKING:
    from pathlib import Path

    from m3agent.domain import ClipMedia, ObjectTrack, ScreenText, SoundEvent
    from m3agent.settings import SensesSettings

T = TypeVar("T")


def any_enabled(s: SensesSettings) -> bool:
    """Whether at least one scene stage is switched on."""
    return s.shots or s.text or s.objects or s.sounds


def perceive_senses(media: ClipMedia, cfg: SensesSettings, cache_dir: Path, timings: dict[str, float],
                    cpu: dict[str, float] | None = None) -> ClipSenses:
    """Run the enabled scene stages on ``media``; adds each stage's wall seconds to ``timings`` and, when given,
    the process's CPU seconds during the stage to ``cpu`` (all threads, libraries' worker threads included:
    a stage's own cost only where nothing else runs in the process, as in bench/perception_scene.py).
    ``cache_dir`` holds models unpacked on first use (the sound classifier's)."""
    skipped: list[StageSkip] = []

    def run(stage: SenseStage, enabled: bool, func: Callable[[], tuple[T, ...]]) -> tuple[T, ...]:
        if not enabled:
            return ()
        started, cpu_started = time.perf_counter(), time.process_time()
        try:
            return func()
        except Exception as exc:  # a stage boundary: any failure becomes a recorded skip of this stage
            skipped.append(StageSkip(stage, _reason(exc)))
            return ()
        finally:
            timings[stage.value] = timings.get(stage.value, 0.0) + time.perf_counter() - started
            if cpu is not None:
                cpu[stage.value] = cpu.get(stage.value, 0.0) + time.process_time() - cpu_started

    has_frames, has_audio = bool(media.frames), media.audio is not None
    shots = run(SenseStage.SHOTS, cfg.shots and has_frames, lambda: _shots(media, cfg))
    cuts = shots or whole_clip(media)
    texts = run(SenseStage.TEXT, cfg.text and has_frames, lambda: _texts(media, cuts, cfg))
    objects = run(SenseStage.OBJECTS, cfg.objects and has_frames, lambda: _objects(media, cuts, cfg))
    sounds = run(SenseStage.SOUNDS, cfg.sounds and has_audio, lambda: _sounds(media, cfg, cache_dir))
    return ClipSenses(shots=shots, texts=texts, objects=objects, sounds=sounds, skipped=tuple(skipped))


def whole_clip(media: ClipMedia) -> tuple[Shot, ...]:
    """The clip as one shot (no scene change claimed)."""
    return (Shot(media.clip.start_s, media.clip.end_s, cut=False),)


def _reason(exc: Exception) -> str:
    from m3agent.errors import M3AgentError

    if isinstance(exc, M3AgentError):
        return f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    return f"{type(exc).__name__}: {exc}"


def _shots(media: ClipMedia, cfg: SensesSettings) -> tuple[Shot, ...]:
    from m3agent.perception.scene.shots import detect_shots

    return detect_shots(media.frames, media.clip, cfg.shot_threshold, before=media.context_frame)


def _texts(media: ClipMedia, shots: tuple[Shot, ...], cfg: SensesSettings) -> tuple[ScreenText, ...]:
    from m3agent.perception.scene.screen_text import read_screen_text

    return read_screen_text(media.frames, shots, cfg)


def _objects(media: ClipMedia, shots: tuple[Shot, ...], cfg: SensesSettings) -> tuple[ObjectTrack, ...]:
    from m3agent.perception.scene.objects import detect_objects

    return detect_objects(media.frames, shots, cfg)


def _sounds(media: ClipMedia, cfg: SensesSettings, cache_dir: Path) -> tuple[SoundEvent, ...]:
    from m3agent.perception.audio.sounds import hear_sounds

    return hear_sounds(media.audio, media.audio_rate, media.clip.start_s, cfg, cache_dir)
