"""Result files of a benchmark run: an append-only JSONL (resumable) and Markdown sections."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from m3agent.errors import BenchmarkError


class JsonlLog:
    """One JSON object per line; lines already present are read back so a run can resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def read(self) -> list[dict[str, Any]]:
        """Records already written; a torn last line (a killed run) is ignored."""
        if not self.path.exists():
            return []
        records = []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if number != len(lines):
                    raise BenchmarkError(
                        f"{self.path} line {number} is not JSON", hint="fix or move the file, then resume"
                    ) from None
        return records

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._heal_torn_tail()
            with self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
                out.flush()

    def _heal_torn_tail(self) -> None:
        """Drop a partial last line left by a killed run, so the next record starts on its own line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if data.endswith(b"\n"):
            return
        self.path.write_bytes(data[: data.rfind(b"\n") + 1])


def section_pattern(heading: str) -> re.Pattern[str]:
    """A ``## heading`` section of a markdown file up to the next ``## `` (group 1: its body)."""
    return re.compile(rf"^## {re.escape(heading)}[ \t]*\n(.*?)(?=^## |\Z)", re.DOTALL | re.MULTILINE)


def replace_section(doc: Path, heading: str, body: str) -> None:
    """Write ``## heading`` + ``body`` into ``doc``, replacing that section if present, keeping the others."""
    title = f"## {heading}"
    section = f"{title}\n\n{body.strip()}\n"
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    pattern = section_pattern(heading)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text, encoding="utf-8")


def run_line(env: dict[str, Any], command: str, load_average: float) -> str:
    """The sentence every docs section opens with: machine, date, commit, command and load."""
    machine = env["machine"]
    return (f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['ram_gib']} GiB. Date: {env['date']}. "
            f"Commit: {env['git_commit']}. Command: `{command.strip()}`. Load average at start: {load_average}.")
