"""The CLI lists its commands, reports errors without tracebacks and prints JSON where asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "m3agent"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_help_lists_commands() -> None:
    out = run("--help")
    assert out.returncode == 0
    for command in ("ingest", "ask", "show", "bench", "serve", "doctor"):
        assert command in out.stdout


def test_doctor_json_reports_every_backend() -> None:
    out = run("doctor", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    names = {c["name"] for c in report["checks"]}
    assert {"sqlite store", "text embedder minilm", "whisper base (ASR default)", "local LLM SmolLM2 (gguf)"} <= names
    # The PostgreSQL store and Ray are extras (installed here); the server works, so it is reported.
    assert {c["status"] for c in report["checks"] if "postgres" in c["name"] or "ray" in c["name"]} == {"ok"}
    assert {"REST server (FastAPI)", "MCP tools (mcp SDK)"} <= names
    for check in report["checks"]:
        assert check["status"] in ("ok", "missing", "error")
        if check["status"] != "ok":
            assert check["fix"], f"{check['name']} has no fix"


def test_serve_off_loopback_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    out = run("serve", "--memory", str(tmp_path / "m.db"), "--host", "0.0.0.0", cwd=tmp_path)
    assert out.returncode == 2
    assert "token is required" in out.stderr and "M3AGENT_SERVER__TOKEN" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "m.db").exists()


def test_bad_settings_give_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "m3agent.toml").write_text("memory = [broken\n")
    out = run("show", cwd=tmp_path)
    assert out.returncode == 2
    assert "error:" in out.stderr and "Traceback" not in out.stderr


def test_show_on_a_file_that_is_not_a_memory(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_bytes(b"this is not a database" * 100)
    out = run("show", "--memory", str(bogus), "--json")
    assert out.returncode != 0
    assert "Traceback" not in out.stderr and "error:" in out.stderr
