"""Voice register (low / high) from the median speaking F0 of a voice: a description of the voice only.

The boundary, ``REGISTER_BOUNDARY_HZ`` = 160 Hz, was fixed before measuring: it is the geometric mean of
typical adult speaking F0 of low voices (~120 Hz) and high voices (~210 Hz), where their published ranges
(about 85-180 Hz and 165-255 Hz) overlap. Within ``UNCERTAIN_SEMITONES`` of it the register is
``uncertain``: raised low voices (a rally, a debate) and relaxed high voices land there.
docs/benchmarks.md ("Person attributes") has the measured accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from m3agent.perception.attributes.names import RegisterValue
from m3agent.perception.attributes.pitch import PitchStats, combine_pitch

REGISTER_BOUNDARY_HZ = 160.0
UNCERTAIN_SEMITONES = 1.0  # 151-170 Hz
CONFIDENCE_SCALE_SEMITONES = 1.5
MIN_VOICED_S = 0.3
CONFIDENT_VOICED_S = 2.0


@dataclass(frozen=True, slots=True)
class VoiceRegister:
    """Register of a voice with a confidence in [0, 1] (0 for ``uncertain``); ``evidence`` says what it
    was computed from (median F0, spread, voiced seconds, segments, boundary)."""

    value: RegisterValue
    confidence: float
    median_hz: float | None
    voiced_s: float
    segments: int
    evidence: str


def voice_register(
    stats: PitchStats | Sequence[PitchStats],
    *,
    boundary_hz: float = REGISTER_BOUNDARY_HZ,
    uncertain_semitones: float = UNCERTAIN_SEMITONES,
) -> VoiceRegister:
    """The register of the speech summarised by ``stats`` (one, or several merged: a voice entity's segments).

    ``low`` / ``high`` when the median voiced F0 is more than ``uncertain_semitones`` below / above
    ``boundary_hz``; ``uncertain`` nearer, or with under ``MIN_VOICED_S`` seconds of voiced speech.
    Confidence grows with the distance from the boundary (logistic in semitones) and is scaled down
    when less than ``CONFIDENT_VOICED_S`` seconds were voiced.
    """
    merged = stats if isinstance(stats, PitchStats) else combine_pitch(stats)
    median = merged.median_hz
    if median is None or merged.voiced_s < MIN_VOICED_S:
        return VoiceRegister("uncertain", 0.0, median, merged.voiced_s, merged.segments,
                             f"{merged.voiced_s:.1f} s voiced speech, too little to judge")
    semitones = 12.0 * math.log2(median / boundary_hz)
    evidence = _evidence(merged, median, semitones, boundary_hz)
    if abs(semitones) < uncertain_semitones:
        return VoiceRegister("uncertain", 0.0, median, merged.voiced_s, merged.segments, evidence)
    side = 1.0 / (1.0 + math.exp(-abs(semitones) / CONFIDENCE_SCALE_SEMITONES))
    confidence = side * min(1.0, merged.voiced_s / CONFIDENT_VOICED_S)
    value: RegisterValue = "high" if semitones > 0 else "low"
    return VoiceRegister(value, round(confidence, 3), median, merged.voiced_s, merged.segments, evidence)


def _evidence(stats: PitchStats, median: float, semitones: float, boundary_hz: float) -> str:
    low, high = stats.quantile_hz(0.1) or median, stats.quantile_hz(0.9) or median
    return (f"median F0 {median:.0f} Hz (10-90%: {low:.0f}-{high:.0f} Hz), {semitones:+.1f} semitones from "
            f"{boundary_hz:.0f} Hz, over {stats.voiced_s:.1f} s voiced of {stats.analysed_s:.1f} s in "
            f"{stats.segments} segment{'s' if stats.segments != 1 else ''}")
