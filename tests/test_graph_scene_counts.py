"""Counting described scenes and where scenes begin, on a small video written through the clip writer: two dark
screens, one heard in one voice and one in two, and a cut a moment before a clip's end whose sliver of a shot has
no summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from m3agent.domain import Clip, EntityKind, Memory, MemoryKind, ShotRecord, Video, VoiceSegment
from m3agent.graph.operators import EntityGraph
from m3agent.graph.scenes import counted_scenes, describe, matching_scenes, scenes
from m3agent.memorize.scene_memories import PROVENANCE
from store_helpers import unit_vectors


def _video(store: Any) -> None:
    """v2, 60 s: clip 0 holds a dark screen under voice X (0-15) and, after a cut, one under voices Y and Z (15-29.5);
    a cut at 29.5 opens a third dark screen under voice X, whose first half second (to the clip's end) holds
    nothing and has no summary; clip 1 goes on with it (30-60)."""
    store.add_video(Video("v2", "/v2.mp4", 60.0, metadata={"width": 1280, "height": 720}))
    vec = unit_vectors(4)

    def summary(clip: Clip, text: str, start: float, end: float, voices: tuple[int, ...]) -> Memory:
        return Memory(kind=MemoryKind.EPISODIC, text=text, video_id="v2", clip_index=clip.index, start_s=start,
                      end_s=end, entity_ids=voices, provenance=PROVENANCE, embedding=vec[3])

    first, second = Clip("v2", 0, 0.0, 30.0), Clip("v2", 1, 30.0, 60.0)
    with store.clip(first) as w:
        x, y, z = (w.add_entity(EntityKind.VOICE, [vec[i]]).id for i in range(3))
        for voice, start, end in ((x, 2.0, 6.0), (y, 17.0, 20.0), (z, 22.0, 26.0)):
            w.add_voice(VoiceSegment(0, start, end, "words", entity_id=voice))
        w.add_memory(summary(first, "Shot 0:00–0:15: speaking <voice_1>.", 0.0, 15.0, (x,)))
        w.add_memory(summary(first, "Shot 0:15–0:29 (after a scene change): speaking <voice_2>, <voice_3>.", 15.0,
                             29.5, (y, z)))
        for start, end in ((0.0, 15.0), (15.0, 29.5)):
            w.add_shot(ShotRecord("v2", 0, start, end, True, "still", 0.99))
        w.add_shot(ShotRecord("v2", 0, 29.5, 30.0, True, "uncertain", 0.0))
    with store.clip(second) as w:
        w.add_voice(VoiceSegment(1, 40.0, 44.0, "more words", entity_id=x))
        w.add_memory(summary(second, "Shot 0:30–1:00: speaking <voice_1>.", 30.0, 60.0, (x,)))
        w.add_shot(ShotRecord("v2", 1, 30.0, 60.0, False, "still", 0.99))


def test_a_count_of_described_scenes_counts_each_that_fits_however_many_voices(
        make_store: Callable[[], Any]) -> None:
    """The number of voices heard picks the one scene a question means ("the dark screen with a voice"); a count of
    such scenes counts the dark screen where two voices are heard too."""
    store = make_store()
    _video(store)
    graph = EntityGraph(store)
    wanted = describe("stretches of black screen with a voice over them")
    assert [s.start_s for s in matching_scenes(graph, "v2", wanted)] == [0.0, 30.0]
    assert [s.start_s for s in counted_scenes(graph, "v2", wanted)] == [0.0, 15.0, 30.0]
    assert [s.start_s for s in counted_scenes(graph, "v2", wanted, before=20.0)] == [0.0, 15.0]


def test_a_cut_in_a_sliver_with_no_summary_opens_the_scene_the_next_summary_goes_on_with(
        make_store: Callable[[], Any]) -> None:
    """The shot part between the cut at 29.5 and the clip's end held nothing, so ingest wrote no summary of it: the
    summary from 30.0 on, not cut there itself, still begins a new scene."""
    store = make_store()
    _video(store)
    spans = [(group[0].start_s, group[-1].end_s) for group in scenes(EntityGraph(store), "v2")]
    assert spans == [(0.0, 15.0), (15.0, 29.5), (30.0, 60.0)]
