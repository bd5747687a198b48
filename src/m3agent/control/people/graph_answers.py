"""Answers decided by the entity graph: a checked query plan (:mod:`m3agent.control.people.plan`) is carried out with
the operators of :mod:`m3agent.graph` and the result phrased from the templates of ``prompts/control_plan.txt``.

Same person? Seen or heard before? What comes right after? How many? High or low voice? Each is a lookup, so
no model decides it: the model only read the question into the plan. An operation that cannot be carried out
(nothing in the graph fits a reference, an attribute was never measured, the plan is ``recall``) gives None and
the question is answered from retrieved memories as before.

Every answer keeps the stored shot summaries it rests on (the shots of the intervals it names), which become
the answer's cited evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from m3agent.control.people.graph_facts import quote
from m3agent.control.people.words import (
    KIND_TEXT,
    QUOTE_CHARS,
    number_word,
    shot_content,
    shot_kind,
    sighting_place,
    unseen,
    who,
)
from m3agent.graph.fits import fits_clothes, fits_eyewear, fits_gender, seen_while_heard
from m3agent.graph.lips import (
    LikelySpeaker,
    MovingSpeaker,
    OtherSpeaker,
    by_elimination,
    likely_speaker,
    moving_speaker,
)
from m3agent.graph.references import Reference, Resolved, resolve
from m3agent.graph.scenes import Scene, counted_scenes, describe_as, matching_scenes, picture_span, two_scenes
from m3agent.graph.values import Role, span_text
from m3agent.llm.prompts import load_prompt_set
from m3agent.perception.attributes.names import Attribute
from m3agent.text import clock

if TYPE_CHECKING:
    from collections.abc import Callable

    from m3agent.control.people.plan import Plan
    from m3agent.graph.operators import EntityGraph
    from m3agent.graph.values import Appearance, Person

MAX_SPANS = 5  # intervals listed in one answer; more are counted
SAME_SPAN_S = 1.0  # an appearance this close to the reference's window is the one referred to, not another
CUT_JITTER_S = 2.0
"""How far a voice may run past its picture's detected cut and still be that picture's voice: cuts are found
on frames sampled at 2 fps and speech segments carry padding, so the photo's own narration often starts a second
or so before the cut the graph records (seed 46's dev episode: 1.0 s)."""
MOVING_REACH_S = 2.0
"""Who moves their lips at a moment asked about is judged within this many seconds of it, inside the utterance
heard then: one long turn the diarizer gave a single voice may hold both people's words."""
_SENSE = {"seen": (Role.FACE, Role.BOTH), "heard": (Role.VOICE, Role.BOTH), "any": tuple(Role)}
_SENSE_WORD = {"seen": "seen", "heard": "heard", "any": "seen or heard"}


@dataclass(frozen=True, slots=True)
class GraphAnswer:
    """An answer the graph decided: its text and the shot summaries it rests on."""

    text: str
    memory_ids: tuple[int, ...]


def graph_answer(graph: EntityGraph, video_id: str, plan: Plan) -> GraphAnswer | None:
    """The answer to ``plan`` from the graph of ``video_id``; None when the graph cannot decide it."""
    ask = plan.ask
    if ask in ("after", "before") and plan.other is not None and _is_scene(plan.person) and _is_scene(plan.other):
        ask = "which_first"  # two scenes named: their order is asked, not what comes next to one of them
    if plan.so_far and plan.yes_no and _is_scene(plan.person) and plan.person.time_s is not None:
        ask = "when"  # "up to 1:05, was the dark screen shown?": whether the described scene came by then
    if ask == "who_speaks" and plan.yes_no and _names_someone(plan.person):
        ask = "speaks"  # "at 1:58, is it the woman with glasses who's talking?": whether she speaks, yes or no
    operation = _OPERATIONS.get(ask)
    return operation(_Run(graph, video_id, plan)) if operation is not None else None


def _names_someone(ref: Reference) -> bool:
    """Whether ``ref`` describes a person seen (a man, a woman, someone at a place or in a photo), not a voice, a
    quotation or only a moment."""
    return not ref.heard and not ref.quote.strip() and (ref.kind not in ("none", "person") or ref.place != "any"
                                                        or ref.wears != "any" or ref.dressed != "any")


class _Run:
    """One plan carried out: the graph, the video and the shots cited so far."""

    def __init__(self, graph: EntityGraph, video_id: str, plan: Plan) -> None:
        self.graph, self.video_id, self.plan = graph, video_id, plan
        self.spans: list[tuple[float, float]] = []

    def resolve(self, ref: Reference | None) -> Resolved | None:
        if ref is None:
            return None
        found = resolve(self.graph, self.video_id, ref)
        if found is not None:
            self.spans.append(found.window)
        return found

    def answer(self, section: str, **fields: object) -> GraphAnswer:
        text = load_prompt_set("control_plan").render(section, **fields)
        ids = [m for s in self.graph.shots(self.video_id) for m in s.memory_ids
               if any(s.start_s < b + 0.01 and s.end_s > a - 0.01 for a, b in self.spans)]
        return GraphAnswer(text[:1].upper() + text[1:], tuple(dict.fromkeys(ids)))

    def spans_of(self, apps: list[Appearance]) -> str:
        self.spans += [(a.start_s, a.end_s) for a in apps[:MAX_SPANS]]
        listed = ", ".join(span_text(a.start_s, a.end_s) for a in apps[:MAX_SPANS])
        more = f" and {len(apps) - MAX_SPANS} more times" if len(apps) > MAX_SPANS else ""
        return listed + more

    def sense(self, ref: Reference) -> str:
        return "heard" if self.plan.sense == "any" and ref.heard else self.plan.sense


def _sensed(apps: list[Appearance], sense: str) -> list[Appearance]:
    return [a for a in apps if a.role in _SENSE[sense]]


def _inside(a: Appearance, window: tuple[float, float]) -> bool:
    return a.start_s <= window[1] + SAME_SPAN_S and a.end_s >= window[0] - SAME_SPAN_S


# operations ------------------------------------------------------------------
def _seen_again(run: _Run) -> GraphAnswer | None:
    found = run.resolve(run.plan.person)
    if found is None or found.person is None:
        return None
    sense = run.sense(run.plan.person)
    apps = _sensed(run.graph.appearances(found.person, run.video_id), sense)
    here = [a for a in apps if _inside(a, found.window)]
    direction = run.plan.direction
    picture = picture_span(run.graph, run.video_id, sum(found.window) / 2)
    elsewhere = [a for a in apps if not _inside(a, found.window)] + _beyond(here, picture)
    others = sorted((a for a in elsewhere
                     if direction == "any" or (a.start_s > found.window[1]) == (direction == "after")),
                    key=lambda a: a.start_s)
    person = who(run.graph, found.person, found.sighting)
    words = {"after": "again later", "before": "earlier", "any": "at other times"}[direction]
    if others:
        return run.answer("seen_yes", who=person, sense=_SENSE_WORD[sense], direction=words,
                          spans=run.spans_of(others))
    return run.answer("seen_no", who=person, sense=_SENSE_WORD[sense],
                      spans=run.spans_of(here) or span_text(*found.window))


def _beyond(here: list[Appearance], picture: tuple[float, float] | None) -> list[Appearance]:
    """The parts of the appearances at the moment asked about that lie past the picture shown then, by more than
    :data:`CUT_JITTER_S` (a voice that went on from another photo is heard earlier than this one, "the voice at 1:22:
    heard before?" - yes, at 1:06-1:17 under the photo before)."""
    if picture is None:
        return []
    start, end = picture
    out = [replace(a, end_s=start) for a in here if a.start_s < start - CUT_JITTER_S]
    return out + [replace(a, start_s=end) for a in here if a.end_s > end + CUT_JITTER_S]


def _same_person(run: _Run) -> GraphAnswer | None:
    first, second = run.resolve(_someone(run.plan.person)), run.resolve(_someone(run.plan.other))
    if first is None or second is None or first.person is None or second.person is None:
        return None
    one = who(run.graph, first.person, first.sighting)
    if first.person.character_id == second.person.character_id:
        apps = run.graph.appearances(first.person, run.video_id)
        return run.answer("same_yes", who=one, sense="seen or heard", spans=run.spans_of(apps))
    return run.answer("same_no", who=one, other=who(run.graph, second.person, second.sighting))


def _someone(ref: Reference | None) -> Reference | None:
    """A bare moment of a same-person question as the person there ("same person at 0:04 and 0:31?": whoever is
    seen, else heard, at each time); any other reference as it is."""
    if ref is None or ref.kind != "none" or ref.quote.strip():
        return ref
    return replace(ref, kind="person")


def _when(run: _Run) -> GraphAnswer | None:
    if _is_scene(run.plan.person):
        return _when_scene(run, run.plan.person.time_s if run.plan.so_far else None)
    found = run.resolve(run.plan.person)
    if found is None or found.person is None:
        return None
    sense = run.sense(run.plan.person)
    apps = _sensed(run.graph.appearances(found.person, run.video_id), sense) or \
        run.graph.appearances(found.person, run.video_id)
    return run.answer("when", who=who(run.graph, found.person, found.sighting), sense=_SENSE_WORD[sense],
                      spans=run.spans_of(apps))


def _neighbour(run: _Run, after: bool) -> GraphAnswer | None:
    found = run.resolve(run.plan.person)
    if found is None:
        return None
    anchor = found.utterance.end_s if after and found.utterance is not None else \
        found.utterance.start_s if found.utterance is not None else sum(found.window) / 2
    shot = run.graph.shot_at(run.video_id, anchor)
    if shot is None:
        return None
    near = run.graph.next_shot(shot) if after else run.graph.previous_shot(shot)
    label = "Right after" if after else "Right before"
    if near is None:
        run.spans.append((shot.start_s, shot.end_s))
        return GraphAnswer(f"Nothing: the shot at {span_text(shot.start_s, shot.end_s)} "
                           f"{'ends' if after else 'opens'} the video.", shot.memory_ids)
    run.spans.append((near.start_s, near.end_s))
    return run.answer("neighbour", direction=label, span=span_text(near.start_s, near.end_s),
                      kind=shot_kind(near), content=shot_content(run.graph, near))


def _which_first(run: _Run) -> GraphAnswer | None:
    person, other = run.plan.person, run.plan.other
    if _is_scene(person) and (other is None or _bare_moment(other)):  # one described scene: when is it shown
        bound = other.time_s if other is not None else person.time_s
        return _when_scene(run, bound if run.plan.so_far else None)
    if _is_scene(person) and other is not None and _is_scene(other):
        one, two = _first_times_of_two_scenes(run, person, other)
    else:
        one, two = _first_time(run, person), _first_time(run, other)
    if one is None or two is None:
        return None
    (a_text, a_time), (b_text, b_time) = sorted((one, two), key=lambda t: t[1])
    section = "first"
    if run.plan.yes_no:  # "does A come before B?" is answered yes or no, then the order
        section = "first_yes" if (one[1] <= two[1]) != run.plan.later else "first_no"
    return run.answer(section, first=a_text, first_time=clock(a_time), second=b_text, second_time=clock(b_time))


def _first_times_of_two_scenes(run: _Run, one: Reference, two: Reference
                               ) -> tuple[tuple[str, float] | None, tuple[str, float] | None]:
    """When each of two described scenes is first shown, never as the same scene (:func:`two_scenes`)."""
    found = two_scenes(run.graph, run.video_id, describe_as(one.about, one.kind), describe_as(two.about, two.kind))
    if found is None:
        return None, None
    return _shown_first(run, one, found[0]), _shown_first(run, two, found[1])


def _shown_first(run: _Run, ref: Reference, scene: Scene) -> tuple[str, float]:
    """The described scene ``ref`` as first shown in ``scene`` (cited), and when."""
    run.spans.append((scene.start_s, scene.end_s))
    return f"{_named(ref)} ({span_text(scene.start_s, scene.end_s)})", scene.start_s


def _first_time(run: _Run, ref: Reference | None) -> tuple[str, float] | None:
    if ref is None:
        return None
    if _is_scene(ref):
        shown = _scenes_of(run, ref)
        if not shown:
            return None
        return _shown_first(run, ref, shown[0])
    if ref.kind == "photo" and not ref.anchored:
        shot = next((s for s in run.graph.shots(run.video_id) if s.kind == "still" and
                     run.graph.at(run.video_id, s.start_s, s.end_s).on_screen), None)
        if shot is None:
            return None
        run.spans.append((shot.start_s, shot.end_s))
        return f"the photo ({span_text(shot.start_s, shot.end_s)})", shot.start_s
    found = run.resolve(ref)
    if found is None or found.person is None:
        return None
    first = run.graph.appearances(found.person, run.video_id)[0]
    run.spans.append((first.start_s, first.end_s))
    return who(run.graph, found.person, found.sighting), first.start_s


def moment_scene(graph: EntityGraph, video_id: str, plan: Plan, time_s: float) -> GraphAnswer | None:
    """What the graph shows of the shot at ``time_s`` (who is on screen and what they look like, still or live,
    what is said, heard and written): the answer to "what is happening at 0:49?" when the memories shown to the
    model did not say."""
    return _scene(_Run(graph, video_id, plan), Reference("none", "any", time_s))


def _scene(run: _Run, ref: Reference | None = None) -> GraphAnswer | None:
    ref = ref or run.plan.person
    if ref.scene == "any" and ref.time_s is None:
        return None
    found = run.resolve(Reference("none", "any", ref.time_s, ref.scene))
    if found is None or found.shot is None:
        return None
    shot = found.shot
    which = {"first": "first", "last": "last"}.get(ref.scene, "")
    return run.answer("scene", which=which or f"{clock(ref.time_s or 0.0)}", span=span_text(shot.start_s, shot.end_s),
                      kind=shot_kind(shot), content=shot_content(run.graph, shot))


def _who_speaks(run: _Run) -> GraphAnswer | None:
    ref = run.plan.person
    heard = Reference("speaker" if ref.kind in ("none", "person") else ref.kind, ref.place, ref.time_s,
                      ref.scene, ref.quote)
    found = run.resolve(heard if not ref.heard else ref)
    if found is None or found.person is None or found.utterance is None:
        return None
    said = found.utterance
    likely = _likely_face(run, found.person, said.start_s, said.end_s)
    if likely is not None:
        run.spans.append((said.start_s, said.end_s))
        return run.answer("speaker_likely", who=who(run.graph, likely.person), span=span_text(said.start_s, said.end_s),
                          **_lip_words(run, likely))
    left = _left_speaker(run, found.person, said.start_s, said.end_s)
    if left is not None:
        run.spans.append((said.start_s, said.end_s))
        return run.answer(_by("speaker", left), who=who(run.graph, left.person),
                          span=span_text(said.start_s, said.end_s), **_other_words(run, left))
    moving = _moving_face(run, found.person, said.start_s, said.end_s, ref.time_s)
    if moving is not None:
        run.spans.append((said.start_s, said.end_s))
        return run.answer("speaker_moving", who=who(run.graph, moving.person),
                          span=span_text(said.start_s, said.end_s), **_moving_words(run, moving))
    person = who(run.graph, found.person, found.sighting)
    faces = _sensed(run.graph.appearances(found.person, run.video_id), "seen")
    seen = f"{found.person.label} is seen on screen at {run.spans_of(faces)}" if faces else \
        unseen(run.graph, found.person)
    run.spans.append((said.start_s, said.end_s))
    verb = "says it" if ref.quote else "is speaking"
    return run.answer("speaker", who=person, verb=verb, span=span_text(said.start_s, said.end_s), seen=seen)


def _speaks(run: _Run) -> GraphAnswer | None:
    found = run.resolve(run.plan.person)
    if found is None or found.person is None:
        return None
    person = who(run.graph, found.person, found.sighting)
    span = span_text(*found.window)
    heard = run.graph.heard(run.video_id, *found.window)
    own = next((u for u in heard if u.person.character_id == found.person.character_id), None)
    if own is not None:
        return run.answer("speaks_yes", who=person, span=span, quote=quote(own.text, QUOTE_CHARS))
    for u in heard:
        likely = _likely_face(run, u.person, u.start_s, u.end_s)
        if likely is not None and likely.person.character_id == found.person.character_id:
            run.spans.append((u.start_s, u.end_s))
            return run.answer("speaks_likely", who=person, span=span_text(u.start_s, u.end_s),
                              **_lip_words(run, likely))
        left = _left_speaker(run, u.person, u.start_s, u.end_s) if likely is None else None
        if left is not None and left.person.character_id == found.person.character_id:
            run.spans.append((u.start_s, u.end_s))
            return run.answer(_by("speaks", left), who=person, span=span_text(u.start_s, u.end_s),
                              **_other_words(run, left))
    speakers = list({u.person.character_id: u.person for u in heard}.values())
    others = "; ".join(f"{who(run.graph, p)} speaks" for p in speakers[:2]) or "nobody speaks"
    return run.answer("speaks_no", who=person, span=span, others=others)


def _likely_face(run: _Run, voice: Person, start_s: float, end_s: float) -> LikelySpeaker | None:
    """The person on screen most likely speaking with ``voice`` from ``start_s`` to ``end_s``, by their lips
    (:func:`m3agent.graph.lips.likely_speaker`), when no face of the voice's own is known; else None."""
    if voice.face_ids:
        return None
    on_screen = {s.person.character_id: s.person for s in run.graph.at(run.video_id, start_s, end_s).on_screen}
    on_screen.pop(voice.character_id, None)
    return likely_speaker(run.graph.lip_sync(run.video_id), voice, list(on_screen.values()))


def _left_speaker(run: _Run, voice: Person, start_s: float, end_s: float) -> OtherSpeaker | None:
    """The person on screen who speaks with ``voice`` from ``start_s`` to ``end_s`` because the live shot's other voice
    is the only other person's there (:func:`m3agent.graph.lips.by_elimination`), when ``voice`` is heard nowhere
    in the video but while that person is seen (a narrator over two people is not one of them); else None."""
    if voice.face_ids:
        return None
    shot = run.graph.shot_at(run.video_id, (start_s + end_s) / 2)
    if shot is None or shot.kind != "live":
        return None
    on_screen = {s.person.character_id: s.person for s in run.graph.at(run.video_id, start_s, end_s).on_screen}
    on_screen.pop(voice.character_id, None)
    voices = {u.person.character_id: u.person for u in run.graph.heard(run.video_id, shot.start_s, shot.end_s)}
    left = by_elimination(run.graph.lip_sync(run.video_id), voice, list(on_screen.values()), list(voices.values()))
    if left is None:
        return None
    seen = run.graph.presence(left.person, run.video_id).seen
    heard = run.graph.presence(voice, run.video_id).speaking
    alone = all(any(a - SAME_SPAN_S <= (b + c) / 2 <= z + SAME_SPAN_S for a, z in seen) for b, c in heard)
    return left if alone else None


def _moving_face(run: _Run, voice: Person, start_s: float, end_s: float, time_s: float | None
                 ) -> MovingSpeaker | None:
    """The person on screen whose mouth moves most above its own usual while ``voice`` is heard from ``start_s`` to
    ``end_s`` (near ``time_s``, the moment asked about: :data:`MOVING_REACH_S`) in a live shot
    (:func:`m3agent.graph.lips.moving_speaker`), when no face of the voice's own is known; else None."""
    if voice.face_ids:
        return None
    near = (start_s, end_s) if time_s is None else \
        (max(start_s, time_s - MOVING_REACH_S), min(end_s, time_s + MOVING_REACH_S))
    if near[0] < near[1]:
        start_s, end_s = near
    shot = run.graph.shot_at(run.video_id, (start_s + end_s) / 2)
    motions, step = run.graph.mouth_motions(run.video_id)
    if shot is None or shot.kind != "live" or step is None:
        return None
    on_screen = {s.person.character_id: s.person for s in run.graph.at(run.video_id, start_s, end_s).on_screen}
    on_screen.pop(voice.character_id, None)
    return moving_speaker(motions, list(on_screen.values()), (start_s, end_s), (shot.start_s, shot.end_s), step)


def _moving_words(run: _Run, moving: MovingSpeaker) -> dict[str, str]:
    """The fields a "mouth moves more than usual" answer shows its evidence with: ``lift``, ``runner_lift``,
    ``runner``."""
    runner, runner_lift = moving.runner_up
    return {"lift": f"{moving.lift:+.2f}", "runner_lift": f"{runner_lift:+.2f}", "runner": who(run.graph, runner)}


def _by(section: str, left: OtherSpeaker) -> str:
    """The template of an answer by elimination: ``*_listener`` (the other's lips move against the voice) or
    ``*_other`` (the scene's other voice is the other's)."""
    return f"{section}_{'other' if left.other_voice is not None else 'listener'}"


def _other_words(run: _Run, left: OtherSpeaker) -> dict[str, str]:
    """The fields every answer by elimination shows its evidence with: ``other``, and ``other_voice`` or the lip
    sync of the two (``r``, ``other_r``)."""
    if left.other_voice is not None:
        return {"other": who(run.graph, left.other), "other_voice": who(run.graph, left.other_voice)}
    r = "not measured" if left.r is None else f"{left.r:.2f}"
    return {"other": who(run.graph, left.other), "r": r, "other_r": f"{left.other_r or 0.0:.2f}"}


def _lip_words(run: _Run, likely: LikelySpeaker) -> dict[str, str]:
    """The fields every "most likely" answer shows its lip evidence with: ``r``, ``runner_r``, ``runner``."""
    runner, runner_r = likely.runner_up
    return {"r": f"r {likely.r:.2f}", "runner_r": f"{runner_r:.2f}", "runner": who(run.graph, runner)}


def _ever_seen(run: _Run) -> GraphAnswer | None:
    ref = run.plan.person
    found = run.resolve(ref if ref.heard else Reference("voice", ref.place, ref.time_s, ref.scene, ref.quote))
    if found is None or found.person is None:
        return None
    span = span_text(*found.window)
    faces = _sensed(run.graph.appearances(found.person, run.video_id), "seen")
    if faces:
        return run.answer("ever_seen_yes", span=span, who=who(run.graph, found.person), spans=run.spans_of(faces))
    said = found.utterance
    heard = (said.start_s, said.end_s) if said else found.window
    likely = _likely_face(run, found.person, *heard)
    if likely is not None:
        seen = _sensed(run.graph.appearances(likely.person, run.video_id), "seen")
        return run.answer("ever_seen_likely", span=span, who=who(run.graph, likely.person), spans=run.spans_of(seen),
                          **_lip_words(run, likely))
    left = _left_speaker(run, found.person, *heard)
    if left is not None:
        seen = _sensed(run.graph.appearances(left.person, run.video_id), "seen")
        return run.answer(_by("ever_seen", left), span=span, who=who(run.graph, left.person), spans=run.spans_of(seen),
                          **_other_words(run, left))
    seen_meanwhile = seen_while_heard(run.graph, found.person)
    if seen_meanwhile:
        listed = ", ".join(who(run.graph, p) for p in seen_meanwhile)
        return run.answer("ever_seen_unmatched", span=span, who=found.person.label, people=listed)
    return run.answer("ever_seen_no", span=span, who=who(run.graph, found.person))


def _count_people(run: _Run) -> GraphAnswer | None:
    ref = run.plan.person
    if ref.time_s is not None and run.plan.direction == "before":  # how many up to a time: from the start
        return _count_so_far(run)
    if _everyone(ref):  # "how many people appear in this video?": the whole video, not a guess from memories
        window = _whole_video(run)
        run.spans.append(window)
    else:
        found = run.resolve(Reference("none", "any", ref.time_s, ref.scene, ref.quote))
        if found is None:
            return None
        window = found.window
    if run.plan.sense == "heard":
        return _count_heard(run, window)
    moment = run.graph.at(run.video_id, *window)
    listed = [who(run.graph, s.person, s) for s in moment.on_screen]
    if run.plan.sense != "seen":  # the graph's one person count: off-screen linked speakers, voices over no face
        shown = {s.person.character_id for s in moment.on_screen}
        listed += [who(run.graph, p) for p in run.graph.count_people(run.video_id, *window).counted
                   if p.character_id not in shown]
    return run.answer("count", number=number_word(len(listed)), span=span_text(*window),
                      people=", ".join(listed) or "nobody")


def _everyone(ref: Reference) -> bool:
    """Whether a count names no moment and no kind of person or place: everyone in the video is counted."""
    return not ref.anchored and ref.kind in ("none", "person") and ref.place == "any" and ref.wears == "any"


def _whole_video(run: _Run) -> tuple[float, float]:
    """From the start to the video's end (its duration, else the end of its last stored clip)."""
    video = run.graph.store.get_video(run.video_id)
    if video.duration_s is not None and video.duration_s > 0:
        return 0.0, video.duration_s
    return 0.0, max((clip.end_s for clip, _, _ in run.graph.store.clips(run.video_id)), default=0.0)


def _count_heard(run: _Run, window: tuple[float, float]) -> GraphAnswer:
    """The people heard in ``window``, as a range when some voices are matched to no face but heard while people
    are seen: each may be one of the people already counted (a diarizer splits a shouting voice in overlapped
    speech), so the memory knows the fewest and the most, not the number."""
    people = run.graph.count_people(run.video_id, *window).heard
    unmatched = [p for p in people if not p.face_ids and seen_while_heard(run.graph, p)]
    sure = [who(run.graph, p) for p in people if p not in unmatched]
    number = number_word(len(people))
    listed = ", ".join(sure)
    if unmatched:
        fewest = max(len(sure), 1)
        number = f"{number_word(fewest)} to {number}" if fewest < len(people) else number
        voices = ", ".join(p.label for p in unmatched)
        more = f"{number_word(len(unmatched))} {'voice' if len(unmatched) == 1 else 'voices'} not matched to a face " \
               f"({voices}), which may be people already counted"
        listed = f"{listed}; {more}" if listed else more
    return run.answer("count", number=number, span=span_text(*window), people=listed or "nobody")


def _count_so_far(run: _Run) -> GraphAnswer | None:
    time_s = run.plan.person.time_s
    if _is_scene(run.plan.person):
        return _count_described(run, time_s)
    if time_s is None:
        if not _everyone(run.plan.person):
            return None
        time_s = _whole_video(run)[1]  # "so far" at no time: the whole video
    count = run.graph.count_people(run.video_id, 0.0, time_s)
    seen = count.seen if run.plan.sense == "seen" else count.counted
    run.spans.append((0.0, time_s))
    return run.answer("count_so_far", number=number_word(len(seen)).capitalize(), time=clock(time_s),
                      sense="seen" if run.plan.sense == "seen" else "seen or heard",
                      people=", ".join(who(run.graph, p) for p in seen) or "nobody")


def _count_scenes(run: _Run) -> GraphAnswer | None:
    if _is_scene(run.plan.person):
        return _count_described(run, run.plan.person.time_s if run.plan.so_far else None)
    found = run.resolve(run.plan.person)
    if found is None or found.person is None:
        return None
    apps = _sensed(run.graph.appearances(found.person, run.video_id), "seen")
    if not apps:  # the reference found someone only heard: not whom a count of scenes seen means
        return None
    return run.answer("count_scenes", number=number_word(len(apps)).capitalize(),
                      who=who(run.graph, found.person, found.sighting), spans=run.spans_of(apps))


def _voice_pitch(run: _Run) -> GraphAnswer | None:
    ref = run.plan.person
    found = run.resolve(ref if ref.heard or ref.kind in ("man", "woman", "person") else
                        Reference("voice", ref.place, ref.time_s, ref.scene, ref.quote))
    if found is None or found.person is None:
        return None
    register = run.graph.profile(found.person).attribute(Attribute.VOICE_REGISTER)
    if register is None or register[0] not in ("high", "low"):
        return None
    return run.answer("voice_pitch", register=register[0], who=who(run.graph, found.person, found.sighting),
                      span=span_text(*found.window))


def _position(run: _Run) -> GraphAnswer | None:
    """Where the person the plan names is at its moment: everyone on screen then who fits the description (gender,
    then glasses and clothes colour, each narrowing and never emptying the list, as the resolver reads them)."""
    found = run.resolve(run.plan.person)
    if found is None or found.person is None:
        return None
    moment = run.graph.at(run.video_id, *found.window)
    ref = run.plan.person
    fitting = [s for s in moment.on_screen if fits_gender(run.graph, s.person, ref.kind)]
    if not fitting:
        return None
    fitting = [s for s in fitting if fits_eyewear(run.graph, s.person, ref.wears)] or fitting
    fitting = [s for s in fitting if fits_clothes(run.graph, s.person, ref.dressed)] or fitting
    places = "; ".join(f"{sighting_place(s)} ({who(run.graph, s.person)})" for s in fitting)
    return run.answer("position", places=places, span=span_text(*found.window))


def _appearance(run: _Run) -> GraphAnswer | None:
    """How the person the plan names looks: the measured attributes of their profile (gender, age, glasses,
    voice), named by where they are at the moment."""
    found = run.resolve(run.plan.person)
    if found is None or found.person is None:
        return None
    looks = run.graph.profile(found.person).describe(usual_place=False)
    if not looks:
        return None
    return run.answer("appearance", who=who(run.graph, found.person, found.sighting), looks=looks,
                      span=span_text(*found.window))


def _still_or_live(run: _Run) -> GraphAnswer | None:
    ref = run.plan.person
    found = run.resolve(Reference("none", "any", ref.time_s, ref.scene, ref.quote))
    if found is None or found.shot is None or found.shot.kind not in KIND_TEXT:
        return None
    shot = found.shot
    run.spans.append((shot.start_s, shot.end_s))
    return run.answer("still_or_live", kind=KIND_TEXT[shot.kind or ""].capitalize(),
                      span=span_text(shot.start_s, shot.end_s))


def _anyone_there(run: _Run) -> GraphAnswer | None:
    ref = run.plan.person
    found = run.resolve(Reference("none", "any", ref.time_s, ref.scene, ref.quote))
    if found is None:
        return None
    moment = run.graph.at(run.video_id, *found.window)
    span = span_text(*found.window)
    if moment.on_screen:
        people = ", ".join(who(run.graph, s.person, s) for s in moment.on_screen)
        return run.answer("anyone_yes", people=people, span=span)
    voices = "; ".join(f"{who(run.graph, u.person)} is heard" for u in moment.speaking[:2]) or "nothing is heard"
    return run.answer("anyone_no", span=span, heard=voices)


# scenes described by their content -------------------------------------------
def _is_scene(ref: Reference) -> bool:
    """A reference to a scene by what is in it, not to a person at a moment ("the photo of two men")."""
    return bool(ref.about.strip()) and ref.kind in ("none", "photo") and not ref.quote.strip()


def _scenes_of(run: _Run, ref: Reference) -> list[Scene]:
    return matching_scenes(run.graph, run.video_id, describe_as(ref.about, ref.kind))


def _named(ref: Reference) -> str:
    """The scene as the question described it, in the answer's words."""
    return " ".join(ref.about.split())


def _bare_moment(ref: Reference) -> bool:
    """Only a clock time (a bound such as "up to 0:50" the model wrote as a second reference)."""
    return ref.kind == "none" and ref.time_s is not None and not ref.about and not ref.quote and ref.scene == "any"


def _when_scene(run: _Run, bound: float | None) -> GraphAnswer | None:
    """When the described scene of the plan's person is shown; with a ``bound`` ("so far" at a time), whether it
    was shown before it."""
    ref = run.plan.person
    found = _scenes_of(run, ref)
    what = _named(ref)
    if bound is None:
        if not found:
            return None
        return run.answer("scene_when", what=what, spans=_scene_spans(run, found))
    before = [s for s in found if s.start_s < bound]
    if before:
        return run.answer("scene_so_far_yes", what=what, time=clock(bound), spans=_scene_spans(run, before))
    later = f"it is first shown at {_scene_spans(run, found[:1])}" if found else "it is never shown"
    run.spans.append((0.0, bound))
    return run.answer("scene_so_far_no", what=what, time=clock(bound), later=later)


def _count_described(run: _Run, bound: float | None) -> GraphAnswer | None:
    """How many times a described scene is shown (up to ``bound``); "different" ones count once per distinct set
    of people on screen (a photo shown twice is one photo)."""
    ref = run.plan.person
    found = counted_scenes(run.graph, run.video_id, describe_as(ref.about, ref.kind), bound)
    if not found:  # never shown at all: the memories may know better; not by a bound: zero, the window cited
        if bound is None:
            return None
        run.spans.append((0.0, bound))
        return run.answer("scene_count_none", what=_named(ref), time=clock(bound))
    if run.plan.distinct:
        found = _distinct(run, found)
    return run.answer("scene_count", number=number_word(len(found)).capitalize(), what=_named(ref),
                      spans=_scene_spans(run, found))


def _distinct(run: _Run, found: list[Scene]) -> list[Scene]:
    seen: dict[frozenset[int], Scene] = {}
    for scene in found:
        moment = run.graph.at(run.video_id, scene.start_s, scene.end_s)
        people = frozenset(s.person.character_id for s in moment.on_screen)
        seen.setdefault(people or frozenset({-len(seen) - 1}), scene)  # nobody on screen: each one counts
    return list(seen.values())


def _scene_spans(run: _Run, found: list[Scene]) -> str:
    run.spans += [(s.start_s, s.end_s) for s in found[:MAX_SPANS]]
    listed = ", ".join(span_text(s.start_s, s.end_s) for s in found[:MAX_SPANS])
    return listed + (f" and {len(found) - MAX_SPANS} more times" if len(found) > MAX_SPANS else "")


_OPERATIONS: dict[str, Callable[[_Run], GraphAnswer | None]] = {
    "seen_again": _seen_again,
    "same_person": _same_person,
    "when": _when,
    "after": lambda run: _neighbour(run, after=True),
    "before": lambda run: _neighbour(run, after=False),
    "which_first": _which_first,
    "scene": _scene,
    "who_speaks": _who_speaks,
    "speaks": _speaks,
    "ever_seen": _ever_seen,
    "count_people": _count_people,
    "count_so_far": _count_so_far,
    "count_scenes": _count_scenes,
    "voice_pitch": _voice_pitch,
    "position": _position,
    "appearance": _appearance,
    "still_or_live": _still_or_live,
    "anyone_there": _anyone_there,
}
