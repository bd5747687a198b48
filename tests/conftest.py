"""Shared fixtures: locations of the reference media and data, temporary stores."""

from __future__ import annotations

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
