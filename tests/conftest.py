"""Shared fixtures: locations of the reference media and data, temporary stores."""

from __future__ import annotations

import os
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
