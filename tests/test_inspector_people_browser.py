"""The inspector's people in Chromium (Selenium) under a strict Content-Security-Policy: the People page with
crops, a voice to play, names or measured descriptions, filters and pages; a person's page with what was
measured, appearances and the people seen with them; answers and evidence that name people instead of showing
bare tags. The memory is small and synthetic (tests/server_helpers.py plus a meeting, a voice-only speaker and
measured attributes); screenshots go to ``out/screenshots/``.
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
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from browser_helpers import images_loaded, navigates, overflow, shot, strict_csp, wait
from m3agent.domain import BBox, Clip, EntityAttribute, EntityKind, FaceObservation, Video, VoiceSegment
from m3agent.server.app import create_app
from m3agent.server.web import people_pages
from m3agent.settings import load_settings
from m3agent.store import open_store
from server_helpers import build_memory, jpeg, live_server, tone

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_csp_violation")]
NAME = '<i>Anna</i> & "Co" ' + "Bartholomew-Maximilian-" * 7 + "X" * 20  # 200 characters: markup, no space


def add_people(path: Path, face: int, stranger: int) -> int:
    """A meeting where the chef and the stranger share the screen, a park where only a voice is heard, and
    measured attributes: the stranger usually on the left and male, the voice low. Returns the voice's id."""
    store = open_store(str(path))
    with store:
        store.add_video(Video("meet", "/nowhere/meet.mp4", duration_s=20.0))
        store.add_video(Video("park", "/nowhere/park.mp4", duration_s=20.0))
        with store.clip(Clip("meet", 0, 0.0, 20.0)) as w:
            for t in (3.0, 4.0, 5.0):
                for entity, shade in ((face, 70), (stranger, 150)):
                    w.add_face(FaceObservation(0, t, BBox(0, 0, 48, 64), 0.99, quality=0.9, track=entity,
                                               crop_jpeg=jpeg(shade), entity_id=entity))
            w.add_attribute(EntityAttribute(stranger, "meet", 0, "position", "left", 0.95, 5))
            w.add_attribute(EntityAttribute(stranger, "meet", 0, "apparent_gender", "male", 0.9, 3))
        with store.clip(Clip("park", 0, 0.0, 20.0)) as w:
            voice = w.add_entity(EntityKind.VOICE, [np.eye(256, dtype=np.float32)[3]]).id
            w.add_voice(VoiceSegment(0, 2.0, 6.0, "lovely weather for a walk", speaker=0,
                                     embedding=np.eye(256, dtype=np.float32)[3], entity_id=voice), tone(2.0))
            w.add_attribute(EntityAttribute(voice, "park", 0, "voice_register", "low", 0.9, 4))
    return voice


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    memory = tmp_path_factory.mktemp("inspector-people") / "memory.db"
    built = build_memory(memory)
    voice = add_people(memory, built.face, built.stranger)
    settings = load_settings(memory=str(memory), llm="none")
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        people = {e: httpx.get(f"{url}/api/entities/{e}").json()["character"]
                  for e in (built.face, built.stranger, voice)}
        chef, stranger, speaker = people[built.face], people[built.stranger], people[voice]
        assert httpx.patch(f"{url}/api/characters/{chef}", json={"name": NAME}).status_code == 200
        yield {"url": url, "built": built, "chef": chef, "stranger": stranger, "speaker": speaker, "voice": voice}



def cards(browser: WebDriver) -> dict[int, Any]:
    return {int(c.get_attribute("data-character")): c for c in browser.find_elements(By.CSS_SELECTOR, "#people .card")}


def filter_people(browser: WebDriver, video: str = "", named: str = "", words: str = "") -> dict[int, Any]:
    form = browser.find_element(By.ID, "people-filter")
    Select(form.find_element(By.NAME, "video")).select_by_value(video)
    Select(form.find_element(By.NAME, "named")).select_by_value(named)
    box = form.find_element(By.NAME, "q")
    box.clear()
    box.send_keys(words)
    navigates(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]").click)
    return cards(browser)


def test_people_page_lists_crops_voices_descriptions_and_filters(served: dict[str, Any],
                                                                 browser: WebDriver) -> None:
    url, chef, stranger, speaker = served["url"], served["chef"], served["stranger"], served["speaker"]
    browser.get(f"{url}/")
    browser.find_element(By.ID, "nav-people").click()
    wait(browser, lambda b: b.current_url.endswith("/people"))
    assert browser.find_element(By.ID, "nav-people").get_attribute("aria-current") == "page"
    assert browser.find_element(By.ID, "nav-videos").get_attribute("aria-current") is None
    wait(browser, images_loaded)
    shown = cards(browser)
    assert set(shown) == {chef, stranger, speaker}
    assert shown[chef].find_element(By.CLASS_NAME, "name").text == NAME  # shown as text, not markup
    assert not shown[chef].find_elements(By.TAG_NAME, "i")
    assert "talk" in shown[chef].text and "meet" in shown[chef].text
    assert "first talk 0:02" in shown[chef].text and "last meet 0:03" in shown[chef].text
    assert "usually on the left; appears male" in shown[stranger].find_element(By.CLASS_NAME, "description").text
    assert shown[stranger].find_element(By.CLASS_NAME, "name").text == "unnamed"
    assert "a low voice" in shown[speaker].text and not shown[speaker].find_elements(By.TAG_NAME, "img")
    play = shown[speaker].find_element(By.CSS_SELECTOR, "button.play")
    assert play.get_attribute("data-audio") == f"/api/entities/{served['voice']}/media/0"
    assert httpx.get(url + play.get_attribute("data-audio")).headers["content-type"].startswith("audio/")
    assert overflow(browser) == 0
    shot(browser, "people")

    assert set(filter_people(browser, video="park")) == {speaker}
    assert set(filter_people(browser, named="named")) == {chef}
    assert set(filter_people(browser, named="unnamed")) == {stranger, speaker}
    assert set(filter_people(browser, words="LEFT male")) == {stranger}
    assert not filter_people(browser, video="talk", words="low voice")
    assert "Nobody matches" in browser.find_element(By.ID, "people").text
    browser.find_element(By.ID, "clear-filter").click()
    wait(browser, lambda b: len(cards(b)) == 3)


def test_people_page_is_paged(served: dict[str, Any], browser: WebDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(people_pages, "PER_PAGE", 2)
    browser.get(f"{served['url']}/people?named=&q=&video=")
    assert len(cards(browser)) == 2 and "page 1 of 2" in browser.find_element(By.ID, "people-summary").text
    first = set(cards(browser))
    browser.find_element(By.CSS_SELECTOR, ".pager-next").click()
    wait(browser, lambda b: "page 2 of 2" in b.find_element(By.ID, "people-summary").text)
    assert len(cards(browser)) == 1 and not first & set(cards(browser))
    browser.get(f"{served['url']}/people?page=99")  # past the end: the last page
    assert "page 2 of 2" in browser.find_element(By.ID, "people-summary").text


def test_person_page_shows_measures_appearances_and_company(served: dict[str, Any], browser: WebDriver) -> None:
    url, chef, stranger = served["url"], served["chef"], served["stranger"]
    browser.get(f"{url}/people/{stranger}")
    wait(browser, lambda b: b.current_url.endswith(f"/characters/{stranger}"))
    assert "usually on the left; appears male" in browser.find_element(By.ID, "person-description").text
    measured = browser.find_element(By.ID, "attributes").text
    assert "position left 95% sure" in measured and "apparent gender male 90% sure" in measured
    assert "first walk 0:05" in browser.find_element(By.ID, "person-seen").text
    assert len(browser.find_elements(By.CSS_SELECTOR, ".strip .span")) == 2  # walk and meet
    company = browser.find_element(By.CSS_SELECTOR, f"#company li[data-character='{chef}']")
    assert "meet 0:03–0:05" in company.text
    thumb = company.find_element(By.CSS_SELECTOR, "img.thumb")
    wait(browser, lambda b: b.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", thumb))
    assert thumb.get_attribute("src").endswith(f"/api/entities/{served['built'].face}/media/0")
    shot(browser, "person")
    company.find_element(By.CSS_SELECTOR, "a.wrap").click()
    wait(browser, lambda b: b.current_url.endswith(f"/characters/{chef}"))
    assert browser.find_element(By.ID, "rename").is_displayed()  # the page keeps its edits
    assert browser.find_element(By.ID, "nav-characters").get_attribute("aria-current") == "page"
    assert overflow(browser) == 0


def test_evidence_and_answers_name_people_instead_of_tags(served: dict[str, Any], browser: WebDriver) -> None:
    url, chef, stranger = served["url"], served["chef"], served["stranger"]
    browser.get(f"{url}/ask")
    browser.execute_script("localStorage.clear()")
    browser.find_element(By.ID, "question").send_keys("walks a dog in the park")
    browser.find_element(By.ID, "search-button").click()
    wait(browser, lambda b: any(a.get_attribute("href").endswith(f"/characters/{stranger}")
                                for a in b.find_elements(By.CSS_SELECTOR, "#answer a.person")))
    link = browser.find_element(By.CSS_SELECTOR, f"#answer a.person[href='/characters/{stranger}']")
    assert "usually on the left; appears male" in link.text
    assert link.get_attribute("title") in (f"<face_{served['built'].stranger}>", f"<character_{stranger}>")
    assert "<face_" not in browser.find_element(By.ID, "answer").text

    answer = {"text": f"<character_{chef}> says it needs salt", "mode": "agent", "rounds": 1, "searches": [],
              "evidence": [{"video_id": "talk", "clip_index": 0, "start_s": 3.0, "cited": True,
                            "text": f"{NAME} (<character_{chef}>) says the soup needs salt"}]}
    entry = {"question": "What does the soup need?", "video": "", "answer": answer, "at": 0}
    browser.execute_script("localStorage.setItem('m3agent.ask.history', arguments[0])", json.dumps([entry]))
    browser.refresh()
    wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#answer a.person[data-named]")) == 2)
    wait(browser, lambda b: NAME in b.find_element(By.CSS_SELECTOR, "#answer .answer-text").text)
    evidence = browser.find_element(By.CSS_SELECTOR, "#answer ol.evidence li").text
    assert evidence.count("Anna") == 1 and "says the soup" in evidence  # not "Anna (Anna)"
    assert "<character_" not in browser.find_element(By.ID, "answer").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#answer i")  # the name's markup stays text
    assert overflow(browser) == 0
    shot(browser, "ask-people")


DEBATE = "iianet_debate_trump_clinton.mp4"  # H.264: plays in the browser


@pytest.fixture(scope="module")
def panel(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A served, playable video: a host on the left and a guest on the right from 1 s to 3 s, a voice at 4–6 s."""
    folder = media_dir / "video"
    if not (folder / DEBATE).is_file():
        pytest.skip(f"the shared video {DEBATE} is absent")
    memory = tmp_path_factory.mktemp("inspector-on-screen") / "memory.db"
    store = open_store(str(memory))
    with store:
        store.add_video(Video("panel", str(folder / DEBATE), duration_s=13.4))
        with store.clip(Clip("panel", 0, 0.0, 13.4)) as w:
            host = w.add_entity(EntityKind.FACE, [np.eye(128, dtype=np.float32)[5]]).id
            guest = w.add_entity(EntityKind.FACE, [np.eye(128, dtype=np.float32)[6]]).id
            voice = w.add_entity(EntityKind.VOICE, [np.eye(256, dtype=np.float32)[7]]).id
            for t in (1.0, 2.0, 3.0):
                for entity, x in ((host, 40), (guest, 1100)):
                    w.add_face(FaceObservation(0, t, BBox(x, 100, x + 96, 228), 0.99, quality=0.9, track=entity,
                                               crop_jpeg=jpeg(60 if entity == host else 180), entity_id=entity))
            w.add_voice(VoiceSegment(0, 4.0, 6.0, "thank you all for coming", speaker=0,
                                     embedding=np.eye(256, dtype=np.float32)[7], entity_id=voice), tone(2.0))
    settings = load_settings(memory=str(memory), llm="none", server={"allowed_folders": [str(folder)]})
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        ids = {e: httpx.get(f"{url}/api/entities/{e}").json()["character"] for e in (host, guest, voice)}
        assert httpx.patch(f"{url}/api/characters/{ids[host]}", json={"name": "Moderator"}).status_code == 200
        yield {"url": url, "host": ids[host], "guest": ids[guest], "voice": ids[voice]}


def on_screen(browser: WebDriver, t: float) -> Any:
    """The 'who is on screen' box once it shows the player's time ``t`` with every person named."""
    browser.execute_script("document.getElementById('player').currentTime = arguments[0]", t)
    shown = f"#on-screen .who[data-t='{t}']"
    return wait(browser, lambda b: next((box for box in b.find_elements(By.CSS_SELECTOR, shown)
                                         if all(a.get_attribute("data-named") is not None
                                                for a in box.find_elements(By.CSS_SELECTOR, "a.person"))), False))


@pytest.mark.media
def test_who_is_on_screen_follows_the_player(panel: dict[str, Any], browser: WebDriver) -> None:
    browser.get(f"{panel['url']}/videos/panel")
    wait(browser, lambda b: b.execute_script("return document.getElementById('player').readyState") >= 1)
    box = on_screen(browser, 2)
    people = box.find_elements(By.CSS_SELECTOR, ".face")
    assert [int(p.get_attribute("data-character")) for p in people] == [panel["host"], panel["guest"]]
    assert people[0].text.startswith("Moderator") and "left" in people[0].text and "right" in people[1].text
    assert people[1].find_element(By.TAG_NAME, "a").get_attribute("href").endswith(f"/characters/{panel['guest']}")
    shot(browser, "video-on-screen")
    box = on_screen(browser, 5)
    assert not box.find_elements(By.CSS_SELECTOR, ".face")
    assert "thank you all for coming" in box.find_element(By.CSS_SELECTOR, ".speaking").text
    assert "nobody on screen" in on_screen(browser, 12).text


def inside_window(browser: WebDriver, element: Any) -> bool:
    """Whether ``element`` lies within the window's width (a long name wrapped, not pushed out of view)."""
    box = element.rect
    return bool(box["x"] >= 0 and box["x"] + box["width"] <= browser.execute_script("return window.innerWidth"))


def test_people_pages_hold_at_800_px_with_a_200_character_name(served: dict[str, Any], browser: WebDriver) -> None:
    url, chef, stranger = served["url"], served["chef"], served["stranger"]
    assert len(NAME) == 200
    browser.set_window_size(800, 900)
    try:
        pages = {"people": "/people", "person": f"/characters/{chef}", "seen-with": f"/characters/{stranger}",
                 "video": "/videos/meet", "video-talk": "/videos/talk"}
        for name, path in pages.items():
            browser.get(url + path)
            wait(browser, lambda b: b.execute_script("return document.readyState") == "complete")
            assert overflow(browser) == 0, (name, overflow(browser))
            shot(browser, f"inspector-800-{name}-long-name")

        browser.get(f"{url}/characters/{stranger}")  # "seen with": the name whole, as text, wrapped in view
        link = browser.find_element(By.CSS_SELECTOR, f"#company li[data-character='{chef}'] a.wrap")
        assert link.text.replace("\n", "") == NAME and inside_window(browser, link)
        navigates(browser, link.click)
        assert browser.current_url.endswith(f"/characters/{chef}")

        browser.get(f"{url}/videos/meet")  # the video page: the lane cut short in its box, the face named in full
        lane = browser.find_element(By.CSS_SELECTOR, f"#swimlanes .lane[data-character='{chef}'] .lane-name")
        wait(browser, lambda b: lane.find_element(By.TAG_NAME, "a").get_attribute("data-named") is not None)
        assert lane.text == NAME and inside_window(browser, lane)
        assert lane.value_of_css_property("text-overflow") == "ellipsis"
        face = browser.find_element(By.CSS_SELECTOR, f"#timeline a.face[href='/characters/{chef}'] .name")
        assert face.text.replace("\n", "") == NAME and inside_window(browser, face)
        assert not browser.find_elements(By.CSS_SELECTOR, "#timeline i, #swimlanes i")  # markup stays text
    finally:
        browser.set_window_size(1280, 1000)


def test_navigation_marks_the_current_page(served: dict[str, Any], browser: WebDriver) -> None:
    pages = {"/": "nav-videos", "/videos/meet": "nav-videos", "/people": "nav-people",
             f"/people/{served['stranger']}": "nav-characters", "/characters": "nav-characters",
             f"/characters/{served['chef']}": "nav-characters", "/ask": "nav-ask"}
    for path, here in pages.items():
        browser.get(served["url"] + path)
        marked = browser.find_elements(By.CSS_SELECTOR, "nav a[aria-current]")
        assert [(a.get_attribute("id"), a.get_attribute("aria-current")) for a in marked] == [(here, "page")], path
        assert marked[0].value_of_css_property("font-weight") == "700"  # seen, not only announced
