"""Chromium through Selenium for the inspector tests: the driver, waits, screenshots, layout checks."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

SHOTS = Path(__file__).resolve().parents[1] / "out" / "screenshots"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; media-src 'self'; "
       "object-src 'none'; frame-ancestors 'none'")


def chromium(width: int = 1280, height: int = 1000) -> WebDriver:
    """Debian's headless chromium (skips when it is not installed), with the browser log kept."""
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not binary or not driver:
        pytest.skip("Debian chromium + chromium-driver are not installed (scripts/setup.sh installs them as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                "--autoplay-policy=no-user-gesture-required", "--mute-audio"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(driver))


def shot(browser: WebDriver, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    browser.save_screenshot(str(path))
    return path


def wait(browser: WebDriver, condition: Any, timeout: float = 30) -> Any:
    """Poll ``condition``; elements that vanish while the page reloads are looked up again, whichever way
    Chromium reports the vanishing (see ``_torn_down``)."""
    def polled(driver: WebDriver) -> Any:
        try:
            return condition(driver)
        except WebDriverException as error:
            if _torn_down(error):
                return False
            raise
    return WebDriverWait(browser, timeout).until(polled)


def _torn_down(error: WebDriverException) -> bool:
    """Whether ``error`` says only that the node queried belongs to a page being replaced."""
    return isinstance(error, StaleElementReferenceException) or "does not belong to the document" in str(error)


def gone(element: Any) -> Any:
    """A wait condition: ``element``'s page has been replaced. Chromium answers a query on a node of a page
    that is being torn down either with a stale reference or, mid-teardown, with "unhandled inspector error:
    Node with given id does not belong to the document"; both mean the old page is gone."""
    def condition(_: WebDriver) -> bool:
        try:
            element.is_enabled()
        except WebDriverException as error:
            if _torn_down(error):
                return True
            raise
        return False
    return condition


def navigates(browser: WebDriver, action: Any) -> None:
    """Run ``action`` (a click that loads a page) and wait until the new page has replaced the old and loaded:
    a condition on the address alone can hold before the old page is gone, and its elements then go stale."""
    old = browser.find_element(By.TAG_NAME, "html")
    action()
    wait(browser, gone(old))
    wait(browser, lambda b: b.execute_script("return document.readyState") == "complete")


def images_loaded(browser: WebDriver) -> bool:
    return bool(browser.execute_script(
        "return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"))


def overflow(browser: WebDriver) -> int:
    """How many pixels the page is wider than the window (0: no horizontal scrolling)."""
    return int(browser.execute_script(
        "return Math.max(0, document.documentElement.scrollWidth - window.innerWidth)"))


def strict_csp(app: Any) -> Any:
    """``app`` with a strict Content-Security-Policy on every answer: inline scripts or styles would break."""
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        async def send_with_csp(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"content-security-policy", CSP.encode())]}
            await send(message)

        await app(scope, receive, send_with_csp)

    return wrapped


def csp_refusals(browser: WebDriver) -> list[str]:
    """The Content-Security-Policy violations in the browser's log since it was last read."""
    return [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
