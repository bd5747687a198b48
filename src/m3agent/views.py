"""Read-only views of a memory as plain dicts, shared by ``m3agent show`` and the server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.errors import ConfigError

if TYPE_CHECKING:
    from rich.table import Table

    from m3agent.domain import Memory
    from m3agent.store.protocol import MemoryStore


def pick_video(store: MemoryStore, video_id: str | None) -> str:
    """The given video id, or the only video of the store."""
    if video_id is not None:
        store.get_video(video_id)
        return video_id
    videos = store.videos()
    if len(videos) == 1:
        return videos[0].video_id
    names = ", ".join(v.video_id for v in videos) or "none"
    raise ConfigError(f"the memory holds {len(videos)} videos; choose one with --video", hint=f"videos: {names}")


def list_videos(store: MemoryStore) -> list[dict[str, Any]]:
    rows = []
    for video in store.videos():
        clips = store.clips(video.video_id)
        done = sum(1 for _, status, _ in clips if status.value == "done")
        rows.append({
            "video_id": video.video_id, "source": video.source, "duration_s": video.duration_s,
            "clips_done": done, "clips_recorded": len(clips),
            "memories": len(store.memories(video.video_id)),
        })
    return rows


def list_entities(store: MemoryStore) -> list[dict[str, Any]]:
    return [
        {"id": e.id, "tag": e.tag, "kind": e.kind.value, "name": e.name, "video_id": e.video_id,
         "first_clip": e.first_clip, "last_clip": e.last_clip, "observations": e.n_observations}
        for e in store.entities()
    ]


def list_characters(store: MemoryStore, video_id: str | None = None) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "tag": c.tag, "name": c.name, "entities": list(c.entity_ids)}
        for c in store.characters(video_id=video_id)
    ]


def character_names(store: MemoryStore, video_id: str | None = None) -> tuple[dict[int, int], dict[int, str]]:
    """``entity id -> character id`` and ``character id -> name`` (names may be empty)."""
    character_of: dict[int, int] = {}
    names: dict[int, str] = {}
    for character in store.characters(video_id=video_id):
        names[character.id] = character.name
        for entity_id in character.entity_ids:
            character_of[entity_id] = character.id
    return character_of, names


def readable(text: str, character_of: dict[int, int], names: dict[int, str]) -> str:
    """Rewrite entity tags to ``<character_k>``, then to ``Name (<character_k>)`` where known."""
    as_characters = tags.to_characters(text, character_of)

    def name_of(tag: tags.Tag) -> str | None:
        if tag.kind == tags.TagKind.CHARACTER and names.get(tag.id):
            return f"{names[tag.id]} ({tag})"
        return None

    return tags.rewrite(as_characters, name_of)


def memory_row(memory: Memory, character_of: dict[int, int], names: dict[int, str]) -> dict[str, Any]:
    return {
        "id": memory.id, "kind": memory.kind.value, "video_id": memory.video_id, "clip": memory.clip_index,
        "start_s": round(memory.start_s, 2), "end_s": round(memory.end_s, 2),
        "text": readable(memory.text, character_of, names), "raw_text": memory.text,
        "entities": list(memory.entity_ids), "weight": memory.weight, "confidence": memory.confidence,
    }


def list_memories(store: MemoryStore, video_id: str | None) -> list[dict[str, Any]]:
    vid = pick_video(store, video_id)
    character_of, names = character_names(store, vid)
    return [memory_row(m, character_of, names) for m in store.memories(vid)]


def clip_report(store: MemoryStore, video_id: str | None, clip_index: int) -> dict[str, Any]:
    """One clip: its status, memories (with resolved characters), faces and voices."""
    vid = pick_video(store, video_id)
    character_of, names = character_names(store, vid)
    status = {c.index: (s.value, reason) for c, s, reason in store.clips(vid)}
    faces = store.faces(vid, clip_index)
    voices = store.voices(vid, clip_index)
    return {
        "video_id": vid, "clip": clip_index, "status": status.get(clip_index, ("missing", ""))[0],
        "reason": status.get(clip_index, ("", ""))[1],
        "memories": [memory_row(m, character_of, names) for m in store.memories(vid, clip_index)],
        "faces": face_summary(faces, character_of),
        "voices": [
            {"id": v.id, "start_s": round(v.start_s, 2), "end_s": round(v.end_s, 2), "entity": v.entity_id,
             "character": character_of.get(v.entity_id) if v.entity_id is not None else None, "text": v.text}
            for v in voices
        ],
    }


def face_summary(faces: list[Any], character_of: dict[int, int]) -> list[dict[str, Any]]:
    """Faces grouped by entity: its character, how many sightings, the first and last time."""
    by_entity: dict[int | None, list[Any]] = {}
    for face in faces:
        by_entity.setdefault(face.entity_id, []).append(face)
    return [
        {"entity": entity, "character": character_of.get(entity) if entity is not None else None,
         "observations": len(group), "first_s": round(min(f.time_s for f in group), 2),
         "last_s": round(max(f.time_s for f in group), 2)}
        for entity, group in by_entity.items()
    ]


def render_table(what: str, data: Any) -> Table:
    """A rich table for a view produced above; every stored value is shown literally (no markup, no escapes)."""
    from rich.table import Table

    from m3agent.terminal import literal

    if what == "clip":
        table = Table(title=literal(f"{data['video_id']} clip {data['clip']} ({data['status']})"))
        table.add_column("kind")
        table.add_column("time")
        table.add_column("text")
        for m in data["memories"]:
            table.add_row(literal(m["kind"]), f"{m['start_s']:.1f}-{m['end_s']:.1f}s", literal(m["text"]))
        for v in data["voices"]:
            who = tags.voice(v["entity"]) if v["entity"] is not None else "unidentified voice"
            table.add_row("voice", f"{v['start_s']:.1f}-{v['end_s']:.1f}s", literal(f"{who}: {v['text']}"))
        for f in data["faces"]:
            who = tags.face(f["entity"]) if f["entity"] is not None else "a face seen too briefly to identify"
            seen = literal(f"{who}: {f['observations']} sightings")
            table.add_row("face", f"{f['first_s']:.1f}-{f['last_s']:.1f}s", seen)
        return table
    rows = list(data)
    table = Table(title=what)
    columns = [c for c in (rows[0].keys() if rows else []) if c != "raw_text"]
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(literal(row[c]) for c in columns))
    return table
