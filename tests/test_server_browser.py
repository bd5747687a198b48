"""The web inspector in a real browser (Debian's headless chromium through Selenium), served by a real
uvicorn server over a memory ingested from real shared videos by the server's own ingest jobs.

Screenshots of every page are saved under ``out/screenshots/`` (not committed) for a person to look at.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from browser_helpers import images_loaded, shot, wait
from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import live_server

pytestmark = [pytest.mark.slow, pytest.mark.media]
VIDEOS = {"debate": "iianet_debate_trump_clinton.mp4", "katie": "hdtf_talking_heads/WDA_KatieHill_000.mp4"}


@pytest.fixture(scope="module")
def server(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real server whose memory was filled by two ingest jobs on real videos."""
    folder = media_dir / "video"
    settings = load_settings(memory=str(tmp_path_factory.mktemp("inspector") / "memory.db"), llm="none",
                             server={"allowed_folders": [str(folder)]})
    with live_server(create_app(settings, mcp=False)) as url:
        jobs = [httpx.post(f"{url}/api/jobs", json={"path": str(folder / name), "video_id": vid}).json()
                for vid, name in VIDEOS.items()]
        for job in jobs:
            done = _wait_job(url, job["id"])
            assert done["state"] == "done" and done["clips_done"] >= 1, done
        yield url


def _wait_job(url: str, job_id: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = httpx.get(f"{url}/api/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not finish")


def test_pages_rename_play_ask_follow_citation_and_forget(server: str, browser: WebDriver) -> None:
    browser.get(server + "/")
    rows = [r.get_attribute("data-video") for r in browser.find_elements(By.CSS_SELECTOR, "#videos tbody tr")]
    assert sorted(rows) == ["debate", "katie"]
    shot(browser, "1-videos")

    browser.get(server + "/videos/debate")
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline .clip .memory")
    assert browser.find_element(By.ID, "player").get_attribute("src").endswith("/api/videos/debate/media")
    wait(browser, lambda b: images_loaded(b))
    shot(browser, "2-video-timeline")

    characters = httpx.get(f"{server}/api/characters").json()["items"]
    with_voice = _character_with(server, characters, "voice")
    browser.get(f"{server}/characters")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#characters .card")) == len(characters)
    wait(browser, lambda b: images_loaded(b))
    shot(browser, "3-characters")

    # rename a character on its page and see the name everywhere
    browser.get(f"{server}/characters/{with_voice['id']}")
    field = browser.find_element(By.CSS_SELECTOR, "#rename input[name=name]")
    field.clear()
    field.send_keys("Speaker Alpha")
    browser.find_element(By.CSS_SELECTOR, "#rename button").click()
    wait(browser, lambda b: "Speaker Alpha" in b.find_element(By.ID, "character-name").text)
    shot(browser, "4-character-renamed")
    browser.get(f"{server}/characters")
    assert "Speaker Alpha" in browser.find_element(By.ID, "characters").text
    video = _video_of(server, with_voice)
    browser.get(f"{server}/videos/{video}")
    assert "Speaker Alpha" in browser.find_element(By.ID, "timeline").text

    # play a voice snippet
    browser.get(f"{server}/characters/{with_voice['id']}")
    played = browser.execute_async_script(
        "const done = arguments[arguments.length - 1]; const a = document.querySelector('audio.snippet');"
        "a.play().then(() => setTimeout(() => done([a.paused, a.currentTime, a.duration]), 600))"
        ".catch(e => done(String(e)));")
    assert isinstance(played, list) and played[1] > 0 and played[2] > 0, played
    shot(browser, "5-character-voice")

    # ask, then follow a citation to the right time of the right video
    browser.get(f"{server}/ask")
    browser.find_element(By.ID, "question").send_keys("Who is the senator from New York?")
    browser.find_element(By.ID, "ask-button").click()
    wait(browser, lambda b: b.find_element(By.ID, "answer").is_displayed(), timeout=120)
    citations = browser.find_elements(By.CSS_SELECTOR, "#answer a.citation")
    assert citations and "debate" in citations[0].get_attribute("href")
    shot(browser, "6-ask")
    target = float(citations[0].get_attribute("href").split("t=")[1].split("&")[0].split("#")[0])
    citations[0].click()
    wait(browser, lambda b: abs(b.execute_script("return document.getElementById('player').currentTime")
                                - target) < 0.5 and b.execute_script("return document.getElementById('player')"
                                                                     ".readyState") >= 1)
    current = browser.find_element(By.CSS_SELECTOR, ".clip.current")
    assert float(current.get_attribute("data-start")) <= target < float(current.get_attribute("data-end"))
    shot(browser, "7-citation-followed")

    # forget a video, confirming the dialog
    browser.get(server + "/")
    browser.find_element(By.CSS_SELECTOR, "tr[data-video=katie] button[data-forget]").click()
    wait(browser, lambda b: b.switch_to.alert).accept()
    wait(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, "tr[data-video=katie]"))
    shot(browser, "8-video-forgotten")
    assert httpx.get(f"{server}/api/videos/katie").status_code == 404
    assert [v["video_id"] for v in httpx.get(f"{server}/api/videos").json()["items"]] == ["debate"]


def _character_with(server: str, characters: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    for character in characters:
        kinds = {httpx.get(f"{server}/api/entities/{e}").json()["kind"] for e in character["entities"]}
        if kind in kinds:
            return character
    raise AssertionError(f"no character has a {kind}: {characters}")


def _video_of(server: str, character: dict[str, Any]) -> str:
    detail = httpx.get(f"{server}/api/characters/{character['id']}").json()
    return str(detail["appearances"][0]["video_id"])
