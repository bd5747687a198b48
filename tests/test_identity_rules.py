"""Identity matching: margin rule, co-occurrence constraint, deterministic banks, AV links."""

from __future__ import annotations

import dataclasses

import numpy as np

from m3agent.domain import BBox, FaceObservation, FaceVoiceLink, LinkSource, VoiceSegment
from m3agent.identity.banks import MatchRule, assign, score_matrix, unit_rows, update_bank
from m3agent.identity.linking import AVEvidence, LinkRule, collect_evidence, decide_links, revisions

RNG = np.random.default_rng(7)


def around(centre: np.ndarray, n: int, noise: float) -> np.ndarray:
    return unit_rows(centre + noise * RNG.standard_normal((n, centre.size)).astype(np.float32))


def test_candidate_joins_the_clearly_best_entity() -> None:
    a, b = unit_rows(RNG.standard_normal((2, 64)).astype(np.float32))
    banks = [around(a, 5, 0.05), around(b, 5, 0.05)]
    scores = score_matrix([around(a, 2, 0.05), around(b, 2, 0.05)], banks, top=3)
    assert assign(scores, set(), MatchRule(threshold=0.8)) == [0, 1]


def test_ambiguous_candidate_founds_a_new_entity() -> None:
    a = unit_rows(RNG.standard_normal((1, 64)).astype(np.float32))[0]
    banks = [around(a, 5, 0.05), around(a, 5, 0.05)]  # two entities that look alike
    scores = score_matrix([around(a, 2, 0.05)], banks, top=3)
    assert assign(scores, set(), MatchRule(threshold=0.8, margin=0.05)) == [None]


def test_weak_match_founds_a_new_entity() -> None:
    a, b = unit_rows(RNG.standard_normal((2, 64)).astype(np.float32))
    scores = score_matrix([around(b, 2, 0.05)], [around(a, 5, 0.05)], top=3)
    assert assign(scores, set(), MatchRule(threshold=0.8)) == [None]


def test_co_occurring_candidates_never_share_an_entity() -> None:
    a = unit_rows(RNG.standard_normal((1, 64)).astype(np.float32))[0]
    scores = score_matrix([around(a, 2, 0.03), around(a, 2, 0.04)], [around(a, 5, 0.03)], top=3)
    rule = MatchRule(threshold=0.8)
    assert assign(scores, {(0, 1)}, rule).count(0) == 1
    assert assign(scores, set(), rule) == [0, 0]


def test_a_split_voice_rejoins_its_entity_only_past_the_bar_and_never_over_a_hard_conflict() -> None:
    a, b = unit_rows(RNG.standard_normal((2, 64)).astype(np.float32))
    # Two speakers of one clip, both the entity's voice (the diarizer split it); a third entity is far off.
    scores = score_matrix([around(a, 2, 0.03), around(a, 2, 0.06)], [around(a, 5, 0.03), around(b, 5, 0.03)], top=3)
    assert assign(scores, {(0, 1)}, MatchRule(threshold=0.8)) == [0, None]
    assert assign(scores, {(0, 1)}, MatchRule(threshold=0.8, rejoin=0.8), hard=set()) == [0, 0]
    assert assign(scores, {(0, 1)}, MatchRule(threshold=0.8, rejoin=0.8), hard={(0, 1)}) == [0, None]
    assert assign(scores, {(0, 1)}, MatchRule(threshold=0.8, rejoin=0.999), hard=set()) == [0, None]


def test_a_blocked_speaker_takes_a_free_entity_that_fits_before_rejoining() -> None:
    a = unit_rows(RNG.standard_normal((1, 64)).astype(np.float32))[0]
    # Two entities that look alike (two men of one interview): the second speaker goes to the free one.
    banks = [around(a, 5, 0.02), around(a, 5, 0.06)]
    scores = score_matrix([around(a, 2, 0.02), around(a, 2, 0.03)], banks, top=3)
    rule = MatchRule(threshold=0.5, margin=0.0, rejoin=0.5)
    assert assign(scores, {(0, 1)}, rule, hard=set()) == [0, 1]


def test_bank_update_is_capped_deterministic_and_keeps_variety() -> None:
    a, b = unit_rows(RNG.standard_normal((2, 32)).astype(np.float32))
    bank = np.concatenate([around(a, 12, 0.01), around(b, 2, 0.01)])
    new = around(a, 4, 0.01)
    first = update_bank(bank, new, cap=5)
    again = update_bank(bank.copy(), new.copy(), cap=5)
    assert first.shape == (5, 32)
    assert np.array_equal(first, again)
    assert (first @ b).max() > 0.9, "the rare view (b) must survive the cap"


def face(entity: int, t: float) -> FaceObservation:
    return FaceObservation(clip_index=0, time_s=t, bbox=BBox(0, 0, 10, 10), det_score=0.99, entity_id=entity)


def voice(entity: int, start: float, end: float) -> VoiceSegment:
    return VoiceSegment(clip_index=0, start_s=start, end_s=end, text="hi", entity_id=entity)


def test_lone_face_while_a_voice_speaks_is_linked() -> None:
    faces = [face(1, t / 2) for t in range(20)] + [face(2, 10 + t / 2) for t in range(20)]
    voices = [voice(7, 0, 9.5), voice(8, 10, 19.5)]
    links = decide_links(collect_evidence(faces, voices, fps=2), LinkRule())
    assert sorted((e.face_id, e.voice_id) for e in links) == [(1, 7), (2, 8)]
    assert all(e.confidence > 0.9 and e.source == "av" for e in links)


def test_two_faces_always_together_give_no_link() -> None:
    faces = [face(e, t / 2) for t in range(40) for e in (1, 2)]
    voices = [voice(7, 0, 9.5), voice(8, 10, 19.5)]
    assert decide_links(collect_evidence(faces, voices, fps=2), LinkRule()) == []


def test_voice_heard_off_screen_is_not_linked() -> None:
    faces = [face(1, t / 2) for t in range(4)]  # on screen 2 s of a 10 s speech
    assert decide_links(collect_evidence(faces, [voice(7, 0, 10)], fps=2), LinkRule()) == []


def test_dropped_av_link_is_revoked_and_others_are_kept() -> None:
    current = [FaceVoiceLink(1, 7, 0.9, LinkSource.AV), FaceVoiceLink(3, 9, 1.0, LinkSource.MANUAL)]
    evidence = AVEvidence({(1, 7): 2.0}, {7: 10.0})
    [revoked] = revisions(current, [], evidence)
    assert (revoked.face_id, revoked.voice_id, revoked.confidence, revoked.source) == (1, 7, 0.0, LinkSource.AV)
    assert revoked.evidence.startswith("revoked: face on screen 2.0 s of the voice's 10.0 s")
    assert revisions(current, [FaceVoiceLink(1, 7, 0.91, LinkSource.AV)], evidence) == []


def test_mutual_best_is_required() -> None:
    evidence = AVEvidence({(1, 7): 5.0, (1, 8): 9.0}, {7: 6.0, 8: 10.0})
    links = decide_links(evidence, LinkRule())
    assert [(e.face_id, e.voice_id) for e in links] == [(1, 8)]


def test_links_are_matched_by_role_when_the_voice_id_is_smaller() -> None:
    """A voice created before its face has the smaller id; the pair is still the same link."""
    evidence = AVEvidence({(5, 2): 9.0}, {2: 10.0})
    [link] = decide_links(evidence, LinkRule())
    assert (link.face_id, link.voice_id) == (5, 2)
    assert link.evidence == "face on screen 9.0 s of the voice's 10.0 s of speech"
    assert revisions([link], [link], evidence) == []


def talking(entity: int, t: float, motion: float) -> FaceObservation:
    return FaceObservation(clip_index=0, time_s=t, bbox=BBox(0, 0, 10, 10), det_score=0.99, entity_id=entity,
                           mouth_motion=motion)


def alternating_debate(lips_of: dict[int, int]) -> tuple[list[FaceObservation], list[VoiceSegment]]:
    """Faces 1 and 2 on screen together for 40 s at 2 fps; voices 7 and 8 take 2 s turns. Face ``f``'s mouth
    moves (with noise) while voice ``lips_of[f]`` speaks."""
    rng = np.random.default_rng(3)
    voices = [voice(7 if k % 2 == 0 else 8, 2.0 * k, 2.0 * k + 1.9) for k in range(20)]
    speaking = {7: lambda t: int(t // 2) % 2 == 0, 8: lambda t: int(t // 2) % 2 == 1}
    faces = []
    for step in range(1, 80):
        t = step / 2
        for entity in (1, 2):
            moving = speaking[lips_of[entity]](t - 0.25) if entity in lips_of else False
            faces.append(talking(entity, t, 0.3 * moving + 0.1 * float(rng.standard_normal())))
    return faces, voices


def test_lips_that_move_with_a_voice_link_it_when_both_faces_are_always_on_screen() -> None:
    faces, voices = alternating_debate({1: 8, 2: 7})
    links = decide_links(collect_evidence(faces, voices, fps=2), LinkRule())
    assert sorted((e.face_id, e.voice_id) for e in links) == [(1, 8), (2, 7)]
    assert all(e.source == LinkSource.AV and e.confidence >= 0.75 and "lips move" in e.evidence for e in links)
    no_motion = [dataclasses.replace(f, mouth_motion=None) for f in faces]
    assert decide_links(collect_evidence(no_motion, voices, fps=2), LinkRule()) == [], "co-presence cannot tell"


def test_lips_that_move_with_every_voice_settle_nothing() -> None:
    faces, voices = alternating_debate({})  # nobody's mouth follows the speech: noise only
    assert decide_links(collect_evidence(faces, voices, fps=2), LinkRule()) == []
    evidence = collect_evidence(faces, voices, fps=2)
    assert set(evidence.lip_sync) == {(1, 7), (1, 8), (2, 7), (2, 8)}
    assert all(abs(s.r) < 0.4 and s.samples == 79 for s in evidence.lip_sync.values())


def test_a_lone_face_is_linked_by_co_presence_whatever_its_lips_do() -> None:
    faces = [talking(1, t / 2, -0.2 if t % 3 else 0.4) for t in range(1, 20)]
    [link] = decide_links(collect_evidence(faces, [voice(7, 0, 9.5)], fps=2), LinkRule())
    assert (link.face_id, link.voice_id) == (1, 7) and "lips" not in link.evidence


def test_lip_sync_counts_the_part_of_each_interval_the_voice_speaks() -> None:
    """Mouth motion equal to the voice's share of each 0.5 s interval (partial overlaps included,
    overlapping segments counted once) correlates perfectly."""
    from m3agent.identity.linking import lip_sync

    spans = [(1.0, 2.0, 7), (1.5, 1.8, 7), (3.0, 3.5, 7), (0.0, 9.0, 8)]
    share = {1.5: 1.0, 2.25: 0.5, 3.0: 0.0, 3.25: 0.5, 3.75: 0.5, 4.5: 0.0}
    motions = [(t, 1, value) for t, value in share.items()]
    sync = lip_sync(motions, spans, step=0.5)
    assert sync[(1, 7)].r == 1.0 and sync[(1, 7)].samples == 6
    assert sync[(1, 7)].speech_seconds == 1.25
    assert (1, 8) not in sync, "a voice speaking in every interval says nothing about the lips"


def test_speech_turns_bridge_a_voices_short_pauses_and_split_a_change_of_voice_in_the_pause() -> None:
    """Lip sync compares the lips with turns, not with where the ASR model cut its segments."""
    from m3agent.identity.linking import speech_turns

    spans = [(0.0, 1.0, 7), (1.3, 2.0, 7),  # a 0.3 s pause inside 7's turn
             (2.4, 3.0, 8), (3.5, 3.5, 8),  # 8 takes over after 0.4 s; a word whose timestamps collapsed
             (5.0, 6.0, 8), (5.5, 5.8, 7), (6.2, 7.0, 8),  # 1.5 s of silence; 7 says a word over 8's turn
             (8.0, 9.0, 7), (9.2, 9.3, 8), (9.5, 10.0, 7)]  # 8 speaks in 7's pause: 7 starts a new turn
    turns = [(round(a, 6), round(b, 6), v) for a, b, v in speech_turns(spans, max_pause=0.6)]
    assert turns == [(0.0, 2.2, 7), (2.2, 3.5, 8), (5.0, 7.0, 8), (5.5, 5.8, 7),
                     (8.0, 9.1, 7), (9.1, 9.4, 8), (9.4, 10.0, 7)]


def test_a_tolerant_share_is_the_mean_share_of_the_shifted_intervals() -> None:
    """Speech bounds known to +-0.3 s: each interval's share is averaged over that much shift, exactly."""
    from m3agent.identity.linking import SpeechClock

    clock = SpeechClock.of([(3.0, 3.5), (1.0, 2.0), (1.5, 1.8)])
    times = np.linspace(0.0, 5.0, 41)
    offsets = np.linspace(-0.3, 0.3, 3001)
    mean = np.mean([clock.share(times + u, 0.5) for u in offsets], axis=0)
    assert np.allclose(clock.share(times, 0.5, tolerance=0.3), mean, atol=1e-3)
    exact = clock.share(np.array([1.5, 2.25, 3.0, 3.25, 3.75]), 0.5)
    assert np.allclose(exact, [1.0, 0.5, 0.0, 0.5, 0.5]), "no tolerance: the plain share, overlaps counted once"


def test_a_voice_whose_speech_no_lips_follow_is_not_linked() -> None:
    """An off-screen voice (a moderator) speaks between the two on-screen speakers. Face 1 keeps still
    while it speaks, face 2 nods along a little: face 2 beats face 1 by far, but its lips do not move
    with the voice more than without it, so the voice goes to neither, however its bounds are shifted."""
    rng = np.random.default_rng(5)
    voices = [voice((7, 8, 9)[k % 3], 2.0 * k, 2.0 * k + 1.8) for k in range(30)]
    level = {1: {7: 0.3, 8: 0.0, 9: 0.0}, 2: {7: 0.0, 8: 0.3, 9: 0.12}}  # mouth motion by who speaks
    faces = []
    for step in range(1, 120):
        t = step / 2
        speaker = (7, 8, 9)[int((t - 0.25) // 2) % 3]
        faces += [talking(entity, t, level[entity][speaker] + 0.1 * float(rng.standard_normal())) for entity in (1, 2)]
    for _ in range(5):
        moved = [dataclasses.replace(v, start_s=v.start_s + rng.uniform(-0.3, 0.3),
                                     end_s=v.end_s + rng.uniform(-0.3, 0.3)) for v in voices]
        evidence = collect_evidence(faces, moved, fps=2)
        assert sorted((e.face_id, e.voice_id) for e in decide_links(evidence, LinkRule())) == [(1, 7), (2, 8)]
        assert (2, 9) in {(e.face_id, e.voice_id) for e in decide_links(evidence, LinkRule(lip_min_r=-1.0))}, \
            "without the floor on the face's own correlation the moderator would go to the nodding face"


def test_a_voice_continues_over_the_boundary_only_when_it_speaks_on_both_sides_of_it() -> None:
    """The diarizer heard speaker 0 before the clip (22.0-23.7 s) and again 14.7 s later: two people it clustered,
    not one voice running over the boundary; speaker 1 pauses 5.1 s and goes on."""
    from m3agent.domain import CarriedTurn
    from m3agent.identity.resolver import _running_over

    voices = {0: [VoiceSegment(1, 38.4, 48.2, "we remember", speaker=0)],
              1: [VoiceSegment(1, 35.1, 37.0, "and so", speaker=1)]}
    carried = [CarriedTurn(0, 22.0, 23.7), CarriedTurn(1, 27.0, 29.0), CarriedTurn(1, 29.2, 30.0),
               CarriedTurn(2, 28.0, 30.0)]
    assert _running_over(voices, carried) == carried[1:3], "speaker 2 is not heard in the clip at all"
