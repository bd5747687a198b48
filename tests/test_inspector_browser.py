"""The inspector's working views in Chromium (Selenium), served by a real uvicorn server under a strict
Content-Security-Policy: ingest from the page with live progress and cancel, errors shown in the page, a paged
and filtered timeline over a few thousand memories, merge with a side-by-side check and undo, a voice linked to
a face by hand, playback or a notice, per-utterance snippets, answers that survive a reload, and every page at
800 px with long names. Screenshots go to ``out/screenshots/``.
"""

from __future__ import annotations

import time
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
from m3agent.domain import BBox, Clip, EntityKind, FaceObservation, Memory, MemoryKind, Video, VoiceSegment
from m3agent.server.app import create_app
from m3agent.settings import load_settings
from m3agent.store import open_store
from server_helpers import EMBEDDER, build_memory, jpeg, live_server, tone

pytestmark = [pytest.mark.slow, pytest.mark.media, pytest.mark.usefixtures("no_csp_violation")]
LONG_CLIPS, PER_CLIP = 120, 25  # an hour of 30 s clips, 3,000 memories
LONG_NAME = "Bartholomew-Maximilian-" * 8  # 184 characters, no space to break at
LONG_VIDEO = "a-recording-with-a-very-long-name-" * 4
DEBATE = "iianet_debate_trump_clinton.mp4"  # H.264: plays in the browser
KATIE = "hdtf_talking_heads/WDA_KatieHill_000.mp4"  # MPEG-4 Part 2: browsers cannot decode it
HAMILTON = "whitehouse_short_hamilton_clip.mp4"


def unit(i: int, dim: int) -> Any:
    return np.eye(dim, dtype=np.float32)[i]


def add_panel(path: Path, media: Path) -> dict[str, int]:
    """A served H.264 video where two faces share the screen and a voice speaks alone; an MPEG-4 Part 2 video
    with one voice line; a video with a long id; and an hour of clips with thousands of memories."""
    store = open_store(str(path))
    with store:
        store.add_video(Video("panel", str(media / DEBATE), duration_s=13.4))
        store.add_video(Video("katie", str(media / KATIE), duration_s=8.0))
        store.add_video(Video(LONG_VIDEO, f"/nowhere/{LONG_VIDEO}.mp4", duration_s=30.0))
        with store.clip(Clip("panel", 0, 0.0, 13.4)) as w:
            host = w.add_entity(EntityKind.FACE, [unit(5, 128)]).id
            guest = w.add_entity(EntityKind.FACE, [unit(6, 128)]).id
            voice = w.add_entity(EntityKind.VOICE, [unit(7, 256)]).id
            for t in (1.0, 2.0, 3.0):
                for entity, shade in ((host, 60), (guest, 180)):
                    w.add_face(FaceObservation(0, t, BBox(0, 0, 48, 64), 0.99, quality=0.9, track=entity,
                                               embedding=unit(5 if entity == host else 6, 128),
                                               crop_jpeg=jpeg(shade), entity_id=entity))
            w.add_voice(VoiceSegment(0, 4.0, 6.0, "thank you all for coming tonight", speaker=0,
                                     embedding=unit(7, 256), entity_id=voice), tone(2.0))
            w.add_memory(Memory(MemoryKind.EPISODIC, f"<face_{host}> and <face_{guest}> sit at a panel", "panel", 0,
                                0.0, 5.0, (host, guest), embedding=EMBEDDER.embed(["panel"])[0]))
        with store.clip(Clip("katie", 0, 0.0, 8.0)) as w:
            speaker = w.add_entity(EntityKind.VOICE, [unit(8, 256)]).id
            w.add_voice(VoiceSegment(0, 1.0, 3.0, "I represent my district", speaker=0, embedding=unit(8, 256),
                                     entity_id=speaker), tone(2.0))
        with store.clip(Clip(LONG_VIDEO, 0, 0.0, 30.0)) as w:
            w.add_memory(Memory(MemoryKind.EPISODIC, "a long name fits", LONG_VIDEO, 0, 0.0, 5.0, (),
                                embedding=EMBEDDER.embed(["long"])[0]))
        add_hour(store)
    return {"host": host, "guest": guest, "lone_voice": voice, "katie_voice": speaker}


def add_hour(store: Any) -> None:
    """``LONG_CLIPS`` clips of ``PER_CLIP`` memories; every fifth a fact, every seventh clip names a lighthouse."""
    store.add_video(Video("hour", "/nowhere/hour.mp4", duration_s=LONG_CLIPS * 30.0))
    vector = EMBEDDER.embed(["an hour"])[0]
    for index in range(LONG_CLIPS):
        start = index * 30.0
        with store.clip(Clip("hour", index, start, start + 30.0)) as w:
            for i in range(PER_CLIP):
                kind = MemoryKind.SEMANTIC if i % 5 == 0 else MemoryKind.EPISODIC
                place = "the lighthouse" if index % 7 == 0 and i == 1 else f"room {i}"
                w.add_memory(Memory(kind, f"clip {index} event {i} happens in {place}", "hour", index,
                                    start + i, start + i + 1, (), embedding=vector))


@pytest.fixture(scope="module")
def served(media_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = media_dir / "video"
    if not (folder / DEBATE).is_file() or not (folder / KATIE).is_file():
        pytest.skip(f"the shared videos {DEBATE} and {KATIE} are absent")
    memory = tmp_path_factory.mktemp("inspector-tool") / "memory.db"
    built = build_memory(memory)
    ids = add_panel(memory, folder)
    settings = load_settings(memory=str(memory), llm="none", server={"allowed_folders": [str(folder)]})
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        yield {"url": url, "built": built, "folder": folder, **ids}



def character_of(url: str, entity: int) -> int:
    found: int = httpx.get(f"{url}/api/entities/{entity}").json()["character"]
    return found


def problem_shown(browser: WebDriver) -> dict[str, str]:
    box = browser.find_element(By.ID, "problem")
    return {part: box.find_element(By.CLASS_NAME, f"problem-{part}").text for part in ("error", "message", "hint")}


# -- video page: paging, filter by kind, search ----------------------------------------------------------
def test_an_hour_of_memories_pages_filters_and_searches_fast(served: dict[str, Any], browser: WebDriver) -> None:
    url = served["url"]
    started = time.monotonic()
    page = httpx.get(f"{url}/videos/hour", timeout=30)
    assert page.status_code == 200 and time.monotonic() - started < 3.0, time.monotonic() - started
    assert page.text.count('class="memory ') == 10 * PER_CLIP  # one page of clips, not 3,000 memories

    browser.get(f"{url}/videos/hour")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline .clip")) == 10
    assert "page 1 of 12" in browser.find_element(By.ID, "timeline-summary").text
    browser.find_element(By.CSS_SELECTOR, "a.pager-next").click()
    wait(browser, lambda b: b.find_elements(By.ID, "clip-10"))
    assert "page 2 of 12" in browser.find_element(By.ID, "timeline-summary").text

    Select(browser.find_element(By.NAME, "kind")).select_by_value("semantic")
    navigates(browser, browser.find_element(By.CSS_SELECTOR, "#timeline-filter button").click)
    assert "kind=semantic" in browser.current_url
    kinds = {m.get_attribute("class") for m in browser.find_elements(By.CSS_SELECTOR, "#timeline .memory")}
    assert kinds == {"memory semantic"}
    assert f"{LONG_CLIPS * PER_CLIP // 5} memories match" in browser.find_element(By.ID, "timeline-summary").text

    search = browser.find_element(By.NAME, "q")
    Select(browser.find_element(By.NAME, "kind")).select_by_value("")
    search.send_keys("Lighthouse")
    navigates(browser, search.submit)
    assert "q=Lighthouse" in browser.current_url
    lighthouse_clips = -(-LONG_CLIPS // 7)
    summary = browser.find_element(By.ID, "timeline-summary").text
    assert f"{lighthouse_clips} memories match in {lighthouse_clips} clips" in summary, summary
    texts = [m.text for m in browser.find_elements(By.CSS_SELECTOR, "#timeline .memory")]
    assert len(texts) == 10 and all("lighthouse" in t for t in texts)
    shot(browser, "inspector-1-video-search")

    browser.get(f"{url}/videos/hour?t=1805")  # a citation lands on the page of its clip
    assert browser.find_elements(By.ID, "clip-60") and "page 7 of 12" in browser.page_source


# -- merge with a side-by-side check, a warning for people seen together, undo -------------------------------
def test_merge_compares_side_by_side_warns_when_together_and_undoes(served: dict[str, Any],
                                                                    browser: WebDriver) -> None:
    url, host, guest, stranger = served["url"], served["host"], served["guest"], served["built"].stranger
    browser.get(f"{url}/characters/{character_of(url, host)}")
    box = browser.find_element(By.CSS_SELECTOR, f"#entity-{host} details.merge-box")
    box.find_element(By.TAG_NAME, "summary").click()
    together = box.find_element(By.CSS_SELECTOR, f".candidate[data-entity='{guest}']")
    assert "together" in together.get_attribute("class")
    assert "together" not in box.find_element(By.CSS_SELECTOR, f".candidate[data-entity='{stranger}']"
                                              ).get_attribute("class")
    wait(browser, images_loaded)

    together.click()
    box.find_element(By.CSS_SELECTOR, "form.merge button[type=submit]").click()
    dialog = wait(browser, lambda b: b.find_element(By.ID, "merge-dialog") if b.find_element(
        By.ID, "merge-dialog").is_displayed() else None)
    warning = dialog.find_element(By.CLASS_NAME, "together-warning")
    assert warning.is_displayed() and "panel" in warning.text
    wait(browser, lambda b: len(dialog.find_elements(By.CSS_SELECTOR, ".keep-side img.crop")) >= 1
         and len(dialog.find_elements(By.CSS_SELECTOR, ".absorb-side img.crop")) >= 1 and images_loaded(b))
    shot(browser, "inspector-2-merge-warning")
    dialog.find_element(By.CSS_SELECTOR, "button[value=cancel]").click()
    assert not httpx.get(f"{url}/api/merges").json()["items"]  # cancelled: nothing merged

    box = browser.find_element(By.CSS_SELECTOR, f"#entity-{host} details.merge-box")
    box.find_element(By.CSS_SELECTOR, f".candidate[data-entity='{stranger}']").click()
    box.find_element(By.CSS_SELECTOR, "form.merge button[type=submit]").click()
    dialog = wait(browser, lambda b: b.find_element(By.ID, "merge-dialog") if b.find_element(
        By.ID, "merge-dialog").is_displayed() else None)
    assert not dialog.find_element(By.CLASS_NAME, "together-warning").is_displayed()
    dialog.find_element(By.CSS_SELECTOR, "button[value=merge]").click()
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#merges tr[data-merge]"))
    merges = httpx.get(f"{url}/api/merges").json()["items"]
    assert [(m["keep"], m["absorbed"], m["undone_at"]) for m in merges] == [(host, stranger, None)]
    assert httpx.get(f"{url}/api/entities/{stranger}").status_code == 404

    browser.get(f"{url}/characters")
    row = browser.find_element(By.CSS_SELECTOR, f"#merges tr[data-merge='{merges[0]['id']}']")
    assert f"<face_{stranger}>" in row.text
    row.find_element(By.CSS_SELECTOR, "button[data-undo]").click()
    undone = f"#merges tr[data-merge='{merges[0]['id']}'].undone"
    wait(browser, lambda b: b.execute_script(f"return document.querySelector(\"{undone}\") !== null"))
    assert httpx.get(f"{url}/api/entities/{stranger}").status_code == 200
    shot(browser, "inspector-3-merge-undone")


def test_a_voice_is_linked_to_a_face_by_hand(served: dict[str, Any], browser: WebDriver) -> None:
    url, guest, voice = served["url"], served["guest"], served["lone_voice"]
    assert character_of(url, guest) != character_of(url, voice)
    browser.get(f"{url}/characters/{character_of(url, guest)}")
    box = browser.find_element(By.CSS_SELECTOR, f"#entity-{guest} details.link-box")
    box.find_element(By.TAG_NAME, "summary").click()
    box.find_element(By.CSS_SELECTOR, f".candidate[data-entity='{voice}'] input[type=radio]").click()
    box.find_element(By.CSS_SELECTOR, "form.link-form button[type=submit]").click()
    wait(browser, lambda b: b.find_elements(By.ID, f"entity-{voice}"))
    assert character_of(url, guest) == character_of(url, voice)
    assert browser.find_elements(By.ID, f"entity-{guest}")


# -- playback: the player for H.264, a notice for MPEG-4 Part 2; per-utterance audio -------------------------
def test_playable_videos_play_others_say_why_and_each_line_plays_itself(served: dict[str, Any],
                                                                        browser: WebDriver) -> None:
    url = served["url"]
    browser.get(f"{url}/videos/panel")
    wait(browser, lambda b: b.execute_script("return document.getElementById('player').readyState") >= 1)
    assert browser.execute_script("return document.getElementById('player').videoWidth") > 0
    line = browser.find_element(By.CSS_SELECTOR, ".voices li[data-voice]")
    line.find_element(By.CSS_SELECTOR, "button.play").click()
    wait(browser, lambda b: "playing /api/voices/" in b.find_element(By.ID, "status").text)

    browser.get(f"{url}/videos/katie")
    assert not browser.find_elements(By.ID, "player")
    notice = browser.find_element(By.ID, "no-player").text
    assert "mpeg4" in notice and "MPEG-4 Part 2" in notice and "ffmpeg" in notice
    voice_id = browser.find_element(By.CSS_SELECTOR, ".voices li[data-voice]").get_attribute("data-voice")
    audio = httpx.get(f"{url}/api/voices/{voice_id}/audio")
    assert audio.status_code == 200 and audio.content[:4] == b"RIFF"
    shot(browser, "inspector-4-not-playable")


# -- errors in the page, never alert() or raw JSON -----------------------------------------------------------
def test_errors_are_shown_in_the_page_in_the_documented_shape(served: dict[str, Any], browser: WebDriver) -> None:
    url = served["url"]
    browser.get(f"{url}/videos/no-such-video")
    page = browser.find_element(By.ID, "error-page").text
    assert "Not found" in page and "no-such-video" in page and "check the address" in page
    assert "NotFoundError" not in page and "/api/" not in page  # words for a browser user (more in
    browser.get(f"{url}/characters/not-a-number")              # test_inspector_errors_browser)
    assert "Not found" in browser.find_element(By.ID, "error-page").text

    browser.get(url + "/")
    form = browser.find_element(By.ID, "path-form")
    form.find_element(By.NAME, "path").send_keys("/etc/passwd")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, lambda b: b.find_element(By.ID, "problem").is_displayed())
    problem = problem_shown(browser)
    assert problem["error"] == "Not allowed" and "outside the allowed folders" in problem["message"]
    assert problem["hint"]
    shot(browser, "inspector-5-error")


# -- ask: answers survive a reload --------------------------------------------------------------------------
def test_answers_survive_a_reload(served: dict[str, Any], browser: WebDriver) -> None:
    url = served["url"]
    browser.get(f"{url}/ask")
    browser.execute_script("localStorage.clear()")
    browser.find_element(By.ID, "question").send_keys("What does the soup need?")
    browser.find_element(By.ID, "ask-button").click()
    wait(browser, lambda b: b.find_element(By.ID, "answer").is_displayed(), timeout=120)
    answer = browser.find_element(By.CSS_SELECTOR, "#answer .answer-text").text
    browser.refresh()
    wait(browser, lambda b: b.find_element(By.ID, "answer").is_displayed())
    assert browser.find_element(By.CSS_SELECTOR, "#answer .answer-text").text == answer
    assert "What does the soup need?" in browser.find_element(By.ID, "history").text

    browser.execute_script("localStorage.setItem('m3agent.ask.pending', JSON.stringify("
                           "{question: 'Who chops onions?', video: '', at: Date.now()}))")
    browser.refresh()  # a reload in the middle of an answer says so and offers to ask again
    assert "Who chops onions?" in browser.find_element(By.ID, "interrupted").text
    browser.find_element(By.ID, "ask-again").click()
    wait(browser, lambda b: "Who chops onions?" in b.find_element(By.ID, "history").text, timeout=120)
    assert not browser.find_element(By.ID, "interrupted").is_displayed()


# -- 800 px with long names ----------------------------------------------------------------------------------
def test_every_page_holds_at_800_px_with_long_names(served: dict[str, Any], browser: WebDriver) -> None:
    url, face = served["url"], served["built"].face
    character = character_of(url, face)
    assert httpx.patch(f"{url}/api/characters/{character}", json={"name": LONG_NAME}).status_code == 200
    browser.set_window_size(800, 900)
    try:
        pages = {"home": "/", "video": "/videos/talk", "long-video": f"/videos/{LONG_VIDEO}",
                 "characters": "/characters", "character": f"/characters/{character}", "ask": "/ask"}
        for name, path in pages.items():
            browser.get(url + path)
            wait(browser, lambda b: b.execute_script("return document.readyState") == "complete")
            assert overflow(browser) == 0, (name, overflow(browser))
            shot(browser, f"inspector-800-{name}")
        browser.get(url + "/")
        width = browser.execute_script("return window.innerWidth")
        for button in browser.find_elements(By.CSS_SELECTOR, "#videos button[data-forget]"):
            assert button.is_displayed() and button.rect["x"] + button.rect["width"] <= width
    finally:
        browser.set_window_size(1280, 1000)


# -- ingest from the page: upload with progress, a server path, cancel -------------------------------------
@pytest.fixture()
def empty_server(media_dir: Path, tmp_path: Path) -> Iterator[str]:
    """A server over a new memory (the packaged embedder), reading the shared videos by path."""
    settings = load_settings(memory=str(tmp_path / "memory.db"), llm="none",
                             server={"allowed_folders": [str(media_dir / "video")]})
    with live_server(strict_csp(create_app(settings, mcp=False))) as url:
        yield url


def test_ingest_from_the_page_shows_progress_and_cancels(empty_server: str, media_dir: Path,
                                                         browser: WebDriver) -> None:
    url, folder = empty_server, media_dir / "video"
    if not (folder / HAMILTON).is_file() or not (folder / DEBATE).is_file():
        pytest.skip(f"the shared videos {HAMILTON} and {DEBATE} are absent")
    browser.get(url + "/")
    assert browser.find_element(By.ID, "no-videos").is_displayed()
    form = browser.find_element(By.ID, "upload-form")
    form.find_element(By.NAME, "file").send_keys(str(folder / HAMILTON))
    form.find_element(By.NAME, "video_id").send_keys("hamilton")
    form.find_element(By.NAME, "max_clips").send_keys("1")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job] a[href='/videos/hamilton']"))

    path_form = browser.find_element(By.ID, "path-form")  # queued behind the upload, then cancelled
    path_form.find_element(By.NAME, "path").send_keys(str(folder / DEBATE))
    path_form.find_element(By.NAME, "video_id").send_keys("debate-copy")
    path_form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    row = "#jobs tr[data-job]:has(a[href='/videos/debate-copy'])"
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, f"{row} button[data-cancel]"))
    browser.execute_script(f"document.querySelector(\"{row} button[data-cancel]\").click()")  # atomic: rows refresh
    wait(browser, lambda b: b.execute_script(f"return document.querySelector(\"{row}\").dataset.state")
         == "cancelled", timeout=300)
    shot(browser, "inspector-6-ingest-running")

    hamilton = "#jobs tr[data-job]:has(a[href='/videos/hamilton'])"
    seen = set()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # the table refreshes by itself: no reload
        state = browser.execute_script(f"return document.querySelector(\"{hamilton}\").dataset.state")
        seen.add(state)
        if state not in ("queued", "running"):
            break
        time.sleep(0.3)
    assert state == "done", state
    assert "running" in seen or "queued" in seen
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#videos tr[data-video=hamilton]"))
    assert not browser.find_element(By.ID, "no-videos").is_displayed()
    progress = browser.execute_script(f"const p = document.querySelector(\"{hamilton} progress\");"
                                      " return [p.value, p.max]")
    assert progress == [1, 1], progress
    assert "debate-copy" not in [v["video_id"] for v in httpx.get(f"{url}/api/videos").json()["items"]]
    shot(browser, "inspector-7-ingested")
