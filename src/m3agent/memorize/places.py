"""Where a person usually is in a shot, in the words memories use (``on the left``, ``in the centre, in the
background``): one owner for the presence lines of the perception writer and the shot summaries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from m3agent.domain import FaceObservation, FaceTrack
from m3agent.perception.attributes.place import PLACE_WORDS
from m3agent.perception.attributes.position import frame_position, typical_position


def largest_heights(tracks: Sequence[FaceTrack]) -> dict[float, float]:
    """The height of the largest face sampled at each time (rounded to the millisecond): the yardstick of
    foreground and background."""
    heights: dict[float, float] = defaultdict(float)
    for track in tracks:
        for obs in track.observations:
            key = round(obs.time_s, 3)
            heights[key] = max(heights[key], obs.bbox.height)
    return heights


def place_words(observations: Sequence[FaceObservation], heights: dict[float, float],
                frame_size: tuple[int, int] | None) -> str:
    """``on the left`` / ``in the centre, in the background`` …: the usual place of these observations of one
    person, or "" without a frame size or a usable box."""
    if frame_size is None:
        return ""
    width, height = frame_size
    positions = []
    for obs in observations:
        try:
            positions.append(frame_position(obs.bbox, width, height, largest_height=heights[round(obs.time_s, 3)]))
        except ValueError:  # an empty box: no place from it
            continue
    typical = typical_position(positions)
    if typical is None:
        return ""
    return PLACE_WORDS[typical.horizontal] + (", in the background" if typical.depth == "background" else "")
