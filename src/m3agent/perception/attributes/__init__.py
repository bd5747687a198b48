"""Measured descriptions of people and shots for character profiles.

Voice register from pitch, position in the frame, still picture vs live video, glasses on a face (a line
across the bridge of the nose on a landmark-aligned face), and apparent gender and age of a face (packaged
networks). Pure functions returning typed frozen values, each with a confidence and the evidence it was
computed from; numpy/cv2/onnxruntime load inside the functions.

:mod:`.clip` runs them on an ingested clip and groups the results by entity for the memory.

Results on the shared media: docs/benchmarks.md, "Person attributes" (``python bench/attributes.py``) and
"Person attributes: eyewear" (``python bench/eyewear.py``).
"""

from __future__ import annotations

from m3agent.perception.attributes.appearance import FaceAppearance, combine_appearance, face_appearance
from m3agent.perception.attributes.clip import ClipMeasures, entity_attributes, measure_clip
from m3agent.perception.attributes.pitch import (
    F0Contour,
    PitchStats,
    combine_pitch,
    f0_contour,
    pitch_stats,
    segment_pitch,
)
from m3agent.perception.attributes.place import main_face_height
from m3agent.perception.attributes.position import FramePosition, frame_position, positions_in_frame, typical_position
from m3agent.perception.attributes.register import REGISTER_BOUNDARY_HZ, VoiceRegister, voice_register
from m3agent.perception.attributes.stills import ShotMotion, frame_change, shot_motion, shots_motion

__all__ = [
    "REGISTER_BOUNDARY_HZ",
    "ClipMeasures",
    "F0Contour",
    "FaceAppearance",
    "FramePosition",
    "PitchStats",
    "ShotMotion",
    "VoiceRegister",
    "combine_appearance",
    "combine_pitch",
    "entity_attributes",
    "f0_contour",
    "face_appearance",
    "frame_change",
    "frame_position",
    "main_face_height",
    "measure_clip",
    "pitch_stats",
    "positions_in_frame",
    "segment_pitch",
    "shot_motion",
    "shots_motion",
    "typical_position",
    "voice_register",
]
