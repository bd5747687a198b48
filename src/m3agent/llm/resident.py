"""A local model kept loaded between short-lived processes: a second ``m3agent ask`` does not load it again.

Every new process that answers with a local model first starts its worker and loads the model (1.1 s for
qwen-1.5b on 2 cores) and restores the fixed prompt prefix from disk: about a fifth of a fresh ``m3agent ask``
(docs/benchmarks.md, "A model kept loaded between questions"). With ``keep_alive_s`` > 0 the worker
(:mod:`m3agent.llm.worker`, or another runtime's of the same protocol) runs under a small resident process,
``python -m m3agent.llm.resident``, which keeps it for ``keep_alive_s`` seconds after the last request and
answers on a Unix socket in a folder only this user may open (:func:`runtime_folder`); the next process connects
instead of loading, as Ollama's ``keep_alive`` does.

- One resident process per model file and options: the socket's name is a digest of the worker module, the
  file (path, size, time) and the options, so a changed file or setting gets a process of its own.
- Each connection has a thread of its own; the model answers their requests one at a time, in order.
- A native crash of the worker reaches the client as :class:`~m3agent.errors.ModelCrashError` with the worker's
  last words, as with a worker of its own (the resident process runs no native code; its next request starts a
  fresh worker). A resident process that is gone (killed, or idle and ended) is started again.
- It ends after ``keep_alive_s`` idle seconds, or on :func:`stop_all` (``m3agent models stop``); its worker ends
  with it. Its log (the worker's stderr) is ``<digest>.log`` beside the socket.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from m3agent.errors import ModelCrashError, ModelError
from m3agent.llm.model_process import ModelProcess, Runtime, raise_for

SOCKET_SUFFIX = ".sock"
POLL_S = 0.2
"""How often the resident process looks whether it is idle or asked to stop."""
CONNECT_TIMEOUT_S = 5.0
"""Most seconds a connection to a resident process may take to be accepted into its queue."""


class _Gone(ModelError):
    """The resident process closed a new connection: it was ending."""


@dataclass(frozen=True, slots=True)
class ResidentInfo:
    """One resident model process, as :func:`running` finds it."""

    socket_path: Path
    model_path: str
    worker: str
    keep_alive_s: float
    pid: int


def runtime_folder() -> Path:
    """This user's folder of resident sockets: ``$XDG_RUNTIME_DIR/m3agent`` or ``/tmp/m3agent-UID``, mode 0700.

    A folder another user owns, or one others may enter, is refused: a socket in it could be another's model."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(base) / "m3agent" if base else Path(tempfile.gettempdir()) / f"m3agent-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError as exc:
        raise ModelError(f"cannot make the folder of resident models {folder}: {exc}",
                         hint="set model_keep_alive_s to 0 (M3AGENT_MODEL_KEEP_ALIVE_S=0) to load the model in "
                              "each process") from None
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ModelError(f"the folder of resident models {folder} is not this user's alone",
                         hint=f"remove it (or `chmod 700 {folder}` if it is yours), or set model_keep_alive_s to 0")
    return folder


def socket_path(folder: Path, worker: str, model_path: Path, options: dict[str, int | str]) -> Path:
    """The socket of the resident process serving ``model_path`` with ``options`` by ``worker``."""
    try:
        stat = model_path.stat()
        identity = [str(model_path.resolve()), stat.st_size, stat.st_mtime_ns]
    except OSError:
        identity = [str(model_path), 0, 0]
    key = json.dumps([worker, identity, sorted(options.items())], sort_keys=True)
    return folder / (hashlib.sha256(key.encode("utf-8")).hexdigest()[:20] + SOCKET_SUFFIX)


def process_for(model_path: Path, options: dict[str, int | str], name: str, *, worker: str, runtime: Runtime,
                keep_alive_s: float) -> ModelProcess:
    """The process that will run ``model_path``: a worker of the caller's own (``keep_alive_s`` 0), else the
    model's resident process (started on the first request when none runs)."""
    if keep_alive_s > 0:
        return ResidentModel(model_path, options, name, keep_alive_s=keep_alive_s, worker=worker, runtime=runtime)
    return ModelProcess(model_path, options, name, worker=worker, runtime=runtime)


class ResidentModel(ModelProcess):
    """The client of a resident model process: :class:`ModelProcess`'s interface, served over its socket.

    ``pid`` is the worker's (the process running the model), as for a worker of its own; :meth:`close` ends the
    connection, not the resident process."""

    def __init__(self, model_path: Path, options: dict[str, int | str], name: str, *, keep_alive_s: float,
                 worker: str = "m3agent.llm.worker", runtime: Runtime | None = None,
                 folder: Path | None = None) -> None:
        super().__init__(model_path, options, name, worker=worker, runtime=runtime)
        self.keep_alive_s = keep_alive_s
        self.folder = folder
        self._conn: socket.socket | None = None
        self._stream: IO[str] | None = None
        self._worker_pid: int | None = None

    @property
    def pid(self) -> int | None:
        return self._worker_pid if self._conn is not None else None

    @property
    def socket_path(self) -> Path:
        return socket_path(self.folder or runtime_folder(), self.worker, self.model_path, self.options)

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the reply; a crashed worker raises ModelCrashError. A resident process
        found gone (ended while idle, or killed) is started again once."""
        reply = _exchange(self._connected(), message)
        if reply is None:  # gone since the connection was made: once more, with a process started again
            self.close()
            reply = _exchange(self._connected(), message)
        if reply is None:
            self.close()
            raise ModelCrashError(self.name, self.model_path, "ended (the resident model process was gone)",
                                  self.ready, [], runtime=self.runtime.title, hint=self.runtime.crash_hint)
        self._worker_pid = int(reply.get("worker_pid") or 0) or self._worker_pid
        self._raise_for(reply)
        return reply

    def _raise_for(self, reply: dict[str, Any]) -> None:
        """The error a reply line stands for: a crash the resident process saw (with the worker's last words), or
        the worker's own error line (:func:`~m3agent.llm.model_process.raise_for`)."""
        if reply.get("error") == "crash":
            raise ModelCrashError(self.name, self.model_path, str(reply.get("how", "ended")),
                                  dict(reply.get("ready") or {}), [str(s) for s in reply.get("stderr") or []],
                                  runtime=self.runtime.title, hint=self.runtime.crash_hint)
        raise_for(reply, self.name, self.runtime)

    def close(self) -> None:
        """End this connection; the resident process keeps the model for its keep-alive."""
        conn, stream, self._conn, self._stream = self._conn, self._stream, None, None
        for item in (stream, conn):
            if item is not None:
                with contextlib.suppress(OSError):
                    item.close()

    def _connected(self) -> IO[str]:
        if self._stream is not None:
            return self._stream
        try:
            return self._connect_once()
        except _Gone:  # it was ending as this process connected: start another
            return self._connect_once()

    def _connect_once(self) -> IO[str]:
        path = self.socket_path
        with _locked(path.with_suffix(".lock")):
            conn = _connect(path)
            if conn is None:
                self._start(path)
                conn = _connect(path)
            if conn is None:
                raise ModelError(f"the resident process of {self.name} started but does not answer on {path}",
                                 hint="see its log beside the socket, or set model_keep_alive_s to 0")
        stream = conn.makefile("rw", encoding="utf-8", newline="\n")
        hello = _exchange(stream, None)
        if hello is None or "ready" not in hello:
            conn.close()
            raise _Gone(f"the resident process of {self.name} closed the connection",
                        hint="run the command again; set model_keep_alive_s to 0 if it persists")
        self.ready, self._worker_pid = dict(hello["ready"]), hello.get("pid")
        self._conn, self._stream = conn, stream
        return stream

    def _start(self, path: Path) -> None:
        """Start the resident process for ``path`` and wait for its model to load (its error raised here)."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a killed process
        log = path.with_suffix(".log")
        command = [sys.executable, "-m", "m3agent.llm.resident", str(path), self.worker, str(self.keep_alive_s)]
        with log.open("w", encoding="utf-8") as err:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                    encoding="utf-8", start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None
        init = {"model_path": str(self.model_path.resolve()), **self.options}  # it outlives this process's cwd
        proc.stdin.write(json.dumps(init) + "\n")
        proc.stdin.close()
        line = proc.stdout.readline()  # written by the resident process once its model is loaded
        proc.stdout.close()
        proc.wait()  # the launcher ends as soon as the resident process is forked off
        self._raise_for(json.loads(line) if line.strip() else {"error": "failed", "message": _tail(log)})


def running(folder: Path | None = None) -> list[ResidentInfo]:
    """The resident model processes of this user that answer now."""
    return _each(folder, stop=False)


def stop_all(folder: Path | None = None, wait_s: float = 30.0) -> list[ResidentInfo]:
    """End every resident model process of this user (each after the request it is serving), waiting up to
    ``wait_s`` for each to end; those asked to stop."""
    ended = _each(folder, stop=True)
    deadline = time.monotonic() + wait_s
    while any(_alive(info.pid) for info in ended) and time.monotonic() < deadline:
        time.sleep(POLL_S / 4)
    return ended


def _each(folder: Path | None, *, stop: bool) -> list[ResidentInfo]:
    """Every resident process answering in ``folder`` (default: :func:`runtime_folder`), as it describes itself;
    with ``stop``, each also asked to end, on the same connection (those that said they would)."""
    found = []
    for path in sorted((folder or runtime_folder()).glob("*" + SOCKET_SUFFIX)):
        conn = _connect(path)
        if conn is None:
            continue
        with conn, conn.makefile("rw", encoding="utf-8", newline="\n") as stream:
            about = _exchange(stream, {"about": True}) if _exchange(stream, None) is not None else None
            if about is None or "model_path" not in about or (stop and _exchange(stream, {"stop": True}) is None):
                continue
        found.append(ResidentInfo(path, str(about["model_path"]), str(about["worker"]),
                                  float(about["keep_alive_s"]), int(about["pid"])))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an ended child not yet waited for
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# the client's side ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock: two processes finding no resident process start one, not two."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _connect(path: Path) -> socket.socket | None:
    """A connection to the socket at ``path``, or None when no process listens there."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(CONNECT_TIMEOUT_S)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    conn.settimeout(None)
    return conn


def _exchange(stream: IO[str], message: dict[str, Any] | None) -> dict[str, Any] | None:
    """Send ``message`` (None: send nothing) and read one reply line; None when the other side is gone."""
    try:
        if message is not None:
            stream.write(json.dumps(message) + "\n")
            stream.flush()
        line = stream.readline()
    except OSError:
        return None
    if not line:
        return None
    value = json.loads(line)
    return value if isinstance(value, dict) else None


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "the resident model process ended before its model loaded"
    return " | ".join(text[-lines:]) or "the resident model process ended before its model loaded"


# the resident process ------------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """``python -m m3agent.llm.resident SOCKET WORKER KEEP_ALIVE_S``, the model's first line on stdin: fork the
    resident process off (this one ends at once), load the model, listen, write the ready line, serve."""
    path, worker, keep_alive_s = Path(argv[0]), argv[1], float(argv[2])
    init = json.loads(sys.stdin.readline())
    if os.fork() > 0:
        return 0  # the launcher: its child holds stdout until the model is loaded
    os.setsid()
    model = ModelProcess(Path(init.pop("model_path")), init, path.stem, worker=worker)
    try:
        loaded = model.start()
    except ModelCrashError as exc:
        loaded = {"error": "crash", "how": exc.how, "stderr": model.stderr_tail}
    if "ready" not in loaded:
        _reply_line(loaded)  # the worker's own error line (a missing runtime, a model that does not load)
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    _reply_line({"ready": model.ready})
    _Resident(model, path, keep_alive_s).serve(listener)
    model.close()
    return 0


def _reply_line(value: dict[str, Any]) -> None:
    """The one line the launcher's caller waits for; stdout then goes nowhere."""
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


class _Resident:
    """The serving side: a thread per connection, the model's requests one at a time (``lock``)."""

    def __init__(self, model: ModelProcess, path: Path, keep_alive_s: float) -> None:
        self.model, self.path, self.keep_alive_s = model, path, keep_alive_s
        self.lock = threading.Lock()
        self.state = threading.Lock()
        self.active = 0
        self.last = time.monotonic()
        self.stopping = threading.Event()

    def serve(self, listener: socket.socket) -> None:
        """Accept until ``keep_alive_s`` pass with no connection open, or one asks to stop; then take the socket's
        name away first and serve those already queued, so that no connection is dropped; end with the last
        request (a client still connected then finds the process gone and starts another)."""
        while not self.stopping.is_set() and not self._idle():
            ready, _, _ = select.select([listener], [], [], POLL_S)
            if ready:
                self._accept(listener)
        with contextlib.suppress(OSError):
            self.path.unlink()
        listener.setblocking(False)
        with contextlib.suppress(OSError):
            while True:
                self._accept(listener)
        listener.close()
        while not self.stopping.is_set() and not self._idle(0.0):
            time.sleep(POLL_S)
        with self.lock:  # the request under way, if any, is answered first
            pass

    def _idle(self, after_s: float | None = None) -> bool:
        with self.state:
            wait = self.keep_alive_s if after_s is None else after_s
            return self.active == 0 and time.monotonic() - self.last >= wait

    def _accept(self, listener: socket.socket) -> None:
        conn, _ = listener.accept()
        conn.setblocking(True)
        with self.state:
            self.active += 1
        threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        """Answer one client's requests until it closes."""
        try:
            with conn, conn.makefile("rw", encoding="utf-8", newline="\n") as stream:
                if _send(stream, {"ready": self.model.ready, "pid": self.model.pid}):
                    for line in stream:
                        if not _send(stream, self._reply(json.loads(line))):
                            break
        except (OSError, ValueError):
            pass  # a client gone mid-line
        finally:
            with self.state:
                self.active -= 1
                self.last = time.monotonic()

    def _reply(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("stop"):
            self.stopping.set()
            return {"stopping": True}
        if request.get("about"):
            return {"model_path": str(self.model.model_path), "worker": self.model.worker,
                    "keep_alive_s": self.keep_alive_s, "pid": os.getpid()}
        with self.lock:
            try:
                return self.model.exchange(request) | {"worker_pid": self.model.pid}
            except ModelCrashError as exc:
                return {"error": "crash", "how": exc.how, "ready": self.model.ready, "stderr": self.model.stderr_tail}
            except ModelError as exc:
                return {"error": "failed", "message": exc.message}


def _send(stream: IO[str], value: dict[str, Any]) -> bool:
    try:
        stream.write(json.dumps(value) + "\n")
        stream.flush()
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
