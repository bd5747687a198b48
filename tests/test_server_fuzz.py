"""Schemathesis against the OpenAPI document of a real server: generated requests to every operation
never get a 5xx, and every JSON answer matches its documented schema."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("schemathesis", reason="needs schemathesis: pip install schemathesis")
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from m3agent.server.app import create_app
from m3agent.settings import load_settings
from server_helpers import build_memory, live_server


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    (root / "media").mkdir()
    build_memory(root / "memory.db", root / "media")
    app_settings = load_settings(memory=str(root / "memory.db"), embedder="hash", llm="none",
                                 server={"allowed_folders": [str(root / "media")], "allow_urls": False,
                                         "max_upload_mb": 1})
    with live_server(create_app(app_settings, mcp=False, inspector=False)) as url:
        yield url


EXAMPLES = int(os.environ.get("SERVER_FUZZ_EXAMPLES", "12"))  # per operation; 60 also passed (43 s)


def operations() -> list[schemathesis.APIOperation]:
    """Every operation of the app's OpenAPI document (built without starting anything)."""
    app = create_app(load_settings(memory="unused.db"), mcp=False, inspector=False)
    return [result.ok() for result in schemathesis.openapi.from_dict(app.openapi()).get_all_operations()]


@pytest.mark.parametrize("operation", operations(), ids=lambda op: op.label)
def test_generated_requests_never_get_a_server_error(operation: schemathesis.APIOperation, base_url: str) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base_url, checks=[not_a_server_error, response_schema_conformance])

    run()
