"""The ask page in Chromium under a strict Content-Security-Policy: one question at a time (Ask and Search are
disabled while an answer streams), the answer and its steps announced to screen readers (aria-live), and a
memory without videos that says so instead of offering to ask it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from browser_helpers import strict_csp, wait
from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import build_memory, live_server

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_csp_violation")]

# the page's fetch of the answer stream waits until the test releases it, so the busy state can be seen
HOLD_STREAM = """
const real = window.fetch;
window.__asks = 0;
window.fetch = (url, options) => {
  if (url !== "/api/ask/stream") return real(url, options);
  window.__asks += 1;
  return new Promise((resolve) => { window.__release = () => resolve(real(url, options)); });
};
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    memory = tmp_path_factory.mktemp("inspector-ask") / "memory.db"
    build_memory(memory)
    with live_server(strict_csp(create_app(load_settings(memory=str(memory), llm="none"), mcp=False))) as url:
        yield url


@pytest.fixture()
def empty_served(tmp_path: Path) -> Iterator[str]:
    settings = load_settings(memory=str(tmp_path / "memory.db"), llm="none")
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        yield url



def disabled(browser: WebDriver, element_id: str) -> bool:
    return bool(browser.execute_script(f"return document.getElementById('{element_id}').disabled"))


def test_ask_is_disabled_while_the_answer_streams_and_the_answer_is_live(served: str, browser: WebDriver) -> None:
    browser.get(f"{served}/ask")
    browser.execute_script("localStorage.clear()")
    browser.refresh()
    assert not browser.find_elements(By.ID, "empty-memory")
    for live in ("answer", "steps"):
        assert browser.find_element(By.ID, live).get_attribute("aria-live") == "polite"
    assert not disabled(browser, "ask-button") and not disabled(browser, "search-button")

    browser.execute_script(HOLD_STREAM)
    question = browser.find_element(By.ID, "question")
    question.send_keys("What does the soup need?")
    browser.find_element(By.ID, "ask-button").click()
    wait(browser, lambda b: disabled(b, "ask-button"), timeout=10)
    assert disabled(browser, "search-button")
    assert browser.find_element(By.ID, "answer").get_attribute("aria-busy") == "true"
    question.send_keys(Keys.ENTER)  # a second submit while the first streams starts nothing
    browser.execute_script("document.getElementById('ask-form').requestSubmit()")
    assert browser.execute_script("return window.__asks") == 1

    browser.execute_script("window.__release()")
    wait(browser, lambda b: b.find_element(By.ID, "answer").is_displayed() and not disabled(b, "ask-button"),
         timeout=60)
    assert not disabled(browser, "search-button")
    assert browser.find_element(By.ID, "answer").get_attribute("aria-busy") == "false"
    assert browser.find_element(By.CSS_SELECTOR, "#answer .answer-text").text
    assert browser.execute_script("return window.__asks") == 1


def test_an_empty_memory_says_so_on_the_ask_page(empty_served: str, browser: WebDriver) -> None:
    browser.get(f"{empty_served}/ask")
    notice = browser.find_element(By.ID, "empty-memory")
    assert notice.is_displayed() and "no video yet" in notice.text
    assert notice.find_element(By.TAG_NAME, "a").get_attribute("href") == f"{empty_served}/"
    assert disabled(browser, "ask-button") and disabled(browser, "search-button")
