"""On-screen text as its own kind in the video page's memory filter, and counts that read right in the singular
("1 clip", "1 memory"), in Chromium under a strict Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from browser_helpers import navigates, strict_csp, wait
from m3agent.domain import Clip, Memory, MemoryKind, Video
from m3agent.server.app import create_app
from m3agent.settings import load_settings
from m3agent.store import open_store
from server_helpers import EMBEDDER, build_memory, live_server

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_csp_violation")]
SIGN = 'On screen 0:03–0:09: "OPEN 24 HOURS"'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The two videos of :func:`build_memory` and ``sign``: one clip, one memory, an on-screen text; ``talk``
    gets an on-screen text too, beside its four other memories."""
    memory = tmp_path_factory.mktemp("inspector-text") / "memory.db"
    build_memory(memory)
    store = open_store(str(memory))
    with store:
        store.add_video(Video("sign", "/nowhere/sign.mp4", duration_s=20.0))
        with store.clip(Clip("sign", 0, 0.0, 20.0)) as w:
            w.add_memory(Memory(MemoryKind.EPISODIC, SIGN, "sign", 0, 3.0, 9.0, (),
                                embedding=EMBEDDER.embed([SIGN])[0]))
        with store.clip(Clip("talk", 2, 60.0, 90.0)) as w:
            text = 'On screen 1:02–1:05: "SOUP OF THE DAY"'
            w.add_memory(Memory(MemoryKind.EPISODIC, text, "talk", 2, 62.0, 65.0, (),
                                embedding=EMBEDDER.embed([text])[0]))
    with live_server(strict_csp(create_app(load_settings(memory=str(memory), llm="none"), mcp=False))) as url:
        yield url



def words(browser: WebDriver, css: str) -> list[str]:
    return [str(e.get_attribute("textContent")).strip() for e in browser.find_elements(By.CSS_SELECTOR, css)]


def test_on_screen_text_is_a_kind_of_its_own_in_the_filter(served: str, browser: WebDriver) -> None:
    browser.get(f"{served}/videos/talk")
    options = {o.get_attribute("value"): o.text
               for o in browser.find_elements(By.CSS_SELECTOR, "select[name=kind] option")}
    assert options == {"": "all", "episodic": "episodic", "semantic": "semantic", "text": "on-screen text"}
    assert words(browser, "#timeline .memory.on-screen .kind") == ["on-screen text"]

    Select(browser.find_element(By.NAME, "kind")).select_by_value("text")
    navigates(browser, browser.find_element(By.CSS_SELECTOR, "#timeline-filter button").click)
    assert "kind=text" in browser.current_url
    memories = browser.find_elements(By.CSS_SELECTOR, "#timeline .memory")
    assert len(memories) == 1 and "SOUP OF THE DAY" in memories[0].text
    assert "on-screen" in str(memories[0].get_attribute("class"))
    assert browser.find_element(By.ID, "timeline-summary").text.startswith("1 memory matches in 1 clip ·")
    assert Select(browser.find_element(By.NAME, "kind")).first_selected_option.get_attribute("value") == "text"

    Select(browser.find_element(By.NAME, "kind")).select_by_value("semantic")  # the other kinds still filter
    navigates(browser, browser.find_element(By.CSS_SELECTOR, "#timeline-filter button").click)
    assert words(browser, "#timeline .memory .kind") == ["semantic"]


def test_counts_of_one_read_in_the_singular(served: str, browser: WebDriver) -> None:
    browser.get(f"{served}/videos/sign")
    assert "1 memory" in browser.find_element(By.CSS_SELECTOR, "h1 small").text
    assert "1 memories" not in browser.find_element(By.CSS_SELECTOR, "h1 small").text
    assert browser.find_element(By.ID, "timeline-summary").text.startswith("1 clip ·")

    browser.get(f"{served}/ask")
    browser.find_element(By.ID, "question").send_keys(SIGN)
    Select(browser.find_element(By.ID, "video")).select_by_visible_text("sign")
    browser.find_element(By.ID, "search-button").click()
    wait(browser, lambda b: b.find_element(By.ID, "answer").is_displayed(), timeout=30)
    assert browser.find_element(By.CSS_SELECTOR, "#answer h2").text == "1 memory"
