"""Clothes colour below the face: the colour words for CIELAB values, the chest's place and the frame's edge, the
vote over crops, and real people (the debate's and the interview's, on their videos' frames)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import BBox
from m3agent.perception.attributes.clothes import Clothes, clothes_name, combine_clothes, face_clothes


@pytest.mark.parametrize(("lab", "word"), [
    ((10, 0, 0), "dark"), ((22, 8, -30), "dark"), ((34, 2, -6), "dark"),  # black, navy, charcoal
    ((92, 0, 2), "white"), ((60, 1, -3), "grey"), ((53, 80, 67), "red"), ((80, 25, 5), "pink"),
    ((32, 79, -108), "blue"), ((88, -86, 83), "green"), ((97, -22, 94), "yellow"), ((45, 20, 40), "brown"),
    ((30, 58, -36), "purple"),
])  # fmt: skip
def test_colour_words_for_clothes(lab: tuple[float, float, float], word: str) -> None:
    assert clothes_name(*lab) == word


def test_the_chest_below_the_face_is_measured_and_a_chest_out_of_frame_is_not() -> None:
    image = np.full((400, 300, 3), 235, dtype=np.uint8)  # a light wall
    image[170:300, 60:240] = (30, 60, 170)  # a blue sweater below the face
    image[40:110, 110:170] = (200, 160, 130)  # the face
    clothes = face_clothes(image, BBox(110, 40, 170, 110))
    assert clothes is not None and clothes.colour == "blue" and "chest" in clothes.evidence
    assert face_clothes(image, BBox(110, 300, 170, 370)) is None  # a face at the bottom: its chest is not in view


def test_crops_vote_and_a_split_vote_names_nothing() -> None:
    def crop(colour: str) -> Clothes:
        return Clothes(colour, 1.0, "")  # type: ignore[arg-type]

    combined = combine_clothes([crop("dark"), crop("dark"), crop("grey")])
    assert combined is not None and combined.colour == "dark" and combined.confidence == 0.667 and combined.crops == 3
    assert combine_clothes([crop("dark"), crop("grey"), crop("blue")]) is None
    assert combine_clothes([]) is None


@pytest.mark.media
@pytest.mark.parametrize(("video", "side", "colour"), [
    ("iianet_debate_trump_clinton.mp4", "left", "dark"),  # a dark suit
    ("visualvoice_interview_2spk.mp4", "right", "white"),  # a white T-shirt
])
def test_real_people_in_their_clothes(media_dir: Path, video: str, side: str, colour: str) -> None:
    from m3agent.media import iter_clips
    from m3agent.perception.faces.detect import FACE_DETECTORS, detect_faces
    from m3agent.perception.faces.models import face_models
    from m3agent.settings import MediaSettings

    detector = FACE_DETECTORS.create("mtcnn", models=face_models(1))
    crops = []
    clip = next(iter(iter_clips(media_dir / "video" / video, MediaSettings(frame_fps=1.0))))
    for frame in clip.frames[:8]:
        width = frame.image.shape[1]
        boxes = [d.bbox for d in detect_faces(frame.image, detector, min_face_px=40)
                 if ((d.bbox.x1 + d.bbox.x2) / 2 < width / 2) == (side == "left")]
        if boxes:
            found = face_clothes(frame.image, max(boxes, key=lambda b: b.height))
            crops += [found] if found is not None else []
    combined = combine_clothes(crops)
    assert len(crops) >= 4 and combined is not None and combined.colour == colour
