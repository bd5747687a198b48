"""The video page as a timeline of people and shots, in Chromium under a strict Content-Security-Policy: one lane
per person with when they are seen and when they speak, the shots (still or live, scene changes, how many people
by the graph's one count), on-screen text and sounds; the bars under the playhead follow playback and a click on a
lane seeks the player; a memory or evidence link that seeks keeps the player in view and marks the memory.

The memory is synthetic over a real, playable video (13.4 s): a host (named) and a guest seen at 0:01-0:03, the
host's linked voice at 0:04-0:06, the guest again at 0:08-0:09, a narrator (a voice linked to no face) at
0:10.5-0:12.5 over a dark screen; shots live 0-7, still 7-10, live 10-13.4. Screenshots go to out/screenshots/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from browser_helpers import navigates, overflow, shot, strict_csp, wait
from m3agent.domain import (
    BBox,
    Clip,
    EntityKind,
    FaceObservation,
    FaceVoiceLink,
    LinkSource,
    Memory,
    MemoryKind,
    ShotRecord,
    Video,
    VoiceSegment,
)
from m3agent.memorize.scene_memories import PROVENANCE
from m3agent.server.app import create_app
from m3agent.settings import load_settings
from m3agent.store import open_store
from server_helpers import EMBEDDER, jpeg, live_server, tone

pytestmark = [pytest.mark.slow, pytest.mark.media, pytest.mark.usefixtures("no_csp_violation")]
DEBATE = "iianet_debate_trump_clinton.mp4"  # H.264: plays in the browser
DURATION = 13.4
SHOTS = ((0.0, 7.0, "live"), (7.0, 10.0, "still"), (10.0, DURATION, "live"))
TALK = 24  # ordinary memories, enough to make the page taller than the window


def memory(video: str, text: str, start: float, end: float, entities: tuple[int, ...] = (),
           scene: bool = False) -> Memory:
    return Memory(MemoryKind.EPISODIC, text, video, 0, start, end, entities,
                  provenance=PROVENANCE if scene else "test", embedding=EMBEDDER.embed([text])[0])


def write(path: Path, source: Path) -> dict[str, int]:
    """The memory of the module's docstring; returns the entity ids and the last ordinary memory's id."""
    store = open_store(str(path))
    store.set_embedding_model(EMBEDDER.name, EMBEDDER.dim)
    faces, voices = np.eye(128, dtype=np.float32), np.eye(256, dtype=np.float32)
    with store:
        store.add_video(Video("lanes", str(source), duration_s=DURATION, metadata={"width": 1280, "height": 720}))
        with store.clip(Clip("lanes", 0, 0.0, DURATION)) as w:
            host, guest = (w.add_entity(EntityKind.FACE, [faces[i]]).id for i in (0, 1))
            host_voice, narrator = (w.add_entity(EntityKind.VOICE, [voices[i]]).id for i in (0, 1))
            sightings = [(host, 40, t) for t in (1.0, 1.5, 2.0, 2.5, 3.0)]
            sightings += [(guest, 1100, t) for t in (1.0, 1.5, 2.0, 2.5, 3.0, 8.0, 8.5, 9.0)]
            for entity, x, t in sightings:
                w.add_face(FaceObservation(0, t, BBox(x, 100, x + 96, 228), 0.99, quality=0.9, track=entity,
                                           crop_jpeg=jpeg(60 if entity == host else 180), entity_id=entity))
            for start, end, entity, text in ((4.0, 6.0, host_voice, "welcome to the debate"),
                                             (10.5, 12.5, narrator, "and now a word from our sponsors")):
                w.add_voice(VoiceSegment(0, start, end, text, speaker=0, embedding=voices[entity % 256],
                                         entity_id=entity), tone(end - start))
            w.set_link(FaceVoiceLink(host, host_voice, 0.9, LinkSource.MANUAL, "test"))
            for start, end, kind in SHOTS:
                w.add_shot(ShotRecord("lanes", 0, start, end, True, kind, 0.9))
            w.add_memory(memory("lanes", f"Shot 0:00–0:07: on screen <face_{host}> (on the left), <face_{guest}> "
                                         f"(on the right); speaking <voice_{host_voice}>.", 0.0, 7.0,
                                (host, guest, host_voice), scene=True))
            w.add_memory(memory("lanes", f'Shot 0:07–0:10 (after a scene change): on screen <face_{guest}>; '
                                         f'text "Breaking news".', 7.0, 10.0, (guest,), scene=True))
            w.add_memory(memory("lanes", "Shot 0:10–0:13 (after a scene change): speaking "
                                         f"<voice_{narrator}>; sounds: applause.", 10.0, DURATION, (narrator,),
                                scene=True))
            w.add_memory(memory("lanes", 'On screen 0:08–0:09: "Breaking news"', 8.0, 9.0, scene=True))
            last = 0
            for i in range(TALK):
                last = w.add_memory(memory("lanes", f"Remark {i}: the panel discusses item {i} of the agenda at "
                                                    "some length, with figures and a long aside.", i / 2, i / 2 + 1,
                                           (host,)))
    return {"host": host, "guest": guest, "host_voice": host_voice, "narrator": narrator, "last": last}


@pytest.fixture(scope="module")
def served(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = media_dir / "video"
    if not (folder / DEBATE).is_file():
        pytest.skip(f"the shared video {DEBATE} is absent")
    path = tmp_path_factory.mktemp("inspector-lanes") / "memory.db"
    ids = write(path, folder / DEBATE)
    settings = load_settings(memory=str(path), llm="none", server={"allowed_folders": [str(folder)]})
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        people = {k: httpx.get(f"{url}/api/entities/{ids[k]}").json()["character"]
                  for k in ("host", "guest", "narrator")}
        assert httpx.patch(f"{url}/api/characters/{people['host']}", json={"name": "Moderator"}).status_code == 200
        yield {"url": url, "last": ids["last"], **people}



def attr(element: Any, name: str) -> str:
    """An element's attribute, "" when it has none."""
    return str(element.get_attribute(name) or "")


def open_video(browser: WebDriver, url: str, query: str = "") -> None:
    browser.get(f"{url}/videos/lanes{query}")
    wait(browser, lambda b: b.execute_script("return document.getElementById('player').readyState") >= 1)


def bars(lane: Any) -> list[tuple[str, float, float]]:
    return [(attr(b, "data-kind"), float(attr(b, "data-start")), float(attr(b, "data-end")))
            for b in lane.find_elements(By.CSS_SELECTOR, ".bar")]


def placed(browser: WebDriver, bar: Any) -> tuple[float, float]:
    """Where ``bar`` is drawn: its left edge and width as seconds of the video, read from the layout."""
    box = browser.execute_script("const b = arguments[0].getBoundingClientRect(), "
                                 "t = arguments[0].parentElement.getBoundingClientRect();"
                                 "return [b.left - t.left, b.width, t.width];", bar)
    return box[0] / box[2] * DURATION, box[1] / box[2] * DURATION


def player_time(browser: WebDriver) -> float:
    return float(browser.execute_script("return document.getElementById('player').currentTime"))


def follows(browser: WebDriver, t: float) -> None:
    """Set the player's time in script and wait until the lanes have followed it."""
    browser.execute_script("document.getElementById('player').currentTime = arguments[0]", t)
    wait(browser, lambda b: attr(b.find_element(By.ID, "swimlanes"), "data-t") == str(t).removesuffix(".0"))


def active(browser: WebDriver) -> set[str]:
    return {attr(lane, "id") for lane in browser.find_elements(By.CSS_SELECTOR, "#swimlanes .lane.active")}


def test_lanes_show_people_shots_text_and_sounds(served: dict[str, Any], browser: WebDriver) -> None:
    open_video(browser, served["url"])
    host, guest, narrator = served["host"], served["guest"], served["narrator"]
    lanes = browser.find_elements(By.CSS_SELECTOR, "#swimlanes .lane-person")
    assert [int(attr(lane, "data-character")) for lane in lanes] == [min(host, guest), max(host, guest),
                                                                             narrator]
    by_person = {int(attr(lane, "data-character")): lane for lane in lanes}
    assert bars(by_person[host]) == [("seen", 1.0, 3.0), ("speaking", 4.0, 6.0)]
    assert bars(by_person[guest]) == [("seen", 1.0, 3.0), ("seen", 8.0, 9.0)]
    assert bars(by_person[narrator]) == [("speaking", 10.5, 12.5)]
    wait(browser, lambda b: by_person[host].find_element(By.CSS_SELECTOR, "a.person").text == "Moderator")
    for lane in lanes:  # drawn where their times are, on a track as wide as the video
        for bar, (_, start, end) in zip(lane.find_elements(By.CSS_SELECTOR, ".bar"), bars(lane), strict=True):
            left, width = placed(browser, bar)
            assert left == pytest.approx(start, abs=0.05) and width == pytest.approx(end - start, abs=0.05)

    shots = browser.find_elements(By.CSS_SELECTOR, "#lane-shots .bar")
    assert bars(browser.find_element(By.ID, "lane-shots")) == [(k, a, b) for a, b, k in SHOTS]
    assert [attr(s, "data-people") for s in shots] == ["2", "1", "1"]  # the narrator over a dark screen
    assert all("opens" in attr(s, "class") for s in shots[1:])
    assert [s.text for s in shots] == ["live · 2", "still · 1", "live · 1"]
    notes = browser.find_element(By.ID, "lane-notes")
    assert bars(notes) == [("text", 8.0, 9.0), ("sound", 10.0, DURATION)]
    assert '"Breaking news"' in attr(notes.find_elements(By.CSS_SELECTOR, ".bar")[0], "title")
    assert "sounds: applause" in attr(notes.find_elements(By.CSS_SELECTOR, ".bar")[1], "title")
    assert overflow(browser) == 0
    shot(browser, "video-swimlanes")


def test_clicking_a_lane_seeks_and_the_lanes_follow_playback(served: dict[str, Any], browser: WebDriver) -> None:
    open_video(browser, served["url"])
    host, guest = f"lane-person-{served['host']}", f"lane-person-{served['guest']}"
    track = browser.find_element(By.CSS_SELECTOR, f"#{guest} .track")
    width = track.rect["width"]
    ActionChains(browser).move_to_element_with_offset(track, int((8.5 / DURATION - 0.5) * width), 0).click().perform()
    wait(browser, lambda b: abs(player_time(b) - 8.5) < 0.1)
    wait(browser, lambda b: "still" in b.find_element(By.ID, "shot-now").text)
    assert active(browser) == {guest, "lane-shots", "lane-notes"}  # the guest and "Breaking news" at 0:08.5
    assert "1 person" in browser.find_element(By.ID, "shot-now").text
    assert "Breaking news" in browser.find_element(By.ID, "shot-now").text

    follows(browser, 5)
    assert active(browser) == {host, "lane-shots"}
    current = browser.find_elements(By.CSS_SELECTOR, "#swimlanes .bar.current")
    assert [(attr(b, "data-kind"), attr(b, "data-start")) for b in current] == [
        ("live", "0.0"), ("speaking", "4.0")]
    shot_now = browser.find_element(By.ID, "shot-now")
    wait(browser, lambda b: "Moderator" in shot_now.text)  # the summary's tags name people
    assert "live · 2 people" in shot_now.text
    head = browser.find_element(By.CSS_SELECTOR, f"#{host} .playhead")
    assert placed(browser, head)[0] == pytest.approx(5.0 - 1 / width * DURATION, abs=0.1)  # centred on 5 s
    follows(browser, 11.5)
    assert active(browser) == {f"lane-person-{served['narrator']}", "lane-shots", "lane-notes"}
    shot(browser, "video-swimlanes-following")


def test_a_memory_link_keeps_the_player_in_view_and_marks_the_memory(served: dict[str, Any],
                                                                      browser: WebDriver) -> None:
    open_video(browser, served["url"])
    box = browser.find_element(By.ID, "player-box")
    assert "pinned" not in attr(box, "class")
    last = browser.find_element(By.CSS_SELECTOR, f".memory[data-memory='{served['last']}']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", last)
    last.find_element(By.CSS_SELECTOR, "a.seek").click()
    wait(browser, lambda b: abs(player_time(b) - (TALK - 1) / 2) < 0.1)
    assert "pinned" in attr(box, "class") and "cited" in attr(last, "class")
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    assert in_view(browser, "player")
    shot(browser, "video-pinned-cited")
    assert browser.execute_script("return document.body.scrollHeight > window.innerHeight + 200")


def in_view(browser: WebDriver, element_id: str) -> bool:
    return bool(browser.execute_script("const r = document.getElementById(arguments[0]).getBoundingClientRect();"
                                       "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;",
                                       element_id))


def test_an_evidence_link_seeks_pins_and_marks_the_cited_memory(served: dict[str, Any], browser: WebDriver) -> None:
    url, cited = served["url"], served["last"]
    answer = {"text": "they discuss the agenda", "mode": "agent", "rounds": 1, "searches": [],
              "evidence": [{"memory_id": cited, "video_id": "lanes", "clip_index": 0, "start_s": 6.0,
                            "cited": True, "text": "Remark: the panel discusses the agenda"}]}
    browser.get(f"{url}/ask")
    browser.execute_script("localStorage.clear(); localStorage.setItem('m3agent.ask.history', arguments[0])",
                           json.dumps([{"question": "What is discussed?", "video": "", "answer": answer, "at": 0}]))
    browser.refresh()
    link = wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#answer a.citation"))
    assert attr(link, "href").endswith(f"/videos/lanes?t=6&m={cited}#clip-0")
    navigates(browser, link.click)
    wait(browser, lambda b: abs(player_time(b) - 6.0) < 0.1)
    memory_ = browser.find_element(By.CSS_SELECTOR, f".memory[data-memory='{cited}']")
    assert "cited" in attr(memory_, "class")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".memory.cited")) == 1
    assert "pinned" in attr(browser.find_element(By.ID, "player-box"), "class")
    assert in_view(browser, "player")


def test_the_video_page_holds_at_800_px(served: dict[str, Any], browser: WebDriver) -> None:
    browser.set_window_size(800, 900)
    try:
        open_video(browser, served["url"])
        assert overflow(browser) == 0
        shot(browser, "video-swimlanes-800")
    finally:
        browser.set_window_size(1280, 1000)
