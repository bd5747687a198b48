"""Errors in the inspector as a browser user reads them, in Chromium under a strict Content-Security-Policy: the
banner stays until the user has read it (the jobs poll never clears it), and neither the banner, the error page
nor the jobs table shows a Python class name as a title, an API endpoint as a hint, Ctrl-C, a process id or a
path on the server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from browser_helpers import strict_csp, wait
from m3agent.server.app import create_app
from m3agent.server.web import browser_text
from m3agent.settings import load_settings
from server_helpers import build_memory, live_server

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_csp_violation")]

# what a browser user should never read in an error
UNFIT = re.compile(r"[A-Z][a-z]+[A-Z]\w*Error|NotAvailableYet|/api/|\b(GET|POST) /|ctrl-c|\bpid\b|/tmp/|/srv/",
                   re.IGNORECASE)
LOCKED = {"error": "video 'talk' is being ingested by another process (pid 4242 on box, since 2026-11-28T10:00)"
                   " reading /srv/m3agent/uploads/talk.mp4",
          "hint": "wait for that ingest to finish, or stop it (Ctrl-C keeps its done clips), then retry"}
JOB = {"video_id": "talk", "source": "talk.mp4", "clips_already_done": 0, "clips_done": 1, "clips_total": 4,
       "rtf": None, "error": None, "hint": None}
# before the page's scripts: GET /api/jobs answers a job that keeps running (so the page polls every second) and
# a job that failed on a held lock; every poll is counted
FAKE_JOBS = """
const PAGE = JOBS;
const real = window.fetch;
window.__polls = 0;
window.fetch = (url, options) => {
  if (typeof url === "string" && url.startsWith("/api/jobs?")) {
    window.__polls += 1;
    return Promise.resolve(new Response(JSON.stringify(PAGE), {status: 200,
      headers: {"content-type": "application/json"}}));
  }
  return real(url, options);
};
""".replace("JOBS", json.dumps({"items": [{**JOB, "id": "a" * 32, "state": "running"},
                                           {**JOB, "id": "b" * 32, "state": "failed", **LOCKED}], "total": 2}))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("inspector-errors")
    memory = folder / "memory.db"
    build_memory(memory)
    settings = load_settings(memory=str(memory), llm="none", server={"allowed_folders": [str(folder)]})
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        yield url



def banner(browser: WebDriver) -> dict[str, str]:
    box = browser.find_element(By.ID, "problem")
    return {part: box.find_element(By.CLASS_NAME, f"problem-{part}").text for part in ("error", "message", "hint")}


def test_the_jobs_poll_leaves_the_banner_and_jobs_read_as_words(served: str, browser: WebDriver) -> None:
    script: Any = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FAKE_JOBS})
    try:
        browser.get(served + "/")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#jobs tr[data-state=failed]"), timeout=10)
        failed = browser.find_element(By.CSS_SELECTOR, "#jobs tr[data-state=failed] .error-cell").text
        assert "being ingested by another process" in failed and "talk.mp4" in failed
        assert not UNFIT.search(failed), failed

        form = browser.find_element(By.ID, "path-form")
        form.find_element(By.NAME, "path").send_keys("/etc/passwd")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait(browser, lambda b: b.find_element(By.ID, "problem").is_displayed(), timeout=10)
        shown = banner(browser)
        assert shown["error"] == "Not allowed" and "outside the allowed folders" in shown["message"], shown
        assert shown["hint"] and not UNFIT.search(" ".join(shown.values())), shown

        polls = browser.execute_script("return window.__polls")
        wait(browser, lambda b: b.execute_script("return window.__polls") >= polls + 2, timeout=10)
        assert browser.find_element(By.ID, "problem").is_displayed()  # two polls later, still there
        browser.find_element(By.CSS_SELECTOR, "#problem .problem-close").click()
        assert not browser.find_element(By.ID, "problem").is_displayed()
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})


def test_a_failed_edit_reads_as_words(served: str, browser: WebDriver) -> None:
    browser.get(served + "/videos/talk")
    browser.execute_script("window.confirm = () => true")
    browser.execute_script("document.querySelector('[data-forget=memory]').dataset.id = '999999999'")
    browser.find_element(By.CSS_SELECTOR, "[data-forget=memory]").click()
    wait(browser, lambda b: b.find_element(By.ID, "problem").is_displayed(), timeout=10)
    shown = banner(browser)
    assert shown["error"] == "Not found" and not UNFIT.search(" ".join(shown.values())), shown
    assert shown["hint"] == "check the address, or go back to the videos"


def test_error_pages_speak_to_a_browser_user(served: str, browser: WebDriver) -> None:
    browser.get(f"{served}/videos/no-such-video")
    page = browser.find_element(By.ID, "error-page")
    assert page.find_element(By.CLASS_NAME, "problem-error").text == "Not found"
    assert "no-such-video" in page.text and not UNFIT.search(page.text), page.text
    assert browser.title.startswith("Not found")
    browser.get(f"{served}/characters/not-a-number")
    page = browser.find_element(By.ID, "error-page")
    assert "character ids are numbers" in page.text and not UNFIT.search(page.text), page.text


@pytest.mark.parametrize(("name", "title"), [("NotFoundError", "Not found"), ("AccessDeniedError", "Not allowed"),
                                             ("SomeNewThingError", "Some new thing")])
def test_error_titles_are_words(name: str, title: str) -> None:
    assert browser_text.title(name) == title


def test_messages_and_hints_lose_what_only_the_server_knows(tmp_path: Path) -> None:
    problem = browser_text.problem(
        {"error": "StoreError", "message": LOCKED["error"], "hint": LOCKED["hint"]}, 400)
    assert problem["message"] == "video 'talk' is being ingested by another process reading talk.mp4"
    assert problem["hint"] == browser_text.BROWSER_HINT and problem["error"] == "Memory problem"
    assert browser_text.hint("list what exists: GET /api/videos", 404) == browser_text.BROWSER_HINTS[404]
    assert browser_text.hint("e.g. ?t=3:10", 422) == "e.g. ?t=3:10"
    assert browser_text.message("see https://example.org/a/b at 1/2") == "see https://example.org/a/b at 1/2"
