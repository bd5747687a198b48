"""The inspector's pages and the API docs satisfy the server's Content-Security-Policy in a real browser
(Debian's headless chromium through Selenium): nothing is refused, and the pages' scripts still work."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import build_memory, live_server

pytestmark = pytest.mark.slow


@pytest.fixture()
def browser() -> Iterator[WebDriver]:
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not binary or not driver:
        pytest.skip("Debian chromium + chromium-driver are not installed (scripts/setup.sh installs them as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(options=options, service=Service(driver))
    try:
        yield chrome
    finally:
        chrome.quit()


def test_pages_satisfy_the_content_security_policy(tmp_path: Path, browser: WebDriver) -> None:
    (tmp_path / "media").mkdir()
    build_memory(tmp_path / "memory.db", tmp_path / "media")
    settings = load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                             server={"allowed_folders": [str(tmp_path / "media")]})
    with live_server(create_app(settings, mcp=False)) as url:
        for page in ("/", "/videos/talk", "/characters", "/characters/1", "/docs"):
            browser.get(url + page)
            assert browser.execute_script("return document.readyState") == "complete"
        browser.get(url + "/ask")
        browser.find_element(By.ID, "question").send_keys("What does the soup need?")
        browser.find_element(By.ID, "ask-button").click()
        WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "answer").is_displayed())
        refused = [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert not refused, refused
