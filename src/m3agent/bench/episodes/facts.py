"""Facts of a generated episode, read from the order of its parts and the catalogue: the ground truth questions
are written from (:mod:`m3agent.bench.episodes.questions`).

Each fact names its kind (a template of ``episode_templates_v1.json``), the slots its phrasings fill, and its
gold answer in the scoring form of :mod:`m3agent.bench.episodes.people_eval`: keyword groups, a yes/no polarity,
parts an answer's time must fall in, and the evidence parts. Times are written as fields (``{mid:p03_debate}``,
``{p03_debate+5.7}``) that the built timeline fills. A fact whose truth the catalogue leaves open (a person whose
speaking is unknown, a voice of unknown kind) is not made.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise

from m3agent.bench.episodes.catalogue import OnScreen, Piece
from m3agent.bench.episodes.seeds import Episode, Placed

COUNT_WORDS = {0: ("0", "zero", "nobody", "no one", "none"), 1: ("1", "one", "single"), 2: ("2", "two", "both"),
               3: ("3", "three"), 4: ("4", "four"), 5: ("5", "five"), 6: ("6", "six"), 7: ("7", "seven"),
               8: ("8", "eight")}
VOICE_WORDS = {"man": ("man", "male", "low", "deep"), "woman": ("woman", "female", "high")}
POSITION_WORDS = {"left": ("left",), "right": ("right",), "center": ("center", "centre", "middle"),
                  "foreground": ("foreground", "front"), "background": ("background", "behind", "back")}
LIVE_WORDS, STILL_WORDS = ("live", "moving", "motion"), ("still", "photo", "photograph", "static")
_PLAIN = frozenset({
    "a", "an", "the", "and", "or", "of", "in", "on", "at", "with", "to", "from", "for", "by", "is", "was", "it",
    "that", "this", "you", "your", "i", "if", "she", "he", "they", "we", "not", "but", "what", "why", "because",
    "could", "have", "done", "were", "be", "here", "do", "did", "didn't", "that's", "man", "woman", "person",
    "people", "who", "when", "where", "there", "their"})


@dataclass(frozen=True, slots=True)
class Fact:
    """One true statement about the episode, ready to be phrased; ``answer`` picks the template's yes or no
    answer (None: the template's only answer)."""

    kind: str
    slots: dict[str, str]
    evidence: tuple[str, ...]
    keywords: tuple[tuple[str, ...], ...] = ()
    polarity: str | None = None
    when: tuple[str, ...] = ()
    answer: str | None = None
    key: str = field(default="")
    """What the fact is about, so two phrasings of one fact are not both asked."""
    rivals: tuple[str, ...] = ()
    """Words of the other answers the question offers (the other side of a split screen, the other people's places):
    an answer that names one of them before a word of its own names the wrong one (words both share tell nothing)."""


def facts(episode: Episode, rng: random.Random) -> list[Fact]:
    """Every fact of ``episode`` (the order fixed by the episode; ``rng`` picks cut points and pair orders)."""
    parts = episode.parts
    makers = (_speech, _identity, _temporal_pairs, _temporal_labels, _crossmodal, _counting, _description)
    return [f for make in makers for f in make(parts, rng)]


def at(part: Placed, offset: float | None = None) -> str:
    """A time field: the middle of ``part``, or ``offset`` seconds into it."""
    return f"{{mid:{part.part_id}}}" if offset is None else f"{{{part.part_id}+{offset:.1f}}}"


def span(part: Placed) -> str:
    return f"{{start:{part.part_id}}}–{{end:{part.part_id}}}"


def ref(person: OnScreen, piece: Piece) -> str:
    """How a question names a person: their look, and their side in a split or a photo."""
    side = f" on the {person.position}" if person.position in ("left", "right") else ""
    return f"the {person.look}{side}" + (" in the photo" if piece.kind == "still" else "")


def distinctive(text: str, avoid: str = "", most: int = 3) -> tuple[str, ...]:
    """The longest plain words of ``text`` that ``avoid`` lacks: what a right recall of it holds."""
    seen = set(re.findall(r"[a-z']+", avoid.lower()))
    words = [w for w in dict.fromkeys(re.findall(r"[a-z']+", text.lower()))
             if w not in _PLAIN and w not in seen and len(w) >= 4]
    return tuple(sorted(words, key=lambda w: (-len(w), w))[:most])


def _speech(parts: tuple[Placed, ...], rng: random.Random) -> Iterator[Fact]:
    for part in parts:
        piece = part.piece
        known = [line for line in piece.lines or () if line.text != "unknown" and line.end - line.start <= 15]
        for line in known:
            words = distinctive(line.text)
            if len(line.text.split()) >= 4 and words:
                mid = (line.start + line.end) / 2
                yield Fact("line_recall", {"at": at(part, mid), "line": line.text}, (part.part_id,), (words,),
                           key=f"line:{piece.id}:{line.start}")
        for before, after in pairwise(known):
            words = distinctive(after.text, avoid=before.text)
            if words:
                yield Fact("line_after", {"quote": before.text, "line": after.text}, (part.part_id,), (words,),
                           key=f"after:{piece.id}:{before.start}")
        for line in known:
            tokens = line.text.split()
            head, rest = " ".join(tokens[: len(tokens) // 2]), " ".join(tokens[len(tokens) // 2:])
            if len(tokens) >= 8 and (keys := distinctive(rest, avoid=head)):
                yield Fact("quote_finish", {"quote": head, "rest": rest}, (part.part_id,), (keys,),
                           key=f"finish:{piece.id}:{line.start}")
        if piece.gist is not None:
            yield Fact("gist_recall", {"at": at(part), "gist": piece.gist.text}, (part.part_id,),
                       (piece.gist.keywords,), key=f"gist:{part.part_id}")
            if sum(p.piece.label == piece.label for p in parts) == 1:
                yield Fact("gist_by_label", {"label": piece.label, "gist": piece.gist.text}, (part.part_id,),
                           (piece.gist.keywords,), key=f"gist2:{part.part_id}")


def _identity(parts: tuple[Placed, ...], rng: random.Random) -> Iterator[Fact]:
    for part in parts:
        for person in part.piece.people:
            if person.position == "background" and part.piece.kind == "video" and person.speaks is False:
                continue  # an audience cutaway: too brief to ask about
            later = [p for p in parts[part.index:] if p.piece.seen(person.who)]
            slots = {"person": ref(person, part.piece), "at": at(part)}
            if later:
                yield Fact("seen_again", slots | {"when": span(later[0])}, (part.part_id, later[0].part_id),
                           polarity="yes", when=(later[0].part_id,), answer="yes", key=f"seen:{part.part_id}")
            else:
                yield Fact("seen_again", slots, (part.part_id,), polarity="no", answer="no",
                           key=f"seen:{part.part_id}")
        yield from _voice_before(part, parts)
    talkers = [(p, _main_speaker(p.piece)) for p in parts if _main_speaker(p.piece) is not None]
    for i, (a, who_a) in enumerate(talkers):
        for b, who_b in talkers[i + 1:]:
            same = who_a == who_b
            yield Fact("same_person", {"at": at(a), "at2": at(b)}, (a.part_id, b.part_id),
                       polarity="yes" if same else "no", answer="yes" if same else "no",
                       key=f"same:{a.part_id}:{b.part_id}")


def _voice_before(part: Placed, parts: tuple[Placed, ...]) -> Iterator[Fact]:
    """Whether the one voice of ``part`` was heard before; not made when an earlier part shows that person
    without saying whether they talk."""
    if len(part.piece.voices) != 1:
        return
    who = part.piece.voices[0].who
    earlier = parts[: part.index - 1]
    if any(o.who == who and o.speaks is None for p in earlier for o in p.piece.people):
        return
    heard = [p for p in earlier if p.piece.heard(who)]
    if heard:
        yield Fact("voice_before", {"at": at(part), "when": span(heard[0])}, (part.part_id, heard[0].part_id),
                   polarity="yes", when=(heard[0].part_id,), answer="yes", key=f"voice:{part.part_id}")
    else:
        yield Fact("voice_before", {"at": at(part)}, (part.part_id,), polarity="no", answer="no",
                   key=f"voice:{part.part_id}")


def _main_speaker(piece: Piece) -> str | None:
    """The one person seen talking in a live piece (None: none, several, or not known)."""
    talking = [p for p in piece.people if p.speaks]
    if not piece.live or piece.split_screen or len(talking) != 1 or any(p.speaks is None for p in piece.people
                                                                         if p.position != "background"):
        return None
    return talking[0].who


def _temporal_pairs(parts: tuple[Placed, ...], rng: random.Random) -> Iterator[Fact]:
    for cur, nxt in pairwise(parts):
        if cur.piece.label == nxt.piece.label:
            continue
        words = tuple(c for c in nxt.piece.cues if c not in cur.piece.cues)
        back = tuple(c for c in cur.piece.cues if c not in nxt.piece.cues)
        if words:
            yield Fact("after", {"at": at(cur), "scene": nxt.piece.scene, "when": span(nxt)}, (nxt.part_id,),
                       (words,), key=f"after:{cur.part_id}")
        if back:
            yield Fact("before", {"at": at(nxt), "scene": cur.piece.scene, "when": span(cur)}, (cur.part_id,),
                       (back,), key=f"before:{nxt.part_id}")
    first, last = parts[0], parts[-1]
    yield Fact("first_scene", {"scene": first.piece.scene, "when": span(first)}, (first.part_id,),
               (first.piece.cues,), key="first")
    yield Fact("last_scene", {"scene": last.piece.scene, "when": span(last)}, (last.part_id,),
               (last.piece.cues,), key="last")


def _temporal_labels(parts: tuple[Placed, ...], rng: random.Random) -> Iterator[Fact]:
    firsts: dict[str, Placed] = {}
    for p in parts:
        firsts.setdefault(p.piece.label, p)
    once = [p for p in firsts.values() if sum(q.piece.label == p.piece.label for q in parts) == 1]
    for i, a in enumerate(once):
        for b in once[i + 1:]:
            x, y = (a, b) if rng.random() < 0.5 else (b, a)
            yes = x.index < y.index
            yield Fact("shown_before", {"label": x.piece.label, "label2": y.piece.label},
                       (x.part_id, y.part_id), polarity="yes" if yes else "no", answer="yes" if yes else "no",
                       key=f"order:{a.part_id}:{b.part_id}")
    for label, first in firsts.items():
        yield Fact("first_when", {"label": label, "when": span(first)}, (first.part_id,), when=(first.part_id,),
                   key=f"first:{label}")
        cut = parts[rng.randrange(len(parts))]
        if cut is first:
            continue
        yes = first.index < cut.index
        slots = {"label": label, "at": f"{{end:{cut.part_id}}}" if yes else f"{{start:{cut.part_id}}}"}
        yield Fact("so_far", slots | {"when": span(first)}, (first.part_id,), polarity="yes" if yes else "no",
                   when=(first.part_id,) if yes else (), answer="yes" if yes else "no", key=f"sofar:{label}")


def _crossmodal(parts: tuple[Placed, ...], rng: random.Random) -> Iterator[Fact]:
    for part in parts:
        piece = part.piece
        if piece.split_screen:
            sides = {p.who: p for p in piece.people if p.position in ("left", "right")}
            for line in piece.lines or ():
                person = sides.get(line.who or "")
                if person is not None and person.voice in VOICE_WORDS:
                    rivals = [w for p in sides.values() if p.who != person.who for w in (p.position, p.voice or "")]
                    yield Fact("who_speaks_split", {"at": at(part, (line.start + line.end) / 2),
                                                    "person": ref(person, piece)}, (part.part_id,),
                               ((person.position, person.voice),), key=f"who:{part.part_id}:{line.start}",
                               rivals=_once(rivals))
        if piece.kind != "video" and len(piece.voices) == 1:
            who = piece.voices[0].who
            seen = [p for p in parts if p.piece.seen(who)]
            slots = {"at": at(part)} | ({"when": span(seen[0])} if seen else {})
            yield Fact("voice_seen", slots, (part.part_id, *(p.part_id for p in seen[:1])),
                       polarity="yes" if seen else "no", answer="yes" if seen else "no", key=f"vseen:{part.part_id}")
        speaking = [p for p in piece.people if p.speaks is not None and p.position != "background"]
        if len(speaking) == 1 and (piece.kind == "still" or piece.on_screen == 1 or _main_speaker(piece)):
            person = speaking[0]
            yes = bool(person.speaks)
            yield Fact("speaks", {"person": ref(person, piece), "at": at(part)}, (part.part_id,),
                       polarity="yes" if yes else "no", answer="yes" if yes else "no", key=f"speaks:{part.part_id}")


def _counting(parts: tuple[Placed, ...], rng: random.Random) -> Iterator[Fact]:
    for part in parts:
        piece = part.piece
        if piece.on_screen is not None and piece.on_screen in COUNT_WORDS:
            yield Fact("count_people", {"at": at(part), "count": _number(piece.on_screen)}, (part.part_id,),
                       (COUNT_WORDS[piece.on_screen],), key=f"npeople:{part.part_id}")
        if piece.voices and all(p.speaks is not None for p in piece.people) and len(piece.voices) in COUNT_WORDS:
            yield Fact("count_speakers", {"at": at(part), "count": _number(len(piece.voices))}, (part.part_id,),
                       (COUNT_WORDS[len(piece.voices)],), key=f"nspeakers:{part.part_id}")
    done: set[str] = set()
    for part in parts:
        for person in part.piece.people:
            if person.who in done or person.position == "background":
                continue
            done.add(person.who)
            runs = _runs([p.piece.seen(person.who) for p in parts])
            shown = [p for p in parts if p.piece.seen(person.who)]
            if len(runs) in COUNT_WORDS:
                yield Fact("count_appearances", {"person": ref(person, part.piece), "at": at(part),
                                                 "count": _number(len(runs)),
                                                 "when": ", ".join(span(p) for p in shown)},
                           tuple(p.part_id for p in shown), (COUNT_WORDS[len(runs)],), key=f"nseen:{person.who}")
    stills = {p.piece.image for p in parts if p.piece.kind == "still"}
    if len(stills) in COUNT_WORDS:
        evidence = tuple(p.part_id for p in parts if p.piece.kind == "still")
        yield Fact("count_stills", {"count": _number(len(stills))}, evidence, (COUNT_WORDS[len(stills)],),
                   key="nstills")
    cut = parts[rng.randrange(len(parts))]
    dark = len(_runs([p.piece.kind == "dark" for p in parts[: cut.index]]))
    if dark in COUNT_WORDS:
        evidence = tuple(p.part_id for p in parts[: cut.index] if p.piece.kind == "dark") or (cut.part_id,)
        yield Fact("count_dark_so_far", {"at": f"{{end:{cut.part_id}}}", "count": _number(dark)}, evidence,
                   (COUNT_WORDS[dark],), key="ndark")


def _once(words: list[str]) -> tuple[str, ...]:
    """``words`` in order, each once, none empty."""
    return tuple(dict.fromkeys(w for w in words if w))


def _runs(flags: list[bool]) -> list[int]:
    """Start indexes of the runs of consecutive True: adjacent parts showing one thing are one scene."""
    return [i for i, flag in enumerate(flags) if flag and (i == 0 or not flags[i - 1])]


def _number(n: int) -> str:
    return COUNT_WORDS[n][1].capitalize()


def _description(parts: tuple[Placed, ...], rng: random.Random) -> Iterator[Fact]:
    for part in parts:
        piece = part.piece
        pid = part.part_id
        if len(piece.voices) == 1 and piece.voices[0].kind in VOICE_WORDS:
            kind = piece.voices[0].kind
            text = f"A {kind}'s voice ({'low' if kind == 'man' else 'high'})."
            yield Fact("voice_kind", {"at": at(part), "kind": text}, (pid,), (VOICE_WORDS[kind],), key=f"vkind:{pid}")
        if piece.kind != "dark":
            live: tuple[str, ...] = LIVE_WORDS if piece.live else STILL_WORDS
            kind = "A live video." if piece.live else "A still photo."
            yield Fact("still_or_live", {"at": at(part), "kind": kind}, (pid,), (live,), key=f"still:{pid}")
        looks = [p.look for p in piece.people]
        for person in piece.people:
            if len(piece.people) >= 2 and looks.count(person.look) == 1 and piece.on_screen is not None:
                rivals = [w for p in piece.people if p.who != person.who for w in POSITION_WORDS[p.position]]
                yield Fact("position", {"at": at(part), "look": person.look, "position": person.position.capitalize()},
                           (pid,), (POSITION_WORDS[person.position],), key=f"pos:{pid}:{person.who}",
                           rivals=_once(rivals))
            if piece.split_screen and piece.live and person.position in ("left", "right"):
                words = distinctive(person.look)
                if words:
                    yield Fact("look", {"at": at(part), "position": person.position, "look": person.look}, (pid,),
                               (words,), key=f"look:{pid}:{person.who}")
        anyone = piece.kind != "dark" and (bool(piece.people) or piece.on_screen is None)
        yield Fact("anyone_there", {"at": at(part), "scene": piece.scene}, (pid,), polarity="yes" if anyone else "no",
                   answer="yes" if anyone else "no", key=f"anyone:{pid}")
        yield Fact("scene", {"at": at(part), "scene": piece.scene}, (pid,), (piece.cues,), key=f"scene:{pid}")
