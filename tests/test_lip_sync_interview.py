"""The two-speaker interview: two men on screen side by side throughout, arguing over each other (no labels).

Each of the two main voices must be linked to a face of its own, and its lips must beat the other face's by a
margin (issue 48). On an AVX-512 host base's first pass once wrote 8 words over 13.6 s of the argument, so the
second man had 0.7 s of speech and no link; a sparse segment is now decoded again
(:mod:`m3agent.perception.audio.asr_gaps`). A second of the long voice inside another speaker's turn goes back to it
(:mod:`m3agent.perception.audio.changes`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from m3agent.domain import EntityKind
from m3agent.identity.linking import evidence_from
from m3agent.media import default_video_id
from m3agent.pipeline import ingest_source
from m3agent.settings import load_settings
from m3agent.store import open_memory

pytestmark = [pytest.mark.media, pytest.mark.slow]

MAIN_VOICE_S = 3.0  # a voice with this much speech is one of the two men's main voices (measured 4.0-10.5 s)
MIN_MARGIN = 0.3  # own face over the other face (measured 0.48-0.80 in seven runs, docs/benchmarks.md)
MIN_OWN_R = 0.25  # each man's lips with his own voice (issue 48 asks 0.3; measured 0.32-0.42 at video rate; the long
# voice was 0.16-0.18 until a second of it that the diarizer had filed under another speaker went back to it)


def test_each_man_is_linked_to_his_own_face_with_a_margin(media_dir: Path, tmp_path: Path) -> None:
    video = media_dir / "video" / "visualvoice_interview_2spk.mp4"
    settings = load_settings(memory=str(tmp_path / "interview.db"), media={"clip_seconds": 30.0},
                             perception={"asr_model": "base"})
    report = ingest_source(settings, str(video), perception_only=True, show_progress=False)
    assert report.clips_done == 1 and not report.clips_failed
    vid = default_video_id(str(video))
    with open_memory(settings, readonly=True, create=False) as store:
        faces = {e.id for e in store.entities(EntityKind.FACE)}
        spans = store.voice_spans(vid)
        evidence = evidence_from(store.face_sightings(vid), spans, settings.media.frame_fps, store.mouth_motions(vid))
        links = store.links(min_confidence=settings.perception.link_accept_confidence)
    assert len(faces) == 2, "side by side: exactly two faces"
    speech: dict[int, float] = {}
    for start, end, voice in spans:
        speech[voice] = speech.get(voice, 0.0) + end - start
    main = [voice for voice, seconds in speech.items() if seconds >= MAIN_VOICE_S]
    assert len(main) == 2, f"two main voices: {speech}"
    linked = {link.voice_id: link.face_id for link in links}
    assert all(voice in linked for voice in main), f"links {links}, speech {speech}"
    assert linked[main[0]] != linked[main[1]], "each man to a face of his own"
    r = {pair: sync.r for pair, sync in evidence.lip_sync.items()}
    for voice in main:
        own = linked[voice]
        other = (faces - {own}).pop()
        assert r[(own, voice)] - r[(other, voice)] >= MIN_MARGIN, f"voice {voice}: {evidence.lip_sync}"
        assert r[(own, voice)] >= MIN_OWN_R, f"voice {voice}: {evidence.lip_sync}"
