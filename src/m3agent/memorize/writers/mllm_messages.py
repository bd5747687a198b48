"""The chat messages of one memorization call: prompt text, frames, labelled face crops, transcripts, audio.

Layout of the user message (OpenAI content parts, adjacent texts merged, a
plain string when there is no media part so text-only servers get clean text):
clip header and what earlier clips established; frames (``[m:ss]`` then the
image); each face tag then its crop; transcript lines ``<voice_7> [0:12-0:15]: ...``; the scene
stages' findings (on-screen text, objects, sounds, shots) as lines;
optionally each voice tag then its audio; the task line. When the endpoint
limits images per request, faces come first (they tie tags to people), then
frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3agent import tags
from m3agent.media.snippets import wav_bytes
from m3agent.memorize.writers.media_parts import (
    Part,
    audio_part,
    frame_jpeg,
    image_part,
    pick_frames,
    text_part,
    voice_audio,
)
from m3agent.text import clock

if TYPE_CHECKING:
    from m3agent.llm.prompts import PromptSet
    from m3agent.memorize.inputs import ClipInput

AUDIO_SECONDS = 20.0


@dataclass(frozen=True, slots=True)
class MediaBudget:
    """How much media one request carries; ``images`` caps frames + crops together (``None``: no cap)."""

    frames: int = 4
    frame_side: int = 512
    faces: int = 8
    audio: bool = False
    images: int | None = None

    def split(self, n_faces: int) -> tuple[int, int]:
        """``(faces, frames)`` to send under the image cap."""
        faces, frames = min(self.faces, n_faces), self.frames
        if self.images is None:
            return faces, frames
        faces = min(faces, max(0, self.images - min(frames, 1)))
        return faces, max(0, min(frames, self.images - faces))


def build_messages(inp: ClipInput, prompts: PromptSet, budget: MediaBudget) -> list[dict[str, Any]]:
    """System + user message for ``inp`` under ``budget``."""
    faces = ordered_faces(inp)
    n_faces, n_frames = budget.split(len([f for f in faces if inp.best_face(f) is not None]))
    parts: list[Part] = [text_part(_header(inp, prompts))]
    parts += _frame_parts(inp, prompts, n_frames, budget.frame_side)
    parts += _face_parts(inp, prompts, faces, n_faces)
    parts.append(text_part(_voice_text(inp, prompts)))
    parts.append(text_part(_scene_text(inp, prompts)))
    if budget.audio:
        parts += _audio_parts(inp, prompts)
    parts.append(text_part(prompts.render("task")))
    return [{"role": "system", "content": prompts.render("system")}, {"role": "user", "content": merged(parts)}]


def ordered_faces(inp: ClipInput) -> list[int]:
    """Face entities, longest on screen first (ties: first seen)."""
    order = inp.face_ids()
    return sorted(order, key=lambda e: (-inp.screen_seconds(e), order.index(e)))


def merged(parts: Sequence[Part]) -> str | list[Part]:
    """Adjacent text parts joined; a plain string when only text remains."""
    out: list[Part] = []
    for part in parts:
        if part["type"] == "text" and out and out[-1]["type"] == "text":
            out[-1] = text_part(out[-1]["text"] + "\n" + part["text"])
        elif part["type"] != "text" or part["text"]:
            out.append(part)
    if all(p["type"] == "text" for p in out):
        return "\n".join(p["text"] for p in out)
    return out


def known_facts(inp: ClipInput) -> list[str]:
    """What earlier clips established about this clip's entities: same-person groups and names."""
    present = inp.tag_kinds()
    lines = []
    for character in inp.characters:
        members = [e for e in character.entity_ids if e in present]
        if not members:
            continue
        who = " and ".join(tags.format_tag(present[e], e) for e in members)
        name = inp.names.get(members[0], "") or character.name
        if len(members) > 1:
            lines.append(f"- {who} are the same person" + (f", called {name}." if name else "."))
        elif name:
            lines.append(f"- {who} is called {name}.")
    return lines


def allowed_tags(inp: ClipInput) -> str:
    kinds = inp.tag_kinds()
    return ", ".join(tags.format_tag(kind, e) for e, kind in kinds.items()) or "none (describe people by short phrases)"


def _header(inp: ClipInput, prompts: PromptSet) -> str:
    clip = inp.clip
    text = prompts.render("clip", number=clip.index + 1, start=clock(clip.start_s), end=clock(clip.end_s))
    facts = known_facts(inp)
    return text + ("\n" + prompts.render("known", facts="\n".join(facts)) if facts else "")


def _frame_parts(inp: ClipInput, prompts: PromptSet, count: int, side: int) -> list[Part]:
    chosen = pick_frames(inp.frames, count)
    if not chosen:
        return []
    parts = [text_part(prompts.render("frames"))]
    for frame in chosen:
        parts += [text_part(f"[{clock(frame.time_s)}]"), image_part(frame_jpeg(frame.image, side))]
    return parts


def _face_parts(inp: ClipInput, prompts: PromptSet, faces: list[int], count: int) -> list[Part]:
    if not faces:
        return [text_part(prompts.render("no_faces"))]
    parts = [text_part(prompts.render("faces"))]
    shown = 0
    for entity in faces:
        best = inp.best_face(entity)
        seconds = f"on screen about {max(1, round(inp.screen_seconds(entity)))} s"
        if best is not None and best.crop_jpeg and shown < count:
            parts += [text_part(f"{tags.face(entity)} ({seconds}):"), image_part(best.crop_jpeg)]
            shown += 1
        else:
            parts.append(text_part(f"{tags.face(entity)} ({seconds}; no picture)"))
    return parts


def _voice_text(inp: ClipInput, prompts: PromptSet) -> str:
    lines = []
    for seg in sorted(inp.voices, key=lambda s: s.start_s):
        who = tags.voice(seg.entity_id) if seg.entity_id is not None else "(unidentified speaker, no tag)"
        words = " ".join(seg.text.split()) or "(no words recognised)"
        lines.append(f"{who} [{clock(seg.start_s)}-{clock(seg.end_s)}]: {words}")
    return prompts.render("voices", lines="\n".join(lines)) if lines else prompts.render("no_voices")


def _scene_text(inp: ClipInput, prompts: PromptSet) -> str:
    """The scene stages' findings as lines (the perception writer's scene memories); empty when none."""
    from m3agent.memorize.scene_memories import scene_memories

    lines = [f"- {m.text}" for m in scene_memories(inp.clip, inp.senses, inp.tracks, inp.voices)]
    return prompts.render("scene", lines="\n".join(lines)) if lines else ""


def _audio_parts(inp: ClipInput, prompts: PromptSet) -> list[Part]:
    parts: list[Part] = []
    for entity in inp.voice_ids():
        samples = voice_audio(inp, entity, AUDIO_SECONDS)
        if samples is not None and len(samples):
            parts += [text_part(f"{tags.voice(entity)}:"), audio_part(wav_bytes(samples, inp.audio_rate))]
    return [text_part(prompts.render("audio")), *parts] if parts else []
