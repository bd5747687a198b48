"""What a page can show of one observation, on both backends: a face sighting's crop (its own, else its track's
nearest in the clip and entity), which sightings and voice lines have a crop or kept audio, and what a merge in
force recorded of the entity it absorbed (issue 49, point 3: merge history and split lists show people)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from m3agent.domain import BBox, Clip, EntityKind, FaceObservation, Video, VoiceSegment
from m3agent.errors import NotFoundError
from store_helpers import DIM


def unit(i: int, dim: int = DIM) -> Any:
    return np.eye(dim, dtype=np.float32)[i]


def sighting(w: Any, entity: int, t: float, track: int, crop: bytes | None) -> int:
    found: int = w.add_face(FaceObservation(0, t, BBox(0, 0, 8, 8), 0.9, quality=0.5, track=track, crop_jpeg=crop,
                                            entity_id=entity))
    return found


def test_crops_of_sightings_audio_of_lines_and_what_a_merge_recorded(make_store: Any) -> None:
    store = make_store()
    store.add_video(Video("v", "/nowhere/v.mp4", duration_s=10.0))
    with store.clip(Clip("v", 0, 0.0, 10.0)) as w:
        a, b = (w.add_entity(EntityKind.FACE, [unit(i)], name=n).id for i, n in ((0, ""), (1, "Bea")))
        own = sighting(w, a, 1.0, 3, b"first")
        near = sighting(w, a, 2.0, 3, b"second")
        borrowing = sighting(w, a, 2.4, 3, None)  # nearest of its track: the one at 2.0 s
        alone = sighting(w, a, 3.0, 4, None)  # its track kept no crop
        other = sighting(w, b, 2.5, 3, b"b's")  # same track number, another entity: not borrowed
        voice = w.add_entity(EntityKind.VOICE, [unit(2, 256)]).id
        heard = w.add_voice(VoiceSegment(0, 1.0, 2.0, "hi", entity_id=voice), b"RIFF")
        silent = w.add_voice(VoiceSegment(0, 3.0, 4.0, "bye", entity_id=voice), None)

    assert store.face_crop(own) == b"first" and store.face_crop(borrowing) == b"second"
    assert store.face_crop(alone) is None and store.face_crop(other) == b"b's"
    with pytest.raises(NotFoundError):
        store.face_crop(10**9)
    assert store.observations_with_media(EntityKind.FACE, [own, near, borrowing, alone, 10**9]) == \
        {own, near, borrowing}
    assert store.observations_with_media(EntityKind.VOICE, [heard, silent]) == {heard}
    assert store.observations_with_media(EntityKind.FACE, []) == set()

    store.merge_entities(a, b)
    [merge] = store.entity_merges()
    recorded = store.merged_entity(merge.id)
    assert recorded is not None and (recorded.kind, recorded.name, recorded.observations) == ("face", "Bea", (other,))
    assert store.observations_with_media(EntityKind.FACE, recorded.observations) == {other}  # now a's, still shown
    store.undo_merge(merge.id)
    assert store.merged_entity(merge.id) is None and store.merged_entity(10**9) is None
