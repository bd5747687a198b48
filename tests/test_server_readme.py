"""The README's curl examples, run as written (only URL and VIDEO replaced) against a real server."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
import httpx

from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import build_memory, live_server, tone

README = Path(__file__).resolve().parents[1] / "README.md"


def curl_block() -> list[str]:
    section = re.search(r"^## Server: .*?(?=^## )", README.read_text("utf-8"), re.S | re.M)
    assert section, "README.md has no '## Server: ...' section"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(0), re.S)
    lines = [line for block in blocks for line in block.splitlines() if line.startswith(("curl ", "URL=", "VIDEO="))]
    assert sum(line.startswith("curl ") for line in lines) >= 10
    return lines


def test_readme_curl_examples_work(tmp_path: Path) -> None:
    media = tmp_path / "videos"
    media.mkdir()
    video = media / "lecture.wav"
    video.write_bytes(tone(2.0))
    build_memory(tmp_path / "mem.db", media)
    settings = load_settings(memory=str(tmp_path / "mem.db"), embedder="hash", llm="none",
                             perception={"voices": False, "faces": False},
                             server={"allowed_folders": [str(media)]})
    with live_server(create_app(settings, mcp=False)) as url:
        for line in curl_block():
            if line.startswith("URL="):
                line = f"URL={url}"
            elif line.startswith("VIDEO="):
                line = f"VIDEO={video}"
            else:
                line += " -w '\\n%{http_code}'"
            out = subprocess.run(["bash", "-c", f"{_env(url, video)}\n{line}"], capture_output=True, text=True,
                                 cwd=tmp_path, timeout=120)
            if line.startswith("curl "):
                status = out.stdout.strip().splitlines()[-1]
                assert out.returncode == 0 and status.startswith("2"), (line, out.stdout[-500:], out.stderr)
        jobs = _settled(url)
        assert [(j["state"], j["video_id"]) for j in jobs] == [("done", "lecture")] * 2
        assert jobs[-1]["clips_done"] == 1 and jobs[0]["clips_already_done"] == 1  # by path, then the upload
    assert (tmp_path / "entity1.jpg").read_bytes()[:2] == b"\xff\xd8"


def _env(url: str, video: Path) -> str:
    return f"URL={url}\nVIDEO={video}"


def _settled(url: str) -> list[dict[str, object]]:
    for _ in range(600):
        jobs: list[dict[str, object]] = httpx.get(f"{url}/api/jobs").json()["items"]
        if all(j["state"] not in ("queued", "running") for j in jobs):
            return jobs
        time.sleep(0.2)
    raise AssertionError("the README's jobs did not finish")
