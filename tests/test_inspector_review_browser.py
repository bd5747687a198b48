"""The last defects of the inspector's review (issue 49, point 4) in Chromium (Selenium), served by a real uvicorn
server under a strict Content-Security-Policy: a voice line that kept no audio plays in the video player; two
tabs renaming one person lose no rename (If-Match, 412 in words); the videos table and a video page opened
mid-ingest follow the job without a reload; the page of a person merged into another leads there.
Screenshots go to ``out/screenshots/``.
"""

from __future__ import annotations

import re
import threading
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

from browser_helpers import images_loaded, navigates, shot, strict_csp, wait
from m3agent.domain import BBox, Clip, EntityKind, FaceObservation, Memory, MemoryKind, Video, VoiceSegment
from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from m3agent.store import open_memory, open_store
from server_helpers import EMBEDDER, build_memory, jpeg, live_server, tone

pytestmark = [pytest.mark.slow, pytest.mark.media, pytest.mark.usefixtures("no_csp_violation")]
DEBATE = "iianet_debate_trump_clinton.mp4"  # H.264: plays in the browser
UNFIT = re.compile(r"[A-Z][a-z]+[A-Z]\w*Error|/api/|\b(GET|POST|PATCH) /|if-match|etag|ctrl-c|\bpid\b", re.I)


def unit(i: int, dim: int) -> Any:
    return np.eye(dim, dtype=np.float32)[i]


def add_panel(path: Path, video: Path) -> dict[str, int]:
    """A served video with a line that kept its audio and one that kept none, a line without audio in a video
    that is not served, and two faces (twins) to merge."""
    store = open_store(str(path))
    with store:
        store.add_video(Video("panel", str(video), duration_s=13.4))
        with store.clip(Clip("panel", 0, 0.0, 13.4)) as w:
            voice = w.add_entity(EntityKind.VOICE, [unit(7, 256)]).id
            heard = w.add_voice(VoiceSegment(0, 4.0, 6.0, "thank you all for coming", speaker=0,
                                             embedding=unit(7, 256), entity_id=voice), tone(2.0))
            silent = w.add_voice(VoiceSegment(0, 8.0, 10.0, "a line kept without its audio", speaker=0,
                                              embedding=unit(7, 256), entity_id=voice), None)
            twins = [w.add_entity(EntityKind.FACE, [unit(20 + i, 128)]).id for i in range(2)]
            for i, twin in enumerate(twins):
                w.add_face(FaceObservation(0, 1.0 + i, BBox(0, 0, 48, 64), 0.99, quality=0.9, track=twin,
                                           crop_jpeg=jpeg(50 + 100 * i), entity_id=twin))
        store.add_video(Video("street", "/nowhere/street.mp4", duration_s=30.0))  # not served: no player
        with store.clip(Clip("street", 0, 0.0, 30.0)) as w:
            unserved = w.add_voice(VoiceSegment(0, 9.0, 11.0, "nobody kept this", speaker=0,
                                                embedding=unit(7, 256), entity_id=voice), None)
    return {"heard": heard, "silent": silent, "unserved": unserved, "twin": twins[0], "other_twin": twins[1]}


@pytest.fixture(scope="module")
def served(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = media_dir / "video"
    if not (folder / DEBATE).is_file():
        pytest.skip(f"the shared video {DEBATE} is absent")
    memory = tmp_path_factory.mktemp("inspector-review") / "memory.db"
    built = build_memory(memory)
    ids = add_panel(memory, folder / DEBATE)
    settings = load_settings(memory=str(memory), llm="none", server={"allowed_folders": [str(folder)]})
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        yield {"url": url, "face": built.face, **ids}



def character_of(url: str, entity: int) -> int:
    found: int = httpx.get(f"{url}/api/entities/{entity}").json()["character"]
    return found


def banner(browser: WebDriver) -> dict[str, str]:
    box = browser.find_element(By.ID, "problem")
    return {part: box.find_element(By.CLASS_NAME, f"problem-{part}").text for part in ("error", "message", "hint")}


def player_time(browser: WebDriver) -> float:
    return float(browser.execute_script("return document.getElementById('player').currentTime"))


# -- a voice line that kept no audio -------------------------------------------------------------------------
def test_a_line_without_audio_plays_in_the_player_instead_of_an_error(served: dict[str, Any],
                                                                      browser: WebDriver) -> None:
    url = served["url"]
    assert httpx.get(f"{url}/api/voices/{served['silent']}/audio").status_code == 404
    browser.get(f"{url}/videos/panel")
    wait(browser, lambda b: b.execute_script("return document.getElementById('player').readyState") >= 1)
    assert player_time(browser) < 1
    browser.find_element(By.CSS_SELECTOR, f"li[data-voice='{served['silent']}'] button.play").click()
    wait(browser, lambda b: 8.0 <= player_time(b) < 11.0)
    wait(browser, lambda b: "kept no audio of its own" in b.find_element(By.ID, "status").text)
    assert "0:08" in browser.find_element(By.ID, "status").text
    assert not browser.find_element(By.ID, "problem").is_displayed()
    assert "pinned" in browser.find_element(By.ID, "player-box").get_attribute("class")  # the player in view
    shot(browser, "review-line-without-audio")

    browser.find_element(By.CSS_SELECTOR, f"li[data-voice='{served['heard']}'] button.play").click()
    wait(browser, lambda b: "playing /api/voices/" in b.find_element(By.ID, "status").text)  # its own snippet


def test_a_line_without_audio_and_no_player_says_so_in_words(served: dict[str, Any], browser: WebDriver) -> None:
    browser.get(f"{served['url']}/videos/street")
    assert not browser.find_elements(By.ID, "player")
    browser.find_element(By.CSS_SELECTOR, f"li[data-voice='{served['unserved']}'] button.play").click()
    wait(browser, lambda b: b.find_element(By.ID, "problem").is_displayed())
    shown = banner(browser)
    assert shown["error"] == "Not found" and "kept no audio" in shown["message"], shown
    assert shown["hint"] and not UNFIT.search(" ".join(shown.values())), shown


# -- two tabs renaming one person ----------------------------------------------------------------------------
def rename(browser: WebDriver, name: str) -> None:
    box = browser.find_element(By.CSS_SELECTOR, "#rename input[name=name]")
    box.clear()
    box.send_keys(name)
    browser.find_element(By.CSS_SELECTOR, "#rename button[type=submit]").click()


def test_two_tabs_renaming_one_person_lose_no_rename(served: dict[str, Any], browser: WebDriver) -> None:
    url = served["url"]
    page = f"{url}/characters/{character_of(url, served['face'])}"
    first = browser.current_window_handle
    browser.get(page)
    browser.switch_to.new_window("tab")
    second = browser.current_window_handle
    try:
        browser.get(page)
        browser.switch_to.window(first)
        navigates(browser, lambda: rename(browser, "Gina Alvarez"))
        assert browser.find_element(By.ID, "character-name").text.startswith("Gina Alvarez")

        browser.switch_to.window(second)  # still shows the name before Gina's
        rename(browser, "Gina A.")
        wait(browser, lambda b: b.find_element(By.ID, "problem").is_displayed())
        shown = banner(browser)
        assert shown["error"] == "Changed meanwhile", shown
        assert "renamed meanwhile" in shown["message"] and "'Gina Alvarez'" in shown["message"], shown
        assert "not saved" in shown["message"] and shown["hint"].startswith("reload the page"), shown
        assert not UNFIT.search(" ".join(shown.values())), shown
        shot(browser, "review-renamed-meanwhile")
        assert httpx.get(page.replace("/characters/", "/api/characters/")).json()["name"] == "Gina Alvarez"

        browser.refresh()  # as the hint says: the page now shows Gina's name, and a rename from it is saved
        assert browser.find_element(By.CSS_SELECTOR, "#rename input[name=name]").get_attribute("value") \
            == "Gina Alvarez"
        navigates(browser, lambda: rename(browser, "Gina A."))
        assert browser.find_element(By.ID, "character-name").text.startswith("Gina A.")
    finally:
        browser.switch_to.window(second)
        browser.close()
        browser.switch_to.window(first)


def test_rename_versions_keep_clients_without_if_match_working(served: dict[str, Any]) -> None:
    api = f"{served['url']}/api/characters/{character_of(served['url'], served['face'])}"
    read = httpx.get(api)
    version = read.headers["etag"]
    assert re.fullmatch(r'"[0-9a-f]{16}"', version)
    assert httpx.get(api).headers["etag"] == version  # unchanged name, same version

    renamed = httpx.patch(api, json={"name": "Chef"}, headers={"if-match": version})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Chef"
    assert renamed.headers["etag"] == httpx.get(api).headers["etag"] != version

    stale = httpx.patch(api, json={"name": "Cook"}, headers={"if-match": version})
    assert stale.status_code == 412
    body = stale.json()
    assert body["error"] == "EditConflictError" and "renamed meanwhile" in body["message"] and "'Chef'" in \
        body["message"] and "If-Match" in body["hint"], body
    assert httpx.get(api).json()["name"] == "Chef"  # nothing written

    assert httpx.patch(api, json={"name": "Cook"}, headers={"if-match": "*"}).status_code == 200
    either = f'"0000000000000000", {httpx.get(api).headers["etag"]}'
    assert httpx.patch(api, json={"name": "Chef"}, headers={"if-match": either}).status_code == 200
    assert httpx.patch(api, json={"name": "Anyone"}).status_code == 200  # no If-Match: as before, it applies
    assert httpx.get(api).json()["name"] == "Anyone"


# -- after a merge, the absorbed person's page -----------------------------------------------------------------
def test_the_page_of_a_merged_person_leads_to_the_one_it_went_into(served: dict[str, Any],
                                                                    browser: WebDriver) -> None:
    url, twin, other = served["url"], served["twin"], served["other_twin"]
    kept, absorbed = character_of(url, twin), character_of(url, other)
    assert httpx.patch(f"{url}/api/characters/{kept}", json={"name": "Ada Twin"}).status_code == 200
    browser.get(f"{url}/characters/{absorbed}")
    assert browser.find_element(By.ID, "character-name").is_displayed()
    merged = httpx.post(f"{url}/api/entities/{twin}/merge", json={"absorb": other})
    assert merged.status_code == 200 and merged.json()["character"] == kept
    assert httpx.get(f"{url}/api/characters/{absorbed}").status_code == 404  # the id is gone...

    browser.refresh()  # ...and its page says where the person went instead of "not found"
    assert not browser.find_elements(By.ID, "error-page")
    notice = browser.find_element(By.ID, "merged-into")
    link = notice.find_element(By.CSS_SELECTOR, f"a[href='/characters/{kept}']")
    wait(browser, lambda b: link.get_attribute("data-named") is not None)
    assert link.text == "Ada Twin" and "merged into" in notice.text and "by hand" in notice.text
    assert "merged into Ada Twin" in browser.title
    wait(browser, images_loaded)
    shot(browser, "review-merged-into")
    navigates(browser, link.click)
    assert browser.current_url.endswith(f"/characters/{kept}")
    assert browser.find_element(By.ID, "character-name").text.startswith("Ada Twin")

    browser.back()  # two people after all: undo from the same page brings the page back
    wait(browser, lambda b: b.find_elements(By.ID, "merged-into"))
    navigates(browser, browser.find_element(By.CSS_SELECTOR, "#merged-into ~ p button[data-undo]").click)
    assert browser.current_url.endswith(f"/characters/{absorbed}")
    wait(browser, lambda b: b.find_elements(By.ID, "character-name"))
    assert browser.find_elements(By.ID, f"entity-{other}")
    assert httpx.get(f"{url}/api/characters/{absorbed}").status_code == 200


def test_a_character_that_never_was_is_still_not_found(served: dict[str, Any], browser: WebDriver) -> None:
    browser.get(f"{served['url']}/characters/987654")
    assert browser.find_element(By.CSS_SELECTOR, "#error-page .problem-error").text == "Not found"


# -- mid-ingest: the videos table and the video page follow the job ---------------------------------------------
class SteppedIngest:
    """The ingest of a job, one clip each time the test calls :meth:`step`: it stores the video, then per clip
    a memory (and, in the last clip, a face), committed before ``on_clip`` reports it, as the real ingest does;
    the job runner, the API and the pages around it are the real ones."""

    CLIPS = 3

    def __init__(self) -> None:
        self.steps = threading.Semaphore(0)

    def step(self) -> None:
        self.steps.release()

    def __call__(self, settings: Settings, source: str, *, video_id: str | None = None, on_clip: Any = None,
                 **_: Any) -> Any:
        from m3agent.pipeline import IngestReport

        assert video_id is not None and on_clip is not None
        report = IngestReport(video_id=video_id, source=source)
        with open_memory(settings, create=False) as store:
            store.add_video(Video(video_id, source, duration_s=5.0 * self.CLIPS))
            for index in range(self.CLIPS):
                if not self.steps.acquire(timeout=120):
                    raise TimeoutError("the test never asked for the next clip")
                self._clip(store, video_id, index)
                report.clips_done = index + 1
                on_clip(report)
        return report

    def _clip(self, store: Any, video_id: str, index: int) -> None:
        start = 5.0 * index
        with store.clip(Clip(video_id, index, start, start + 5.0)) as w:
            text = f"clip {index}: the kettle boils"
            w.add_memory(Memory(MemoryKind.EPISODIC, text, video_id, index, start, start + 5.0, (),
                                embedding=EMBEDDER.embed([text])[0]))
            if index == self.CLIPS - 1:
                face = w.add_entity(EntityKind.FACE, [unit(40, 128)]).id
                w.add_face(FaceObservation(index, start + 1.0, BBox(0, 0, 48, 64), 0.99, quality=0.9, track=face,
                                           crop_jpeg=jpeg(120), entity_id=face))


@pytest.fixture()
def ingesting(media_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    folder = media_dir / "video"
    if not (folder / DEBATE).is_file():
        pytest.skip(f"the shared video {DEBATE} is absent")
    stepped = SteppedIngest()
    monkeypatch.setattr("m3agent.pipeline.ingest_source", stepped)
    memory = tmp_path / "memory.db"
    build_memory(memory)
    settings = load_settings(memory=str(memory), llm="none", media={"clip_seconds": 5.0},
                             server={"allowed_folders": [str(folder)]})
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        job = httpx.post(f"{url}/api/jobs", json={"path": str(folder / DEBATE), "video_id": "kettle"}).json()
        yield {"url": url, "job": job["id"], "stepped": stepped}
        for _ in range(SteppedIngest.CLIPS):  # let an unfinished job end before the server stops
            stepped.step()


def same_page(browser: WebDriver) -> bool:
    """Whether the page is still the one :func:`mark_page` marked (no reload happened)."""
    return bool(browser.execute_script("return window.__marked === true"))


def mark_page(browser: WebDriver) -> None:
    browser.execute_script("window.__marked = true")


def clips_cell(browser: WebDriver) -> str:
    return str(browser.execute_script(
        "const row = document.querySelector('#videos tr[data-video=kettle]');"
        " return row ? row.cells[2].textContent.trim() : ''"))


def test_the_videos_table_and_a_video_page_follow_a_running_ingest(ingesting: dict[str, Any],
                                                                    browser: WebDriver) -> None:
    url, stepped = ingesting["url"], ingesting["stepped"]
    wait(browser, lambda b: any(v["video_id"] == "kettle" for v in httpx.get(f"{url}/api/videos").json()["items"]))
    browser.get(url + "/")
    mark_page(browser)
    assert clips_cell(browser) == "0 / 0"
    stepped.step()
    wait(browser, lambda b: clips_cell(b) == "1 / 1", timeout=15)
    assert browser.find_element(By.CSS_SELECTOR, "#jobs tr[data-job] a[href='/videos/kettle']")
    assert same_page(browser)

    browser.get(url + "/videos/kettle")  # opened mid-ingest
    mark_page(browser)
    notice = browser.find_element(By.ID, "ingesting")
    assert notice.get_attribute("data-state") == "running" and "1 of 3 clips so far" in notice.text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline .clip")) == 1
    assert not browser.find_elements(By.CSS_SELECTOR, "#swimlanes .lane-person")
    stepped.step()
    wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#timeline .clip")) == 2, timeout=15)
    wait(browser, lambda b: "2 of 3 clips so far" in b.find_element(By.ID, "ingesting").text)
    assert "clip 1: the kettle boils" in browser.find_element(By.ID, "timeline").text
    assert "2 clips" in browser.find_element(By.ID, "video-summary").text
    shot(browser, "review-video-mid-ingest")

    stepped.step()  # the last clip: the job ends, the page shows the video as it is now
    wait(browser, lambda b: b.find_element(By.ID, "ingesting").get_attribute("data-state") == "done", timeout=15)
    wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#timeline .clip")) == 3)
    assert "Ingested: 3 clips" in browser.find_element(By.ID, "ingesting").text
    assert "3 clips" in browser.find_element(By.ID, "video-summary").text
    lane = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#swimlanes .lane-person"))[0]
    bar = lane.find_element(By.CSS_SELECTOR, ".bar.seen")
    assert bar.value_of_css_property("left") not in ("", "auto")  # the new lanes are laid out
    assert same_page(browser)
    browser.find_element(By.CSS_SELECTOR, "#clip-2 a.seek").click()  # links of the new rows work
    wait(browser, lambda b: b.execute_script("return document.getElementById('player').currentTime") >= 10)
    assert httpx.get(f"{url}/api/jobs/{ingesting['job']}").json()["state"] == "done"
