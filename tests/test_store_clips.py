"""Transactional clip writes: all of a clip or nothing, even when the process is killed (both backends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from m3agent.domain import (
    BBox,
    ClipStatus,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    MemoryKind,
    Video,
    VoiceSegment,
    Word,
)
from m3agent.errors import IntegrityError, StoreError
from m3agent.store import open_store
from m3agent.store.protocol import MemoryStore, VoiceSpan
from store_helpers import clip_of, fill, memory, new_store, unit_vectors

REPO = Path(__file__).resolve().parents[1]


def test_clip_commits_everything_and_marks_done(make_store: Callable[[], Any]) -> None:
    store = make_store()
    store.add_video(Video("v1", "/x.mp4", 90.0, "title"))
    clip = clip_of("v1", 0)
    vectors = unit_vectors(4)
    with store.clip(clip) as w:
        face = w.add_entity(EntityKind.FACE, [vectors[0]], name="Ann")
        voice = w.add_entity(EntityKind.VOICE, [vectors[1], vectors[2]])
        w.add_face(FaceObservation(0, 3.5, BBox(1, 2, 30, 40), 0.98, 0.7, 1, vectors[0], b"jpeg", face.id,
                                   mouth_motion=0.25))
        seg = VoiceSegment(0, 1.0, 2.5, "hi there", 0, vectors[1], (Word("hi", 1.0, 1.2),), voice.id, "en")
        w.add_voice(seg, b"RIFFwav")
        mid = w.add_memory(memory(clip, f"{face.tag} greets {voice.tag}", vectors[3], entity_ids=(face.id, voice.id)))
        w.set_link(FaceVoiceLink(face.id, voice.id, 0.8, LinkSource.AV, "on screen"))
        w.record_timing("perception", 2.5)
    assert store.clips("v1") == [(clip, ClipStatus.DONE, "")]
    assert store.recorded_clip("v1", 0) == clip and store.recorded_clip("v1", 1) is None
    assert store.recorded_clip("nope", 0) is None
    got = store.get_memory(mid)
    assert got.entity_ids == (face.id, voice.id) and got.last_clip_index == 0
    assert [(f.crop_jpeg, f.mouth_motion) for f in store.faces("v1", 0)] == [(b"jpeg", 0.25)]
    assert store.mouth_motions("v1") == [(3.5, face.id, 0.25)]
    # the narrow views read by name (both backends build the same records)
    assert store.clips("v1")[0].status is ClipStatus.DONE and store.clips("v1")[0].clip == clip
    assert store.mouth_motions("v1")[0].motion == 0.25 and store.face_sightings("v1")[0].entity_id == face.id
    assert store.voice_spans("v1")[0] == VoiceSpan(1.0, 2.5, voice.id) and store.voice_spans("v1")[0].end_s == 2.5
    assert store.embedding_model() is not None and store.embedding_model().dim == vectors.shape[1]  # type: ignore[union-attr]
    voices = store.voices("v1")
    assert voices[0].words == (Word("hi", 1.0, 1.2),) and voices[0].language == "en"
    assert store.voice_audio(voices[0].id) == b"RIFFwav"
    assert len(store.entity_bank(voice.id)) == 2
    assert store.get_entity(face.id).n_observations == 1
    assert store.clip_timings("v1") == {0: {"perception": 2.5}}
    assert store.links() == [FaceVoiceLink(face.id, voice.id, 0.8, LinkSource.AV, "on screen")]


def test_an_exception_rolls_the_whole_clip_back(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, unit_vectors(5))
    before = store.counts()
    clip = clip_of("v1", 1)
    with pytest.raises(RuntimeError, match="model crashed"), store.clip(clip) as w:
        entity = w.add_entity(EntityKind.FACE, [unit_vectors(1)[0]])
        w.add_face(FaceObservation(1, 31.0, BBox(0, 0, 5, 5), 0.9, crop_jpeg=b"x" * 1000, entity_id=entity.id))
        w.add_memory(memory(clip, "half a clip", unit_vectors(1)[0]))
        raise RuntimeError("model crashed")
    assert store.counts() == before
    assert [c.index for c, _, _ in store.clips("v1")] == [0]
    assert store.recorded_clip("v1", 1) is None  # rolled back: no row
    store.mark_clip(clip, ClipStatus.FAILED, "model crashed")
    assert store.clips("v1")[1] == (clip, ClipStatus.FAILED, "model crashed")
    assert store.recorded_clip("v1", 1) == clip  # recorded, as failed
    with store.clip(clip) as w:  # a failed clip can be written again
        w.add_memory(memory(clip, "second try", unit_vectors(1)[0]))
    assert store.clips("v1")[1][1] is ClipStatus.DONE


def test_uncommitted_writes_are_invisible_to_other_connections(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, unit_vectors(3))
    other = open_store(store.url, readonly=True)
    clip = clip_of("v1", 1)
    with store.clip(clip) as w:
        w.add_memory(memory(clip, "pending", unit_vectors(1)[0]))
        assert len(other.memories()) == 3
        assert [c.index for c, _, _ in other.clips("v1")] == [0]
    assert len(other.memories()) == 4
    other.close()


def test_writer_checks_rows_belong_to_its_clip_and_closes(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, unit_vectors(3))
    clip = clip_of("v1", 1)
    with pytest.raises(IntegrityError), store.clip(clip) as w:
        w.add_memory(memory(clip_of("v1", 2), "wrong clip", unit_vectors(1)[0]))
    with pytest.raises(IntegrityError), store.clip(clip) as w:
        w.add_memory(memory(clip, "names a ghost", unit_vectors(1)[0], entity_ids=(777,)))
    with pytest.raises(IntegrityError), store.clip(clip) as w:
        e = w.add_entity(EntityKind.FACE, [])
        w.set_link(FaceVoiceLink(e.id, e.id))
    with store.clip(clip) as w:
        w.add_memory(memory(clip, "fine", unit_vectors(1)[0], kind=MemoryKind.SEMANTIC))
    with pytest.raises(StoreError):
        w.add_memory(memory(clip, "after the block", unit_vectors(1)[0]))
    with pytest.raises(IntegrityError), store.clip(clip):
        pass  # already done


def test_reinforce_and_weights(make_store: Callable[[], Any]) -> None:
    store = make_store()
    (mid,) = fill(store, unit_vectors(1))
    clip = clip_of("v1", 4)
    with store.clip(clip) as w:
        w.reinforce(mid, 2.0)
    got = store.get_memory(mid)
    assert got.weight == 3.0 and got.last_clip_index == 4 and got.clip_index == 0
    store.adjust_weight(mid, -0.5)
    assert store.get_memory(mid).weight == 2.5


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from store_helpers import clip_of, memory, unit_vectors
    from m3agent.domain import BBox, EntityKind, FaceObservation, Video
    from m3agent.store import open_store

    store = open_store({path!r})
    store.set_embedding_model("test-random", 16)
    store.add_video(Video("v1", "/x.mp4"))
    vectors = unit_vectors(100, seed=3)
    for index in range(4):
        clip = clip_of("v1", index)
        with store.clip(clip) as w:
            entity = w.add_entity(EntityKind.FACE, [vectors[index]])
            w.add_face(FaceObservation(index, clip.start_s, BBox(0, 0, 5, 5), 0.9, crop_jpeg=b"c" * 5000,
                                       entity_id=entity.id))
            for j in range(10):
                w.add_memory(memory(clip, f"clip {{index}} memory {{j}}", vectors[index * 10 + j]))
            if index == 3:
                print("MID-CLIP", flush=True)
                time.sleep(60)
    """
)


def test_sigkill_mid_clip_loses_only_that_clip(tmp_path: Path, store_url: Callable[[], str]) -> None:
    path = store_url()
    script = KILLED_WRITER.format(tests=str(REPO / "tests"), path=path)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "MID-CLIP"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    store = open_store(path)
    assert store.check() == []  # type: ignore[attr-defined]
    assert [(c.index, s) for c, s, _ in store.clips("v1")] == [(i, ClipStatus.DONE) for i in range(3)]
    assert sorted({m.clip_index for m in store.memories()}) == [0, 1, 2]
    assert len(store.memories()) == 30 and len(store.entities()) == 3 and len(store.faces("v1")) == 3
    clip = clip_of("v1", 3)
    with store.clip(clip) as w:
        w.add_memory(memory(clip, "clip 3 again", unit_vectors(1)[0]))
    assert len(store.memories(clip_index=3)) == 1
    store.close()


def test_a_done_clip_is_never_downgraded(tmp_path: Path) -> None:
    """A late failure report (e.g. from a second writer) must not hide a stored clip from the next run."""
    store = new_store(tmp_path)
    store.add_video(Video("v1", "/x.mp4"))
    clip = clip_of("v1", 0)
    with store.clip(clip) as w:
        w.add_memory(memory(clip, "stored", unit_vectors(1)[0]))
    store.mark_clip(clip, ClipStatus.FAILED, "clip 0 of 'v1' is already stored")
    assert store.clips("v1") == [(clip, ClipStatus.DONE, "")]
    store.mark_clip(clip_of("v1", 1), ClipStatus.FAILED, "endpoint error")
    assert store.clips("v1")[1][1:] == (ClipStatus.FAILED, "endpoint error")


LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from m3agent.store import open_store
    store = open_store({path!r})
    with store.video_lock("v1"):
        print("LOCKED", flush=True)
        time.sleep(120)
    """
)


def test_video_lock_is_exclusive_across_processes_and_freed_when_the_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = new_store(tmp_path)
    store.add_video(Video("v1", "/x.mp4"))
    store.add_video(Video("v2", "/y.mp4"))
    script = LOCK_HOLDER.format(tests=str(REPO / "tests"), path=str(path))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "LOCKED"
        busy = rf"'v1' is being ingested by another process \(pid {proc.pid} "
        with pytest.raises(StoreError, match=busy), store.video_lock("v1", wait=False):
            pass
        with pytest.raises(StoreError, match="being ingested"):
            store.delete_video("v1")
        with store.video_lock("v2", wait=False):  # another video is not held
            pass
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    waits: list[str] = []
    with store.video_lock("v1", wait=True, on_wait=waits.append):  # the kernel freed the dead holder's lock
        pass
    assert waits == []
    store.delete_video("v1")
    assert [v.video_id for v in store.videos()] == ["v2"]


def test_video_lock_waits_for_its_holder_and_says_so(tmp_path: Path) -> None:
    import threading

    first, second = new_store(tmp_path), open_store(str(tmp_path / "memory.db"))
    messages: list[str] = []
    order: list[str] = []
    with first.video_lock("v1"):
        waiter = threading.Thread(target=lambda: _hold(second, messages, order))
        waiter.start()
        for _ in range(200):
            if messages:
                break
            threading.Event().wait(0.01)
        order.append("first released")
    waiter.join(timeout=10)
    assert messages and "another ingest of 'v1' is running" in messages[0]
    assert order == ["first released", "second held"]


def _hold(store: MemoryStore, messages: list[str], order: list[str]) -> None:
    with store.video_lock("v1", on_wait=messages.append):
        order.append("second held")
