"""Names a person can recognise in the merge history and the split list (issue 49, point 3), in Chromium
(Selenium) under a strict Content-Security-Policy: each side of a merge shows the person (the name, else the
People page's description, with a crop or a voice ▶; the tag only as a small link), an absorbed entity is shown
from what its merge recorded and marked merged, never as a broken image; the split list shows each face
sighting's crop and each voice line's ▶, and still splits. Screenshots go to ``out/screenshots/``.
"""

from __future__ import annotations

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
from selenium.webdriver.remote.webelement import WebElement

from browser_helpers import overflow, shot, strict_csp, wait
from m3agent.domain import BBox, Clip, EntityAttribute, EntityKind, FaceObservation, Video, VoiceSegment
from m3agent.server.app import create_app
from m3agent.settings import load_settings
from m3agent.store import open_store
from server_helpers import build_memory, jpeg, live_server, tone

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_csp_violation")]
CHEF = "Chef Anna"
BOX = BBox(0, 0, 48, 64)


def unit(i: int, dim: int) -> Any:
    return np.eye(dim, dtype=np.float32)[i]


def face(w: Any, entity: int, t: float, track: int, shade: int | None) -> int:
    found: int = w.add_face(FaceObservation(0, t, BOX, 0.99, quality=0.9, track=track,
                                            crop_jpeg=None if shade is None else jpeg(shade), entity_id=entity))
    return found


def add_room(path: Path, stranger: int) -> dict[str, Any]:
    """A room with faces to merge (a twin whose second sighting kept no crop of its own, a double, a ghost that
    kept no crop at all), a crowd to split (a sighting with a crop, one whose track has one, one with none), a
    talker with a line that kept audio and one that kept none, and two voices to merge; the stranger is
    measured usually on the left and male."""
    store = open_store(str(path))
    with store:
        store.add_video(Video("room", "/nowhere/room.mp4", duration_s=40.0))
        with store.clip(Clip("room", 0, 0.0, 20.0)) as w:
            face(w, stranger, 4.0, 1, 150)
            w.add_attribute(EntityAttribute(stranger, "room", 0, "position", "left", 0.95, 5))
            w.add_attribute(EntityAttribute(stranger, "room", 0, "apparent_gender", "male", 0.9, 3))
            twin, double, ghost, crowd = (w.add_entity(EntityKind.FACE, [unit(30 + i, 128)]).id for i in range(4))
            twin_seen = [face(w, twin, 2.0, 5, 120), face(w, twin, 3.0, 5, None)]
            face(w, double, 5.0, 6, 220)
            ghost_seen = face(w, ghost, 9.0, 9, None)
            crowd_seen = [face(w, crowd, 6.0, 7, 60), face(w, crowd, 7.0, 7, None), face(w, crowd, 8.0, 8, None)]
            talker, caller, echo = (w.add_entity(EntityKind.VOICE, [unit(40 + i, 256)]).id for i in range(3))
            heard = w.add_voice(VoiceSegment(0, 10.0, 12.0, "hello there", speaker=0, embedding=unit(40, 256),
                                             entity_id=talker), tone(2.0))
            silent = w.add_voice(VoiceSegment(0, 13.0, 15.0, "a line kept without audio", speaker=0,
                                              embedding=unit(40, 256), entity_id=talker), None)
            w.add_voice(VoiceSegment(0, 15.0, 16.0, "who is calling", speaker=1, embedding=unit(41, 256),
                                     entity_id=caller), tone(1.0))
            echoed = w.add_voice(VoiceSegment(0, 16.0, 18.0, "an echo", speaker=2, embedding=unit(42, 256),
                                              entity_id=echo), tone(2.0))
    return {"twin": twin, "twin_seen": twin_seen, "double": double, "ghost": ghost, "ghost_seen": ghost_seen,
            "crowd": crowd, "crowd_seen": crowd_seen, "talker": talker, "heard": heard, "silent": silent,
            "caller": caller, "echo": echo, "echoed": echoed}


def merge(url: str, keep: int, absorb: int) -> int:
    """Merge through the API; the id of the merge recorded."""
    assert httpx.post(f"{url}/api/entities/{keep}/merge", json={"absorb": absorb}).status_code == 200
    found: int = next(m["id"] for m in httpx.get(f"{url}/api/merges").json()["items"]
                      if (m["keep"], m["absorbed"], m["undone_at"]) == (keep, absorb, None))
    return found


def character_of(url: str, entity: int) -> int:
    found: int = httpx.get(f"{url}/api/entities/{entity}").json()["character"]
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    memory = tmp_path_factory.mktemp("inspector-merges") / "memory.db"
    built = build_memory(memory)
    ids = add_room(memory, built.stranger)
    settings = load_settings(memory=str(memory), llm="none")
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        assert httpx.patch(f"{url}/api/characters/{character_of(url, built.face)}", json={"name": CHEF}
                           ).status_code == 200
        yield {"url": url, "face": built.face, "stranger": built.stranger, **ids}



@pytest.fixture
def narrow(browser: WebDriver) -> Iterator[WebDriver]:
    """The browser 800 px wide for one test."""
    size = browser.get_window_size()
    browser.set_window_size(800, 1000)
    yield browser
    browser.set_window_size(size["width"], size["height"])


def merge_images_loaded(browser: WebDriver) -> bool:
    """Every image of the merge history has loaded (the cards above load lazily as they scroll in)."""
    return bool(browser.execute_script("return Array.from(document.querySelectorAll('#merges img'))"
                                       ".every(i => i.complete && i.naturalWidth > 0)"))


def loaded(browser: WebDriver, image: WebElement) -> bool:
    return bool(browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", image))


def side(row: WebElement, which: str) -> WebElement:
    return row.find_element(By.CSS_SELECTOR, f"td.{which} .merge-side")


def crop_src(part: WebElement) -> str:
    return part.find_element(By.CSS_SELECTOR, "img.thumb").get_attribute("src") or ""


def test_merge_history_shows_people_not_tags(served: dict[str, Any], narrow: WebDriver) -> None:
    browser, url, s = narrow, served["url"], served
    described = merge(url, s["stranger"], s["twin"])  # in force: the twin is gone
    voices = merge(url, s["caller"], s["echo"])
    vanished = merge(url, s["stranger"], s["ghost"])  # the ghost kept no crop at all
    chef = merge(url, s["face"], s["double"])
    assert httpx.post(f"{url}/api/merges/{chef}/undo").status_code == 200  # the double is back
    stranger_page = f"/characters/{character_of(url, s['stranger'])}"

    browser.get(f"{url}/characters")
    rows = {int(r.get_attribute("data-merge") or 0): r for r in browser.find_elements(By.CSS_SELECTOR, "#merges tr")}
    wait(browser, merge_images_loaded)  # every crop shown loads: no broken image

    kept, absorbed = side(rows[described], "kept"), side(rows[described], "absorbed")
    assert "usually on the left; appears male" in kept.find_element(By.CLASS_NAME, "who").text  # People's words
    assert crop_src(kept).endswith(f"/api/entities/{s['stranger']}/media/0")
    tag = kept.find_element(By.CSS_SELECTOR, "a.tag")  # the tag only as a small link to the person
    assert tag.text == f"<face_{s['stranger']}>" and tag.get_attribute("href").endswith(stranger_page)
    assert "merged" in absorbed.text and "gone" in (absorbed.get_attribute("class") or "")
    assert crop_src(absorbed).endswith(f"/api/faces/{s['twin_seen'][0]}/crop")  # from the merge's record
    assert absorbed.find_element(By.CSS_SELECTOR, "a.tag").get_attribute("href").endswith(stranger_page)
    for part in (kept, absorbed):
        assert loaded(browser, part.find_element(By.TAG_NAME, "img"))
        assert "<" not in part.find_element(By.CLASS_NAME, "who").text

    gone = side(rows[vanished], "absorbed")
    assert not gone.find_elements(By.TAG_NAME, "img") and "merged" in gone.text  # no crop kept: no image
    assert gone.find_element(By.CLASS_NAME, "tag").text == f"<face_{s['ghost']}>"

    named, back = side(rows[chef], "kept"), side(rows[chef], "absorbed")
    assert named.find_element(By.CLASS_NAME, "who").text == CHEF
    assert "undone" in (rows[chef].get_attribute("class") or "")
    assert crop_src(back).endswith(f"/api/entities/{s['double']}/media/0") and "merged" not in back.text
    assert back.find_element(By.CSS_SELECTOR, "a.tag").get_attribute("href").endswith(
        f"/characters/{character_of(url, s['double'])}")

    caller, echo = side(rows[voices], "kept"), side(rows[voices], "absorbed")
    assert not caller.find_elements(By.TAG_NAME, "img") and not echo.find_elements(By.TAG_NAME, "img")
    assert caller.find_element(By.CSS_SELECTOR, "button.play").get_attribute("data-audio") == \
        f"/api/entities/{s['caller']}/media/0"
    play = echo.find_element(By.CSS_SELECTOR, "button.play")
    assert play.get_attribute("data-audio") == f"/api/voices/{s['echoed']}/audio"
    for button in (caller, echo):
        audio = httpx.get(url + button.find_element(By.CSS_SELECTOR, "button.play").get_attribute("data-audio"))
        assert audio.status_code == 200 and audio.headers["content-type"].startswith("audio/")
    play.click()
    wait(browser, lambda b: f"playing /api/voices/{s['echoed']}/audio" in b.find_element(By.ID, "status").text)
    assert overflow(browser) == 0
    shot(browser, "merge-history-people")

    browser.get(url + stranger_page)  # the person's page lists the merges into them the same way
    wait(browser, merge_images_loaded)
    mine = browser.find_element(By.CSS_SELECTOR, f"#merges tr[data-merge='{described}']")
    assert "usually on the left; appears male" in mine.text
    assert crop_src(side(mine, "absorbed")).endswith(f"/api/faces/{s['twin_seen'][0]}/crop")
    assert overflow(browser) == 0


def test_face_crop_endpoint_serves_a_sighting_or_says_why_not(served: dict[str, Any]) -> None:
    url, crowd = served["url"], served["crowd_seen"]
    own, by_track = (httpx.get(f"{url}/api/faces/{i}/crop") for i in crowd[:2])
    assert own.status_code == by_track.status_code == 200 and own.headers["content-type"] == "image/jpeg"
    assert by_track.content == own.content  # a sighting without a crop shows its track's
    none = httpx.get(f"{url}/api/faces/{crowd[2]}/crop")
    assert none.status_code == 404 and "kept no crop" in none.json()["message"]
    assert httpx.get(f"{url}/api/faces/999999/crop").status_code == 404
    observed = httpx.get(f"{url}/api/entities/{served['crowd']}").json()["observations_list"]
    assert [o["media_url"] for o in observed] == [f"/api/faces/{crowd[0]}/crop", f"/api/faces/{crowd[1]}/crop", None]


def open_split(browser: WebDriver, entity: int) -> WebElement:
    details = browser.find_element(By.CSS_SELECTOR, f"#entity-{entity} form.split").find_element(By.XPATH, "..")
    details.find_element(By.TAG_NAME, "summary").click()
    return details.find_element(By.CSS_SELECTOR, "form.split")


def test_split_shows_each_sighting_crop_and_each_line_and_still_splits(served: dict[str, Any],
                                                                      narrow: WebDriver) -> None:
    browser, url, s = narrow, served["url"], served
    browser.get(f"{url}/characters/{character_of(url, s['crowd'])}")
    assert not browser.find_elements(By.CSS_SELECTOR, "form.split img")  # fetched once the list is opened
    form = open_split(browser, s["crowd"])
    rows = form.find_elements(By.CSS_SELECTOR, ".obs")
    assert [int(r.get_attribute("data-observation") or 0) for r in rows] == s["crowd_seen"]
    for row in rows:  # one crop (or a "no crop" mark) per face sighting, beside its checkbox
        assert len(row.find_elements(By.CSS_SELECTOR, ".obs-crop")) == 1
        assert len(row.find_elements(By.CSS_SELECTOR, "input[type=checkbox][name=obs]")) == 1
    crops = [r.find_elements(By.CSS_SELECTOR, "img.obs-crop") for r in rows]
    assert [len(c) for c in crops] == [1, 1, 0]
    assert "no crop" in rows[2].text
    for (image,) in crops[:2]:
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", image)
        wait(browser, lambda b, i=image: loaded(b, i))
    assert crops[0][0].get_attribute("src").endswith(f"/api/faces/{s['crowd_seen'][0]}/crop")
    assert overflow(browser) == 0
    shot(browser, "split-crops")

    rows[2].find_element(By.CSS_SELECTOR, "input[name=obs]").click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, lambda b: len(httpx.get(f"{url}/api/entities/{s['crowd']}").json()["observations_list"]) == 2)
    split_off = [e for e in httpx.get(f"{url}/api/entities", params={"kind": "face"}).json()["items"]
                 if e["observations"] == 1 and e["id"] > s["crowd"]]
    assert any([o["id"] for o in httpx.get(f"{url}/api/entities/{e['id']}").json()["observations_list"]]
               == [s["crowd_seen"][2]] for e in split_off)

    browser.get(f"{url}/characters/{character_of(url, s['talker'])}")
    form = open_split(browser, s["talker"])
    heard = form.find_element(By.CSS_SELECTOR, f".obs[data-observation='{s['heard']}']")
    silent = form.find_element(By.CSS_SELECTOR, f".obs[data-observation='{s['silent']}']")
    assert heard.find_element(By.CSS_SELECTOR, "button.play").get_attribute("data-audio") == \
        f"/api/voices/{s['heard']}/audio"
    assert not silent.find_elements(By.CSS_SELECTOR, "button.play")  # no silent ▶: the video plays the line
    assert silent.find_element(By.TAG_NAME, "a").get_attribute("href").endswith("/videos/room?t=13.0")
    heard.find_element(By.CSS_SELECTOR, "button.play").click()
    wait(browser, lambda b: f"playing /api/voices/{s['heard']}/audio" in b.find_element(By.ID, "status").text)
    assert not browser.find_element(By.ID, "problem").is_displayed()
    assert overflow(browser) == 0
