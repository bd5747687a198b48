"""State-changing requests from another site are refused (403, ``{error, message, hint}``), with or without a
token; the inspector's own pages, listed CORS origins and clients that are not browsers (no ``Origin``, no
``Sec-Fetch-Site``: curl, scripts, SDKs) go through. Real HTTP servers; the last test drives a real Chromium."""

from __future__ import annotations

import http.server
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
import httpx

from m3agent.media.snippets import wav_bytes
from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import Built, build_memory, live_server, tone

TOKEN = "t" * 32
EVIL = {"origin": "http://evil.example", "sec-fetch-site": "cross-site"}


@pytest.fixture()
def built(tmp_path: Path) -> Built:
    return build_memory(tmp_path / "memory.db")


def serve(tmp_path: Path, **server: Any) -> Any:
    settings = load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none", server=server)
    return live_server(create_app(settings, mcp=False))


def uploads(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "memory-server" / "uploads"
    return list(folder.iterdir()) if folder.exists() else []


def writes(built: Built) -> list[tuple[str, str, dict[str, Any]]]:
    """A state-changing request of every kind, bodiless ones included."""
    return [
        ("POST", "/api/jobs/upload", {"files": {"file": ("a.wav", tone(), "audio/wav")}}),
        ("POST", "/api/forget", {"json": {"video": "walk"}}),
        ("DELETE", f"/api/memories/{built.memories[0]}", {}),
        ("PATCH", f"/api/characters/{built.face}", {"json": {"name": "Mallory"}}),
        ("POST", "/api/jobs/nope/cancel", {}),
        ("POST", "/api/merges/1/undo", {}),
    ]


def test_cross_site_writes_are_refused_without_a_token(tmp_path: Path, built: Built) -> None:
    with serve(tmp_path) as url, httpx.Client(base_url=url) as client:
        for headers in (EVIL, {"origin": "http://evil.example"}, {"sec-fetch-site": "cross-site"},
                        {"origin": "null"}, {"origin": "http://127.0.0.1:1", "sec-fetch-site": "same-site"},
                        {"origin": "http://localhost:1"}):
            for method, path, kwargs in writes(built):
                answer = client.request(method, path, headers=headers, **kwargs)
                assert answer.status_code == 403, (method, path, headers, answer.text)
                body = answer.json()
                assert set(body) == {"error", "message", "hint"} and "origin" in body["hint"].lower()
        assert client.get("/api/jobs").json()["total"] == 0 and uploads(tmp_path) == []
        assert client.get("/api/videos").json()["total"] == 2
        assert client.get(f"/api/memories/{built.memories[0]}").status_code == 200
        assert client.get("/api/videos", headers=EVIL).status_code == 200  # reads are CORS's business


def test_same_origin_pages_and_clients_without_a_browser_go_through(tmp_path: Path, built: Built) -> None:
    with serve(tmp_path) as url, httpx.Client(base_url=url) as client:
        page = {"origin": url, "sec-fetch-site": "same-origin"}
        renamed = client.patch(f"/api/characters/{built.face}", json={"name": "Gina"}, headers=page)
        assert renamed.status_code == 200
        assert client.post("/api/jobs/nope/cancel", headers=page).status_code == 404  # reached the handler
        assert client.post("/api/jobs/nope/cancel", headers={"sec-fetch-site": "none"}).status_code == 404
        assert client.post("/api/jobs/nope/cancel").status_code == 404  # curl sends neither header
        assert client.post("/api/forget", json={"video": "walk"}).status_code == 200


def test_a_token_does_not_let_another_site_in(tmp_path: Path, built: Built) -> None:
    bearer = {"authorization": f"Bearer {TOKEN}"}
    with serve(tmp_path, token=TOKEN) as url, httpx.Client(base_url=url) as client:
        for headers in ({**EVIL, "cookie": f"m3agent_token={TOKEN}"}, {**EVIL, **bearer}):
            assert client.post("/api/forget", json={"video": "walk"}, headers=headers).status_code == 403
        assert client.post("/api/forget", json={"video": "walk"}, headers=bearer).status_code == 200


def test_listed_cors_origins_may_write(tmp_path: Path, built: Built) -> None:
    app = "http://app.example:3000"
    with serve(tmp_path, cors_origins=[app]) as url, httpx.Client(base_url=url) as client:
        headers = {"origin": app, "sec-fetch-site": "cross-site"}
        assert client.post("/api/forget", json={"video": "walk"}, headers=headers).status_code == 200
        assert client.post("/api/forget", json={"video": "talk"}, headers=EVIL).status_code == 403


ATTACK = """<!doctype html><script>
const data = new FormData();
data.append("file", new Blob([new Uint8Array(%s)], {type: "audio/wav"}), "a.wav");
Promise.allSettled([
  fetch("%s/api/jobs/upload", {method: "POST", mode: "no-cors", body: data}),
  fetch("%s/api/forget", {method: "POST", mode: "no-cors", body: '{"video": "walk"}'}),
]).then(() => { document.title = "sent"; });
</script>"""


def test_a_page_of_another_site_in_chromium_changes_nothing(tmp_path: Path, built: Built) -> None:
    pytest.importorskip("selenium", reason="needs selenium: pip install selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.skip("Debian chromium + chromium-driver are not installed (scripts/setup.sh installs them as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    wav = list(wav_bytes(np.zeros(16000, dtype=np.float32), 16000))
    with serve(tmp_path) as url, attacker(ATTACK % (wav, url, url)) as page:
        browser = webdriver.Chrome(options=options, service=Service(driver_path))
        try:
            browser.get(page)  # http://localhost:PORT: another site than http://127.0.0.1:PORT
            WebDriverWait(browser, 30).until(lambda b: b.title == "sent")
        finally:
            browser.quit()
        time.sleep(0.5)
        with httpx.Client(base_url=url) as client:
            assert client.get("/api/jobs").json()["total"] == 0 and uploads(tmp_path) == []
            assert client.get("/api/videos").json()["total"] == 2


@contextmanager
def attacker(html: str) -> Iterator[str]:
    """Serve one page from another site: ``localhost`` while the memory's server is called ``127.0.0.1``."""
    body = html.encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{site.server_address[1]}/"
    finally:
        site.shutdown()
