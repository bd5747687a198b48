"""The people side of the SQL memory store, one for both backends: entities, characters and observations.

Entities (read, renamed, merged by hand and unmerged, split, deleted), face-voice links and the characters
they group into, measured attributes, and the observations behind them (faces, mouth motion, voice segments
and their audio, shots). Written once on :class:`~m3agent.store.sql.base.SQLBase`'s helpers; deleting an
entity is :func:`m3agent.store.entity_ops.delete_entity` (what memory text says of it goes too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from m3agent.domain import (
    Character,
    Entity,
    EntityAttribute,
    EntityKind,
    EntityMerge,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    MergedEntity,
    ShotRecord,
    VoiceSegment,
)
from m3agent.errors import NotFoundError
from m3agent.store import entity_ops, merge_log
from m3agent.store.characters import group_characters
from m3agent.store.protocol import FaceSighting, MouthMotion, VoiceSpan
from m3agent.store.sql import dialect
from m3agent.store.sql.base import C, SQLBase, guarded
from m3agent.store.sql.rows import (
    ATTRIBUTE_COLUMNS,
    ENTITY_COLUMNS,
    FACE_COLUMNS,
    ROWS,
    SHOT_COLUMNS,
    VOICE_COLUMNS,
    attribute_from_row,
    entity_from_row,
    face_from_row,
    shot_from_row,
    voice_from_row,
)
from m3agent.store.sql.writer import check_link

if TYPE_CHECKING:
    from m3agent.domain import Vector


class SQLPeople(SQLBase[C]):
    """Entities, characters and the observations behind them (see the module docstring)."""

    # entities and characters -----------------------------------------------
    @guarded
    def entities(self, kind: EntityKind | None = None) -> list[Entity]:
        """Every entity (of ``kind``) by id, with its observation count."""
        self.identity_barrier()
        where, params = ("n.kind = ?", [EntityKind(kind).value]) if kind is not None else ("1 = 1", [])
        with self._read() as db:
            rows = self._run(db, f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE {where} ORDER BY n.id", params)
            return [entity_from_row(r) for r in rows]

    @guarded
    def get_entity(self, entity_id: int) -> Entity:
        """The entity ``entity_id``; :class:`NotFoundError` when there is none."""
        with self._read() as db:
            row = self._run(db, f"SELECT {ENTITY_COLUMNS} FROM entities n WHERE n.id = ?", (entity_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no entity {entity_id}")
        return entity_from_row(row)

    @guarded
    def entity_bank(self, entity_id: int) -> list[Vector]:
        """The stored embedding exemplars of an entity, in order."""
        self.get_entity(entity_id)
        with self._read() as db:
            return entity_ops.read_bank(self.dialect, db, entity_id)

    @guarded
    def entity_crops(self, entity_id: int, limit: int = 3) -> list[bytes]:
        """The best face crops (JPEG) of a face entity: sharpest, surest detections first."""
        with self._read() as db:
            rows = self._run(db, "SELECT b.data FROM faces f JOIN blobs b ON b.id = f.crop_blob WHERE f.entity_id = ?"
                             " ORDER BY f.quality DESC, f.det_score DESC, f.id LIMIT ?", (entity_id, limit))
            return [bytes(r[0]) for r in rows]

    @guarded
    def entity_snippets(self, entity_id: int, limit: int = 3) -> list[bytes]:
        """Voice snippets (WAV) of a voice entity, from its longest segments first."""
        with self._read() as db:
            rows = self._run(db, "SELECT b.data FROM voices v JOIN blobs b ON b.id = v.audio_blob"
                             " WHERE v.entity_id = ? ORDER BY v.end_s - v.start_s DESC, v.id LIMIT ?",
                             (entity_id, limit))
            return [bytes(r[0]) for r in rows]

    @guarded
    def rename_entity(self, entity_id: int, name: str) -> None:
        """Give an entity a name (``""`` clears it); :class:`NotFoundError` when there is none."""
        self._update_one("UPDATE entities SET name = ? WHERE id = ?", (name, entity_id), f"no entity {entity_id}")

    @guarded
    def merge_entities(self, keep: int, absorb: int) -> None:
        """Fold ``absorb`` into ``keep`` by hand, recorded so :meth:`undo_merge` can take it back."""
        with self._tx() as db:
            self._identity_lock(db)
            merge_log.merge_recorded(entity_ops.MERGES[self.dialect], db, keep, absorb, source="manual",
                                     evidence="merged by hand")

    @guarded
    def link_entities(self, link: FaceVoiceLink) -> None:
        """Record a face-voice link made outside ingest (by hand), with the writers' role checks, where
        :func:`~m3agent.store.entity_ops.link_places` puts it; the latest link of a pair wins."""
        with self._tx() as db:
            self._identity_lock(db)
            check_link(link, lambda entity_id: ROWS[self.dialect].require_entity(db, entity_id))
            for video_id, clip_index in entity_ops.link_places(self.dialect, db, link.face_id, link.voice_id):
                dialect.insert_link(db, self.dialect, link, video_id, clip_index)

    @guarded
    def entity_merges(self) -> list[EntityMerge]:
        """Every recorded merge (by hand or automatic), oldest first."""
        with self._read() as db:
            return merge_log.merges(entity_ops.MERGES[self.dialect], db)

    @guarded
    def merged_entity(self, merge_id: int) -> MergedEntity | None:
        """What merge ``merge_id`` recorded of the entity it absorbed (see the protocol)."""
        with self._read() as db:
            return merge_log.merged_entity(entity_ops.MERGES[self.dialect], db, merge_id)

    @guarded
    def merge_of_character(self, character_id: int) -> EntityMerge | None:
        """The merge in force that folded character ``character_id`` into another (see the protocol)."""
        with self._read() as db:
            return merge_log.merge_of_character(entity_ops.MERGES[self.dialect], db, character_id)

    @guarded
    def undo_merge(self, merge_id: int) -> Entity:
        """Bring back the entity merge ``merge_id`` absorbed (see the protocol); returns it."""
        with self._tx() as db:
            self._identity_lock(db)
            absorbed, _ = merge_log.undo(entity_ops.MERGES[self.dialect], db, merge_id)
        return self.get_entity(absorbed)

    @guarded
    def split_entity(self, entity_id: int, observation_ids: Sequence[int]) -> Entity:
        """Move the given face/voice observations to a new entity of the same kind; returns it."""
        with self._tx() as db:
            self._identity_lock(db)
            new_id = entity_ops.split_entity(self.dialect, db, entity_id, observation_ids)
        return self.get_entity(new_id)

    @guarded
    def delete_entity(self, entity_id: int) -> None:
        """Remove the entity and what memory text says about it (see :mod:`m3agent.store.entity_ops`)."""
        with self._tx() as db:
            self._identity_lock(db)
            entity_ops.delete_entity(self.dialect, db, entity_id)
        self._after_delete()

    @guarded
    def entity_attributes(self, entity_ids: Sequence[int]) -> list[EntityAttribute]:
        """The measured descriptions of ``entity_ids`` (see the protocol), by entity, video, clip, name and id."""
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        among, params = self._rows.one_of("entity_id", ids)
        with self._read() as db:
            rows = self._run(db, f"SELECT {ATTRIBUTE_COLUMNS} FROM entity_attributes WHERE {among}"
                             " ORDER BY entity_id, video_id, clip_index, name, id", params)
            return [attribute_from_row(r) for r in rows]

    @guarded
    def shots(self, video_id: str) -> list[ShotRecord]:
        """The stored shots of a video (with still or live), in time order."""
        with self._read() as db:
            rows = self._run(db, f"SELECT {SHOT_COLUMNS} FROM shots WHERE video_id = ? ORDER BY start_s, clip_index",
                             (video_id,))
            return [shot_from_row(r) for r in rows]

    @guarded
    def links(self, min_confidence: float = 0.0) -> list[FaceVoiceLink]:
        """The latest link of every face-voice pair with at least ``min_confidence``, by (face, voice)."""
        with self._read() as db:
            rows = self._run(db, "SELECT face_id, voice_id, confidence, source, evidence FROM links q WHERE seq ="
                             " (SELECT max(seq) FROM links WHERE face_id = q.face_id AND voice_id = q.voice_id)"
                             " AND confidence >= ? ORDER BY face_id, voice_id", (min_confidence,))
            return [FaceVoiceLink(f, v, c, LinkSource(s), e) for f, v, c, s, e in rows]

    @guarded
    def characters(self, before_clip: int | None = None, video_id: str | None = None) -> list[Character]:
        """Entities grouped by links of at least ``link_confidence``; ids stay stable as evidence grows."""
        with self._read() as db:
            visible = self._visible_entities(db, before_clip, video_id)
            where, params = clip_scope(before_clip, video_id)
            evidence = self._run(db, f"SELECT face_id, voice_id, confidence FROM links WHERE {where} ORDER BY seq",
                                 params).fetchall()
            base_ids = dict(self._run(db, "SELECT entity_id, id FROM characters").fetchall())
            names = dict(self._run(db, "SELECT id, name FROM entities WHERE name <> ''").fetchall())
        return group_characters(visible, evidence, base_ids, names, self.link_confidence)

    def _visible_entities(self, db: C, before_clip: int | None, video_id: str | None) -> list[int]:
        """Entities seen (first seen, observed or linked) within the scope."""
        if before_clip is None and video_id is None:
            return [r[0] for r in self._run(db, "SELECT id FROM entities")]
        where, params = clip_scope(before_clip, video_id)
        first = where.replace("clip_index", "first_clip")
        sql = (
            f"SELECT id FROM entities WHERE {first}"
            f" UNION SELECT entity_id FROM faces WHERE entity_id IS NOT NULL AND {where}"
            f" UNION SELECT entity_id FROM voices WHERE entity_id IS NOT NULL AND {where}"
            f" UNION SELECT e.entity_id FROM edges e JOIN memories m ON m.id = e.memory_id"
            f" WHERE {where.replace('video_id', 'm.video_id').replace('clip_index', 'm.clip_index')}"
        )
        return [r[0] for r in self._run(db, sql, params * 4)]

    # observations ----------------------------------------------------------
    @guarded
    def faces(self, video_id: str, clip_index: int | None = None) -> list[FaceObservation]:
        """The face observations of a video (of one clip), in clip order, with their crops."""
        where, params = clip_scope(clip_index, video_id, exact=True, alias="f")
        with self._read() as db:
            rows = self._run(db, f"SELECT {FACE_COLUMNS} FROM faces f LEFT JOIN blobs b ON b.id = f.crop_blob"
                             f" WHERE {where} ORDER BY f.clip_index, f.id", params)
            return [face_from_row(r) for r in rows]

    @guarded
    def face_sightings(self, video_id: str) -> list[FaceSighting]:
        """``(time_s, entity_id)`` of every identified face of a video, in time order (see the protocol)."""
        with self._read() as db:
            rows = self._run(db, "SELECT time_s, entity_id FROM faces WHERE video_id = ? AND entity_id IS NOT NULL"
                             " ORDER BY time_s, id", (video_id,))
            return [FaceSighting(float(t), int(e)) for t, e in rows]

    @guarded
    def mouth_motions(self, video_id: str) -> list[MouthMotion]:
        """``(time_s, entity_id, mouth_motion)`` of the identified faces whose mouth motion was measured."""
        with self._read() as db:
            rows = self._run(db, "SELECT time_s, entity_id, mouth_motion FROM faces WHERE video_id = ?"
                             " AND entity_id IS NOT NULL AND mouth_motion IS NOT NULL ORDER BY time_s, id",
                             (video_id,))
            return [MouthMotion(float(t), int(e), float(m)) for t, e, m in rows]

    @guarded
    def voice_spans(self, video_id: str) -> list[VoiceSpan]:
        """``(start_s, end_s, entity_id)`` of every identified voice segment of a video, in time order."""
        with self._read() as db:
            rows = self._run(db, "SELECT start_s, end_s, entity_id FROM voices WHERE video_id = ?"
                             " AND entity_id IS NOT NULL ORDER BY start_s, id", (video_id,))
            return [VoiceSpan(float(a), float(b), int(e)) for a, b, e in rows]

    @guarded
    def voices(self, video_id: str, clip_index: int | None = None) -> list[VoiceSegment]:
        """The voice segments of a video (of one clip), in clip and time order."""
        where, params = clip_scope(clip_index, video_id, exact=True, alias="v")
        with self._read() as db:
            rows = self._run(db, f"SELECT {VOICE_COLUMNS} FROM voices v WHERE {where}"
                             " ORDER BY v.clip_index, v.start_s, v.id", params)
            return [voice_from_row(r) for r in rows]

    @guarded
    def face_crop(self, face_id: int) -> bytes | None:
        """The crop of face observation ``face_id``, its own or its track's nearest (see the protocol)."""
        with self._read() as db:
            if self._run(db, "SELECT 1 FROM faces WHERE id = ?", (face_id,)).fetchone() is None:
                raise NotFoundError(f"no face observation {face_id}")
            row = self._run(db, f"SELECT b.data FROM faces f JOIN faces g ON {_CROP_OF} JOIN blobs b"
                            " ON b.id = g.crop_blob WHERE f.id = ?"
                            " ORDER BY CASE WHEN g.id = f.id THEN 0 ELSE 1 END, ABS(g.time_s - f.time_s), g.id"
                            " LIMIT 1", (face_id,)).fetchone()
        return None if row is None else bytes(row[0])

    @guarded
    def observations_with_media(self, kind: EntityKind, observation_ids: Sequence[int]) -> set[int]:
        """The observations among ``observation_ids`` with a crop or kept audio (see the protocol)."""
        sql = (f"SELECT f.id FROM faces f WHERE f.id IN ({{}}) AND EXISTS (SELECT 1 FROM faces g WHERE {_CROP_OF})"
               if kind == EntityKind.FACE else "SELECT id FROM voices WHERE id IN ({}) AND audio_blob IS NOT NULL")
        ids = sorted(set(observation_ids))
        found: set[int] = set()
        with self._read() as db:
            for at in range(0, len(ids), 500):
                chunk = ids[at:at + 500]
                found |= {int(r[0]) for r in self._run(db, sql.format(", ".join("?" for _ in chunk)), chunk)}
        return found

    @guarded
    def voice_audio(self, voice_id: int) -> bytes | None:
        """The WAV snippet stored with voice segment ``voice_id``, if any."""
        with self._read() as db:
            row = self._run(db, "SELECT b.data FROM voices v LEFT JOIN blobs b ON b.id = v.audio_blob"
                            " WHERE v.id = ?", (voice_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no voice segment {voice_id}")
        return None if row[0] is None else bytes(row[0])


# the observations ``g`` whose crop can stand for face observation ``f``: itself, or one of its track in the same
# clip of the same video given to the same entity (a track keeps crops of its chosen frames only)
_CROP_OF = ("g.crop_blob IS NOT NULL AND g.video_id = f.video_id AND g.clip_index = f.clip_index"
            " AND (g.id = f.id OR (f.track >= 0 AND g.track = f.track AND g.entity_id = f.entity_id))")


def clip_scope(clip_index: int | None, video_id: str | None, *, exact: bool = False,
               alias: str = "") -> tuple[str, list[Any]]:
    """Condition (``?`` placeholders) on ``video_id`` and ``clip_index`` (``<=`` unless ``exact``) columns."""
    prefix = f"{alias}." if alias else ""
    parts: list[str] = []
    params: list[Any] = []
    if video_id is not None:
        parts.append(f"{prefix}video_id = ?")
        params.append(video_id)
    if clip_index is not None:
        parts.append(f"{prefix}clip_index {'=' if exact else '<='} ?")
        params.append(clip_index)
    return " AND ".join(parts) or "1 = 1", params
