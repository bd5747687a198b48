"""Hostile CLI input through the real ``m3agent`` binary: ranges checked at the boundary, stored text shown literally.

Out-of-range numbers are usage errors (exit 2) with the range in the message,
never an internal error. Names, memories, video ids and questions holding Rich
markup, terminal escapes (ESC, OSC links, BEL) or control characters are
printed as visible text: nothing in the output can restyle the terminal.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from m3agent.domain import Clip, EntityKind, Memory, MemoryKind, Video
from m3agent.embed.hashing import HashingEmbedder
from m3agent.store import open_store
from test_cli import BIN

VIDEO = "v[red]1\x1b[31m"
NAME = "[bold red]Evil[/] \x1b[31mX\u202e"
TEXT = "[link=http://evil.example]Ann[/link] \x1b]8;;http://x\x07 walks \x1b[2J in\x9b1m."


@pytest.fixture(scope="module")
def hostile_memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "m.db"
    embedder = HashingEmbedder(64)
    with open_store(str(path)) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        store.add_video(Video(VIDEO, source="x.mp4", duration_s=60.0))
        clip = Clip(VIDEO, 0, 0.0, 30.0)
        with store.clip(clip) as writer:
            entity = writer.add_entity(EntityKind.FACE, [np.ones(8, np.float32)])
            writer.add_memory(Memory(kind=MemoryKind.EPISODIC, text=TEXT, video_id=VIDEO, clip_index=0,
                                     start_s=0.0, end_s=30.0, entity_ids=(entity.id,),
                                     embedding=embedder.embed([TEXT])[0]))
        store.rename_entity(entity.id, NAME)
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The real binary with a wide terminal, so tables do not wrap or shorten the cells under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3AGENT_")} | {"COLUMNS": "400"}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300, env=env)


def _no_raw_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\u202e" not in text, text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "q", "--before-clip", "99999999999999999999"], "not in the range 0<=x<=2147483647"),
        (["ask", "q", "--before-clip", "-1"], "not in the range 0<=x<=2147483647"),
        (["ask", "q", "--rounds", "0"], "--rounds"),
        (["delete", "entity", "abc", "--yes"], "'abc' is not a valid integer"),
        (["delete", "memory", "99999999999999999999", "--yes"], "not in the range 1<=x<="),
        (["delete", "entity", "0", "--yes"], "not in the range 1<=x<="),
        (["rename", "x", "Ann"], "'x' is not a valid integer"),
        (["merge", "1", "99999999999999999999"], "ABSORB"),
        (["show", "memories", "--clip", "-2"], "--clip"),
        (["show", "memories", "--limit", "-5"], "--limit"),
    ],
)
def test_bad_numbers_are_usage_errors(hostile_memory: Path, args: list[str], message: str) -> None:
    out = run(*args, "--memory", str(hostile_memory))
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert message in out.stderr
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr


def test_show_prints_stored_names_and_texts_literally(hostile_memory: Path) -> None:
    entities = run("show", "entities", "--memory", str(hostile_memory))
    memories = run("show", "memories", "--memory", str(hostile_memory))
    clip = run("show", "--clip", "0", "--memory", str(hostile_memory))
    for out in (entities, memories, clip):
        assert out.returncode == 0, out.stderr
        _no_raw_controls(out.stdout)
    assert "[bold red]Evil[/] \\x1b[31mX\\u202e" in entities.stdout
    assert "v[red]1\\x1b[31m" in entities.stdout
    assert "[link=http://evil.example]Ann[/link] \\x1b]8;;http://x\\x07 walks \\x1b[2J in\\x9b1m." in memories.stdout
    assert "\\x1b]8;;http://x\\x07" in clip.stdout and "v[red]1\\x1b[31m clip 0" in clip.stdout


def test_ask_echoes_questions_and_memories_literally(hostile_memory: Path) -> None:
    question = "who walks \x1b[2J[red]in[/red]\x07?\rX"
    out = run("ask", question, "--memory", str(hostile_memory))
    assert out.returncode == 0, out.stderr
    _no_raw_controls(out.stdout)
    assert "\r" not in out.stdout
    assert "who walks \\x1b[2J[red]in[/red]\\x07?\\x0dX" in out.stdout
    assert "[link=http://evil.example]Ann[/link]" in out.stdout
    assert "[v[red]1\\x1b[31m clip 0" in out.stdout


def test_errors_quote_user_text_literally(hostile_memory: Path) -> None:
    out = run("show", "memories", "--video", "x\x1b[31m[link=http://e]y[/link]", "--memory", str(hostile_memory))
    assert out.returncode != 0
    _no_raw_controls(out.stderr)
    assert "x\\x1b[31m[link=http://e]y[/link]" in out.stderr


def test_rename_and_delete_echo_literally(hostile_memory: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    copy.write_bytes(hostile_memory.read_bytes())
    out = run("rename", "1", "[blink]Bob[/blink]\x1b[5m", "--memory", str(copy))
    assert out.returncode == 0, out.stderr
    assert "name: [blink]Bob[/blink]\\x1b[5m" in out.stdout
    out = run("delete", "video", "no[red]such\x1b", "--yes", "--memory", str(copy))
    assert out.returncode != 0
    _no_raw_controls(out.stderr)
    assert "no[red]such\\x1b" in out.stderr
