"""Query operators over the entity graph of a memory: who is where when, in what order, with whom, how many.

:class:`EntityGraph` reads a :class:`~m3agent.store.protocol.MemoryStore` through its protocol only, so both
stores serve it unchanged; what it reads per video (face sightings, voice spans, shots) is loaded once per
graph. A graph is a snapshot for one question or one request: build a new one after an ingest.

Contracts: times are seconds of their video; results are in time order; a person is a character (linked face
and voice entities), so a face seen at 0:10 and its linked voice heard at 3:00 are one person's appearances.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from m3agent import tags
from m3agent.domain import EntityKind, MemoryKind, SearchFilter
from m3agent.errors import NotFoundError
from m3agent.graph.descriptions import combine_attributes, shot_kind
from m3agent.graph.values import (
    Appearance,
    Company,
    Moment,
    PeopleCount,
    Person,
    Presence,
    Profile,
    Role,
    ShotView,
    Sighting,
    Utterance,
)
from m3agent.media.frames import scaled_size
from m3agent.memorize.scene_memories import PROVENANCE as SCENE_PROVENANCE
from m3agent.memorize.scene_memories import read_shot_summary, shows_split_screen
from m3agent.perception.attributes.place import box_horizontal, depth_place, main_face_height, yardstick

if TYPE_CHECKING:
    from m3agent.domain import BBox, FaceObservation, Memory, ShotRecord, Video, VoiceSegment
    from m3agent.graph.lips import PairSync
    from m3agent.store.protocol import MemoryStore, MouthMotion

MERGE_GAP_S = 2.0
"""Sightings or speech of one person less than this apart are one appearance (faces are sampled at 2 fps and
the detector misses some frames; speech has short pauses)."""
AT_SLACK_S = 0.5  # a face sampled this close to an instant counts as on screen at it
SAME_TIME_S = 0.01  # faces sampled this close together were in one frame
SAME_SHOT_S = 0.05  # a summary and a stored shot starting this close together are of one shot


@dataclass(frozen=True, slots=True)
class _VideoData:
    video: Video
    sightings: tuple[tuple[float, int], ...]
    speech: tuple[tuple[float, float, int], ...]
    times: tuple[float, ...]  # the sightings' times, in order, to find the faces of an interval by bisection
    cuts: tuple[float, ...] = ()  # the starts of the shots that open after a cut, in order
    shot_spans: tuple[tuple[int, float, float], ...] = ()  # the stored shots as (clip index, start, end)

    def bounds(self, start_s: float, end_s: float) -> tuple[float, float, bool]:
        """The sample times that count for ``[start_s, end_s]``: ``(low, high, high is inclusive)``. The interval
        is widened by :data:`AT_SLACK_S` on each side, but not across a shot cut: a face sampled on the far side
        of a cut was in another picture (a shot's count holds neither the shot before nor the one after), and a
        face sampled at a cut belongs to the shot the cut opens."""
        low = start_s - AT_SLACK_S
        before = bisect_right(self.cuts, start_s)
        if before and self.cuts[before - 1] > low:
            low = self.cuts[before - 1]
        after = max(bisect_left(self.cuts, end_s), before)
        if after < len(self.cuts) and self.cuts[after] <= end_s + AT_SLACK_S:
            return low, self.cuts[after], False
        return low, end_s + AT_SLACK_S, True

    def seen_between(self, start_s: float, end_s: float) -> set[int]:
        """The face entities sampled in ``[start_s, end_s]``, widened as :meth:`bounds` says."""
        low, high, closed = self.bounds(start_s, end_s)
        first = bisect_left(self.times, low)
        last = bisect_right(self.times, high) if closed else bisect_left(self.times, high)
        return {e for _, e in self.sightings[first:last]}

    def holds(self, time_s: float, start_s: float, end_s: float) -> bool:
        """Whether a face sampled at ``time_s`` counts for ``[start_s, end_s]`` (as :meth:`seen_between`)."""
        low, high, closed = self.bounds(start_s, end_s)
        return low <= time_s and (time_s <= high if closed else time_s < high)


@dataclass(frozen=True, slots=True)
class _ShotRow:
    start_s: float
    end_s: float
    opens: bool
    body: str
    entities: tuple[int, ...]
    memory_ids: tuple[int, ...]

    def joined(self, memory: Memory, body: str) -> _ShotRow:
        """This shot continued by the summary of its next clip's part."""
        return _ShotRow(self.start_s, memory.end_s, self.opens, f"{self.body}; {body}",
                        tuple(dict.fromkeys(self.entities + memory.entity_ids)), (*self.memory_ids, memory.id))


class EntityGraph:
    """The operators over ``store``. ``max_frame_side`` places people only in videos stored before the sampled
    frame size was stored with each video (``frame_width``, written at ingest): the setting they were sampled with."""

    def __init__(self, store: MemoryStore, *, max_frame_side: int = 1280) -> None:
        self.store = store
        self.max_frame_side = max_frame_side
        self._videos: dict[str, _VideoData] = {}
        self._people: list[Person] | None = None
        self._shots: dict[str, list[ShotView]] = {}
        self._profiles: dict[int, Profile] = {}
        self._main_faces: dict[tuple[str, int, float], float | None] = {}
        self._lips: dict[str, PairSync] = {}
        self._motions: dict[str, tuple[list[MouthMotion], float | None]] = {}

    def lip_sync(self, video_id: str) -> PairSync:
        """Lip sync of every (face entity, voice entity) pair of a video (:mod:`m3agent.graph.lips`), read once."""
        if video_id not in self._lips:
            from m3agent.graph.lips import video_lip_sync

            self._lips[video_id] = video_lip_sync(self.store, video_id)
        return self._lips[video_id]

    def mouth_motions(self, video_id: str) -> tuple[list[MouthMotion], float | None]:
        """The video's measured mouth motions (the active-speaker cue, in time order) and the interval its faces were
        sampled at (None when no face was sampled twice), read once."""
        if video_id not in self._motions:
            from m3agent.graph.lips import sampling_interval

            self._motions[video_id] = (self.store.mouth_motions(video_id),
                                       sampling_interval(self._data(video_id).sightings))
        return self._motions[video_id]

    # people --------------------------------------------------------------
    def people(self) -> list[Person]:
        """Every person of the memory (one per character), by character id."""
        if self._people is None:
            kinds = {e.id: e.kind for e in self.store.entities()}
            self._people = [Person(c.id, c.tag, c.name,
                                   tuple(e for e in c.entity_ids if kinds.get(e) is EntityKind.FACE),
                                   tuple(e for e in c.entity_ids if kinds.get(e) is EntityKind.VOICE))
                            for c in self.store.characters()]
        return self._people

    def person(self, ref: int | str) -> Person:
        """The person of a character id, a tag (``<character_3>``, ``<face_2>``, ``<voice_5>``) or a given name."""
        tag = tags.parse(ref) if isinstance(ref, str) else None
        for p in self.people():
            if tag is not None and (
                    (tag.kind == "character" and p.character_id == tag.id) or
                    (tag.kind != "character" and tag.id in p.entity_ids)):
                return p
            if isinstance(ref, int) and p.character_id == ref:
                return p
            if isinstance(ref, str) and tag is None and p.name and p.name.lower() == ref.strip().lower():
                return p
        raise NotFoundError(f"no person {ref!r} in this memory",
                            hint="name a character id, a <character_N>/<face_N>/<voice_N> tag or a given name")

    def person_of_entity(self, entity_id: int) -> Person:
        """The person an entity belongs to."""
        for p in self.people():
            if entity_id in p.entity_ids:
                return p
        raise NotFoundError(f"no entity {entity_id} in this memory")

    # appearances -----------------------------------------------------------
    def appearances(self, person: Person, video_id: str | None = None) -> list[Appearance]:
        """Every interval in which ``person`` is seen or heard, over all videos (or one), in time order."""
        out: list[Appearance] = []
        for vid in self._video_ids(video_id):
            found = self.presence(person, vid)
            out += _with_roles(vid, list(found.seen), list(found.speaking))
        return out

    def presence(self, person: Person, video_id: str) -> Presence:
        """When ``person`` is seen and when they speak in one video: sightings and speech each joined into spans
        (:data:`MERGE_GAP_S`), in time order; a lone sighting is a span of no length."""
        data = self._data(video_id)
        seen = merge_spans((t, t) for t, e in data.sightings if e in person.face_ids)
        speaking = merge_spans((a, b) for a, b, e in data.speech if e in person.voice_ids)
        return Presence(person, video_id, tuple(seen), tuple(speaking))

    def profile(self, person: Person) -> Profile:
        """``person`` with all appearances (first and last among them) and the attributes measured for their face
        and voice entities, combined over every clip (:func:`~m3agent.graph.descriptions.combine_attributes`)."""
        if person.character_id not in self._profiles:
            rows = self.store.entity_attributes(person.entity_ids)
            self._profiles[person.character_id] = Profile(person, tuple(self.appearances(person)),
                                                          combine_attributes(rows))
        return self._profiles[person.character_id]

    def together(self, person: Person, video_id: str | None = None) -> list[Company]:
        """The other people present (seen or heard) while ``person`` is, with the shared intervals."""
        mine = self.appearances(person, video_id)
        out = []
        for other in self.people():
            if other.character_id == person.character_id:
                continue
            shared = [(a.video_id, max(a.start_s, b.start_s), min(a.end_s, b.end_s))
                      for a in mine for b in self.appearances(other, a.video_id)
                      if a.video_id == b.video_id and max(a.start_s, b.start_s) <= min(a.end_s, b.end_s)]
            if shared:
                out.append(Company(other, tuple(shared)))
        return out

    def count_people(self, video_id: str, start_s: float, end_s: float) -> PeopleCount:
        """The people of ``[start_s, end_s]`` of a video, and the one rule for how many there are, kept here so
        the API, the inspector and answers count alike.

        A person counts when their face is seen there, or when they are heard there and their voice is linked
        to a face (a known person, even speaking off screen). A voice linked to no face counts only when some of
        its speech there falls where no face is on screen (a narrator over a dark screen): heard only over
        faces, it may be one of them (a diarizer splits a shouting voice in overlapped speech, the face-voice
        linker misses lips it could not read), so counting it would count a person twice."""
        data = self._data(video_id)
        seen = self._persons_of(data.seen_between(start_s, end_s))
        heard = self._persons_of({e for a, b, e in data.speech if a <= end_s and b >= start_s})
        shown, spoke = {p.character_id for p in seen}, {p.character_id for p in heard}
        counted = tuple(p for p in self.people() if p.character_id in shown or (
            p.character_id in spoke and (bool(p.face_ids) or self._heard_off_faces(data, p, start_s, end_s))))
        return PeopleCount(video_id, start_s, end_s, seen, heard, counted)

    def _heard_off_faces(self, data: _VideoData, person: Person, start_s: float, end_s: float) -> bool:
        """Whether some of ``person``'s speech inside ``[start_s, end_s]`` has no face on screen."""
        return any(not data.seen_between(max(a, start_s), min(b, end_s))
                   for a, b, e in data.speech if e in person.voice_ids and a <= end_s and b >= start_s)

    # moments and shots -----------------------------------------------------
    def at(self, video_id: str, start_s: float, end_s: float | None = None) -> Moment:
        """Who is on screen (with frame position) and who speaks at an instant or in an interval, the scene's
        text, objects and sounds, and the shot."""
        end = start_s if end_s is None else max(start_s, end_s)
        data = self._data(video_id)
        heard = self.heard(video_id, start_s, end)
        scene = tuple(m.text for m in self.scene_notes(video_id, start_s, end))
        return Moment(video_id, start_s, end, self._sightings(data.video, start_s, end), tuple(heard), scene,
                      self.shot_at(video_id, (start_s + end) / 2))

    def scene_notes(self, video_id: str, start_s: float = 0.0, end_s: float = float("inf")) -> list[Memory]:
        """The scene memories of ``[start_s, end_s]`` other than shot summaries (on-screen text, and objects and
        sounds told on their own when no shot holds them), in time order."""
        return [m for m in self._scene_memories(video_id, start_s, end_s)
                if read_shot_summary(m) is None and not m.text.startswith("Scene change")]

    def heard(self, video_id: str, start_s: float, end_s: float) -> list[Utterance]:
        """What is said in ``[start_s, end_s]`` of a video and by whom, in time order."""
        return [Utterance(self.person_of_entity(v.entity_id), v.entity_id, v.start_s, v.end_s, v.text)
                for v in self._voices_between(video_id, start_s, end_s) if v.entity_id is not None]

    def shots(self, video_id: str) -> list[ShotView]:
        """The shots of a video in order (from the shot summaries ingest wrote, else from the stored shots; a shot
        cut by a clip boundary is joined again), each with still or live where it was measured (from the stored
        shots, :func:`~m3agent.graph.descriptions.shot_kind`)."""
        if video_id not in self._shots:
            records = self.store.shots(video_id)
            rows = self._summary_rows(video_id, records) or self._recorded_rows(video_id, records)
            views = []
            for i, r in enumerate(rows):
                kind, confidence = shot_kind(records, r.start_s, r.end_s)
                views.append(ShotView(video_id, i, r.start_s, r.end_s, r.opens, r.body,
                                      self._persons_of(set(r.entities)), r.memory_ids, kind, confidence,
                                      shows_split_screen(r.body)))
            self._shots[video_id] = views
        return self._shots[video_id]

    def _summary_rows(self, video_id: str, records: Sequence[ShotRecord]) -> list[_ShotRow]:
        """The shots ingest summarised (a shot part that held nobody and nothing has no summary), a shot cut by a
        clip boundary joined again. Whether a shot opens a scene is its stored shot's ``cut`` (``records``, the
        one starting where the summary starts); only a memory stored without shots (measured attributes off, or
        stored before shots were) leaves it to the summary's opening words. What a shot holds, its people and
        the memory itself are only in the summary."""
        stored: dict[int, list[ShotRecord]] = {}
        for r in records:
            stored.setdefault(r.clip_index, []).append(r)
        rows: list[_ShotRow] = []
        for m in self._scene_memories(video_id, 0.0, float("inf")):
            read = read_shot_summary(m)
            if read is None:
                continue
            written, body = read
            opens = next((r.cut for r in stored.get(m.clip_index, ()) if abs(r.start_s - m.start_s) < SAME_SHOT_S),
                         written) or (bool(rows) and _cut_between(records, rows[-1].end_s, m.start_s))
            if rows and not opens and abs(rows[-1].end_s - m.start_s) < 0.05:
                rows[-1] = rows[-1].joined(m, body)
            else:
                rows.append(_ShotRow(m.start_s, m.end_s, opens or not rows, body, m.entity_ids, (m.id,)))
        return rows

    def _recorded_rows(self, video_id: str, records: Sequence[ShotRecord]) -> list[_ShotRow]:
        """Shots from the stored shot boundaries (a memory written without shot summaries), with no summary and
        the people seen or heard in them."""
        spans: list[tuple[float, float, bool]] = []
        for r in records:
            if spans and not r.cut and abs(spans[-1][1] - r.start_s) < 0.05:
                spans[-1] = (spans[-1][0], r.end_s, spans[-1][2])
            else:
                spans.append((r.start_s, r.end_s, r.cut or not spans))
        if not spans:
            return []
        data, rows = self._data(video_id), []
        for start, end, opens in spans:
            present = {e for t, e in data.sightings if start <= t <= end}
            present |= {e for a, b, e in data.speech if a < end and b > start}
            rows.append(_ShotRow(start, end, opens, "", tuple(sorted(present)), ()))
        return rows

    def shot_at(self, video_id: str, time_s: float) -> ShotView | None:
        """The shot holding ``time_s`` (the nearest one when it falls between shots)."""
        shots = self.shots(video_id)
        if not shots:
            return None
        inside = [s for s in shots if s.start_s <= time_s <= s.end_s]
        return inside[0] if inside else min(shots, key=lambda s: min(abs(s.start_s - time_s), abs(s.end_s - time_s)))

    def next_shot(self, shot: ShotView) -> ShotView | None:
        """The shot after ``shot`` in its video, or None at the end."""
        shots = self.shots(shot.video_id)
        return shots[shot.index + 1] if shot.index + 1 < len(shots) else None

    def previous_shot(self, shot: ShotView) -> ShotView | None:
        """The shot before ``shot`` in its video, or None at the start."""
        return self.shots(shot.video_id)[shot.index - 1] if shot.index > 0 else None

    # internals -------------------------------------------------------------
    def _video_ids(self, video_id: str | None) -> list[str]:
        return [video_id] if video_id is not None else [v.video_id for v in self.store.videos()]

    def _data(self, video_id: str) -> _VideoData:
        if video_id not in self._videos:
            video = self.store.get_video(video_id)
            sightings = tuple(sorted(self.store.face_sightings(video_id)))
            records = self.store.shots(video_id)
            cuts = tuple(sorted({r.start_s for r in records if r.cut and r.start_s > 0}))
            self._videos[video_id] = _VideoData(video, sightings, tuple(self.store.voice_spans(video_id)),
                                                tuple(t for t, _ in sightings), cuts,
                                                tuple((r.clip_index, r.start_s, r.end_s) for r in records))
        return self._videos[video_id]

    def _persons_of(self, entity_ids: set[int]) -> tuple[Person, ...]:
        return tuple(p for p in self.people() if entity_ids & set(p.entity_ids))

    def _clip_indexes(self, video_id: str, start_s: float, end_s: float) -> list[int]:
        return [c.index for c, _, _ in self.store.clips(video_id) if c.start_s <= end_s and c.end_s >= start_s]

    def _voices_between(self, video_id: str, start_s: float, end_s: float) -> list[VoiceSegment]:
        return [v for i in self._clip_indexes(video_id, start_s, end_s) for v in self.store.voices(video_id, i)
                if v.start_s <= end_s and v.end_s >= start_s]

    def _sightings(self, video: Video, start_s: float, end_s: float) -> tuple[Sighting, ...]:
        """Who is on screen in ``[start_s, end_s]``, placed as perception places them
        (:mod:`m3agent.perception.attributes.place`): across by the frame width, in depth against the faces of the
        same frame and the main face of the shot, and against the frame height."""
        data = self._data(video.video_id)
        by_clip = {i: self.store.faces(video.video_id, i) for i in self._clip_indexes(video.video_id, start_s, end_s)}
        every = [f for found in by_clip.values() for f in found]
        faces = [f for f in every if f.entity_id is not None and data.holds(f.time_s, start_s, end_s)]
        width, height = self._frame_size(video, faces)
        best: dict[int, FaceObservation] = {}
        for f in faces:  # one sighting per person: the observation nearest the interval's middle
            person = self.person_of_entity(f.entity_id or 0)
            old = best.get(person.character_id)
            middle = (start_s + end_s) / 2
            if old is None or abs(f.time_s - middle) < abs(old.time_s - middle):
                best[person.character_id] = f
        return tuple(Sighting(self.person_of_entity(f.entity_id or 0), f.entity_id or 0, f.time_s,
                              box_horizontal(f.bbox, width),
                              depth(f, by_clip.get(f.clip_index, every), height,
                                    self._main_face(data, f, by_clip.get(f.clip_index, every))))
                     for f in sorted(best.values(), key=lambda f: (f.bbox.x1 + f.bbox.x2) / 2))

    def _main_face(self, data: _VideoData, face: FaceObservation,
                   clip_faces: Sequence[FaceObservation]) -> float | None:
        """The height of the main face of the stored shot that holds ``face`` (of the whole clip when its clip has
        no stored shots), from ``clip_faces``, the faces of its clip: the yardstick perception measured depth by."""
        spans = [(a, b) for i, a, b in data.shot_spans if i == face.clip_index]
        inside = [(a, b) for a, b in spans if a <= face.time_s < b] or [(a, b) for a, b in spans if face.time_s == b]
        start, end = inside[0] if inside else (float("-inf"), float("inf"))
        key = (data.video.video_id, face.clip_index, start)
        if key not in self._main_faces:
            frames: dict[float, list[BBox]] = {}
            for f in clip_faces:
                if start <= f.time_s < end or f.time_s == end:
                    frames.setdefault(round(f.time_s, 3), []).append(f.bbox)
            self._main_faces[key] = main_face_height(list(frames.values()))
        return self._main_faces[key]

    def _frame_size(self, video: Video, faces: Sequence[FaceObservation]) -> tuple[float, float | None]:
        """The width and height of the frames ``video``'s face boxes were measured in: as stored at ingest
        (``frame_width``, ``frame_height``), else (a video stored before that) the picture's size scaled by
        ``max_frame_side``, else the right edge of the rightmost box and no height."""
        stored = video.metadata.get("frame_width"), video.metadata.get("frame_height")
        if isinstance(stored[0], int | float) and stored[0] > 0:
            tall = stored[1] if isinstance(stored[1], int | float) and stored[1] > 0 else None
            return float(stored[0]), None if tall is None else float(tall)
        width, height = video.metadata.get("width"), video.metadata.get("height")
        if isinstance(width, int | float) and isinstance(height, int | float) and width > 0 and height > 0:
            wide, tall = scaled_size(width, height, self.max_frame_side)
            return float(wide), float(tall)
        return max((f.bbox.x2 for f in faces), default=1.0), None

    def _scene_memories(self, video_id: str, start_s: float, end_s: float) -> list[Memory]:
        flt = SearchFilter(video_ids=(video_id,), kinds=(MemoryKind.EPISODIC,))
        return sorted((m for m in self.store.memories(video_id, flt=flt)
                       if m.provenance == SCENE_PROVENANCE and m.start_s <= end_s and m.end_s >= start_s),
                      key=lambda m: (m.start_s, m.end_s))


def _cut_between(records: Sequence[ShotRecord], end_s: float, start_s: float) -> bool:
    """Whether a stored cut falls in the gap between one summarised shot's end and the next one's start: a shot
    part with nobody and nothing in it has no summary ("a cut half a second before a clip's end to a dark screen"),
    and its cut opens the scene the next summary continues."""
    return start_s - end_s > SAME_SHOT_S and any(
        r.cut and end_s - SAME_SHOT_S < r.start_s < start_s for r in records)


def merge_spans(spans: Iterable[tuple[float, float]], gap: float = MERGE_GAP_S) -> list[tuple[float, float]]:
    """``spans`` joined where they overlap or lie less than ``gap`` apart, in time order."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= gap:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _with_roles(video_id: str, faces: list[tuple[float, float]],
                voices: list[tuple[float, float]]) -> list[Appearance]:
    out = []
    for start, end in merge_spans(faces + voices):
        seen = any(a <= end and b >= start for a, b in faces)
        heard = any(a <= end and b >= start for a, b in voices)
        role = Role.BOTH if seen and heard else Role.FACE if seen else Role.VOICE
        out.append(Appearance(video_id, start, end, role))
    return out


def depth(face: FaceObservation, faces: Sequence[FaceObservation], frame_height: float | None = None,
          shot_face_height: float | None = None) -> str:
    """``background`` or ``foreground`` by the rule of :mod:`m3agent.perception.attributes.place`: the face's height
    against the largest of ``faces`` sampled at the same time or ``shot_face_height`` (the shot's main face), and
    against ``frame_height`` when known."""
    tall = face.bbox.height
    largest = yardstick([tall, *(f.bbox.height for f in faces if abs(f.time_s - face.time_s) < SAME_TIME_S)],
                        shot_face_height)
    relative = min(1.0, tall / largest) if largest > 0 else 1.0
    return depth_place(relative, tall / frame_height if frame_height else None)
