"""Every REST response is described by a closed schema in the OpenAPI document, and the central endpoints'
real bodies (search, ask, memories) match their models and are exactly what the control layer wrote."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
from fastapi.testclient import TestClient

from m3agent.domain import Clip, ForgottenConsolidation, Memory, MemoryKind, Video
from m3agent.memorize.consolidation.consolidate import ConsolidationReport
from m3agent.server import service
from m3agent.server.api import answer_schemas, schemas
from m3agent.server.app import create_app
from m3agent.server.context import ServerContext
from m3agent.settings import load_settings
from m3agent.store import open_store
from server_helpers import EMBEDDER, build_memory

ANNOTATIONS = {"title", "description", "default", "examples", "example", "deprecated", "readOnly", "writeOnly"}
DIARY_TEXT = "a picnic by the lake with sandwiches and lemonade"


def free_form(schema: dict[str, Any], components: dict[str, Any], where: str,
              seen: frozenset[str] = frozenset()) -> list[str]:
    """Where ``schema`` (refs resolved) admits an undescribed value: ``{}``, an object without properties
    (unless a typed map), ``additionalProperties: true``, or an array without items."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return [] if name in seen else free_form(components[name], components, f"{where}->{name}", seen | {name})
    if not set(schema) - ANNOTATIONS:
        return [f"{where}: any value"]
    problems = [p for key in ("anyOf", "oneOf", "allOf") for i, sub in enumerate(schema.get(key, []))
                for p in free_form(sub, components, f"{where}.{key}[{i}]", seen)]
    extra = schema.get("additionalProperties")
    if extra is True or extra == {}:
        problems.append(f"{where}: additionalProperties")
    elif isinstance(extra, dict):
        problems += free_form(extra, components, f"{where}{{*}}", seen)
    if schema.get("type") == "object" and not schema.get("properties") and not isinstance(extra, dict):
        problems.append(f"{where}: an object without properties")
    if schema.get("type") == "array":
        items = schema.get("items")
        problems += [f"{where}: an array without items"] if items is None else free_form(
            items, components, f"{where}[]", seen)
    for name, sub in schema.get("properties", {}).items():
        problems += free_form(sub, components, f"{where}.{name}", seen)
    return problems


def response_problems(spec: dict[str, Any]) -> tuple[list[str], int]:
    """The 2xx responses lacking content, a JSON schema, or with a free-form part; and how many JSON ones."""
    components, problems, checked = spec.get("components", {}).get("schemas", {}), [], 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                where = f"{method.upper()} {path} {status}"
                content = response.get("content") or {}
                if not content:
                    problems.append(f"{where}: no content")
                for media_type, body in content.items():
                    if "json" not in media_type:
                        continue
                    checked += 1
                    if "schema" not in body:
                        problems.append(f"{where}: no schema")
                    else:
                        problems += free_form(body["schema"], components, where)
    return problems, checked


def test_every_json_response_of_every_path_has_a_closed_schema(tmp_path: Path) -> None:
    app = create_app(load_settings(memory=str(tmp_path / "m.db"), embedder="hash", llm="none"), mcp=False)
    spec = app.openapi()
    problems, checked = response_problems(spec)
    assert not problems, "\n".join(problems)
    assert checked >= 25, f"only {checked} JSON responses in the OpenAPI document"
    ask = spec["paths"]["/api/ask"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    search = spec["paths"]["/api/search"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert (ask["$ref"], search["$ref"]) == ("#/components/schemas/AnswerOut", "#/components/schemas/SearchOut")
    memory = spec["components"]["schemas"]["MemoryOut"]["properties"]["kind"]
    assert spec["components"]["schemas"][memory["$ref"].rsplit("/", 1)[-1]]["enum"] == ["episodic", "semantic"]


def test_the_checker_flags_free_form_responses() -> None:
    """The old ``dict[str, Any]`` answer of /api/ask and a nested untyped report must both be caught."""
    loose = {"type": "object", "additionalProperties": True, "title": "Response Ask Api Ask Post"}
    nested = {"type": "object", "properties": {"report": {"anyOf": [{"type": "object"}, {"type": "null"}]},
                                               "items": {"type": "array"}, "value": {}}}
    spec = {"paths": {"/a": {"post": {"responses": {"200": {"content": {"application/json": {"schema": loose}}}}}},
                      "/b": {"get": {"responses": {"200": {"content": {"application/json": {
                          "schema": {"$ref": "#/components/schemas/B"}}}}}}},
                      "/c": {"get": {"responses": {"200": {"description": "nothing"}}}}},
            "components": {"schemas": {"B": nested}}}
    problems, checked = response_problems(spec)
    assert checked == 2
    assert any(p.startswith("POST /a 200: additionalProperties") for p in problems)
    assert any("->B.report.anyOf[0]: an object without properties" in p for p in problems)
    assert any("->B.items: an array without items" in p for p in problems)
    assert any("->B.value: any value" in p for p in problems)
    assert "GET /c 200: no content" in problems


def add_dated_video(path: Path) -> int:
    """A video whose metadata dates its clip (``session_dates``), as conversation imports record."""
    store = open_store(str(path))
    with store:
        store.add_video(Video("diary", "/nowhere/diary.mp4", duration_s=30.0,
                              metadata={"session_dates": {"0": "2023-05-08"}}))
        with store.clip(Clip("diary", 0, 0.0, 30.0)) as w:
            memory_id: int = w.add_memory(Memory(MemoryKind.EPISODIC, DIARY_TEXT, "diary", 0, 1.0, 6.0, (),
                                                 embedding=EMBEDDER.embed([DIARY_TEXT])[0]))
    return memory_id


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    (tmp_path / "media").mkdir()
    build_memory(tmp_path / "memory.db", tmp_path / "media")
    add_dated_video(tmp_path / "memory.db")
    settings = load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none",
                             server={"allowed_folders": [str(tmp_path / "media")]})
    with TestClient(create_app(settings, mcp=False, inspector=False), base_url="http://127.0.0.1") as c:
        yield c


def context(client: TestClient) -> ServerContext:
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    assert isinstance(ctx, ServerContext)
    return ctx


def without_latency(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_latency(v) for k, v in value.items() if k != "latency_s"}
    if isinstance(value, list):
        return [without_latency(v) for v in value]
    return value


def round_trip(model: type[Any], body: dict[str, Any]) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_validate(body).model_dump(mode="json", exclude_unset=True)
    return dumped


@pytest.mark.parametrize("tool", ["search_memory", "search_clip"])
def test_search_bodies_match_their_model_and_the_control_json(client: TestClient, tool: str) -> None:
    for request in ({"query": "salt in the soup", "k": 3, "tool": tool},
                    {"query": "picnic by the lake", "k": 3, "tool": tool, "video_id": "diary"}):
        response = client.post("/api/search", json=request)
        assert response.status_code == 200
        body = response.json()
        assert round_trip(answer_schemas.SearchOut, body) == body
        raw = service.search(context(client), schemas.SearchRequest.model_validate(request)).to_dict()
        assert without_latency(body) == without_latency(raw), "the typed route must not change the JSON"
        assert body["clips"] and body["clips"][0]["hits"]
    dated = client.post("/api/search", json={"query": "picnic lake sandwiches", "video_id": "diary", "tool": tool})
    [clip] = dated.json()["clips"]
    assert clip["date"] == "2023-05-08" and clip["hits"][0]["text"] == DIARY_TEXT
    undated = client.post("/api/search", json={"query": "salt in the soup", "video_id": "talk", "tool": tool})
    assert all("date" not in c for c in undated.json()["clips"]), "an undated clip has no date key, not null"


def test_ask_body_matches_its_model_and_the_control_json(client: TestClient) -> None:
    request = {"question": "What does the soup need?"}
    body = client.post("/api/ask", json=request).json()
    answer = answer_schemas.AnswerOut.model_validate(body)
    assert round_trip(answer_schemas.AnswerOut, body) == body
    assert answer.answered and answer.evidence and answer.searches and answer.clips
    assert all(e.kind in set(MemoryKind) for e in answer.evidence)
    raw = service.ask(context(client), schemas.AskRequest.model_validate(request))
    assert without_latency(body) == without_latency(raw)


def test_memory_and_consolidation_bodies_match_their_models(client: TestClient) -> None:
    page = client.get("/api/memories", params={"limit": 100}).json()
    typed = schemas.Page[schemas.MemoryOut].model_validate(page)
    assert typed.total == 6 and {m.kind for m in typed.items} == {MemoryKind.EPISODIC, MemoryKind.SEMANTIC}
    assert typed.model_dump(mode="json") == page
    one = client.get(f"/api/memories/{typed.items[0].id}").json()
    assert schemas.MemoryOut.model_validate(one).model_dump(mode="json") == one
    status = client.get("/api/consolidation").json()
    assert schemas.ConsolidationStatus.model_validate(status).model_dump(mode="json") == status


def test_the_consolidation_report_model_types_every_field_of_the_report() -> None:
    report = ConsolidationReport("talk", "openai:gpt", clips_consolidated=2, calls=1, facts_written=3,
                                 dropped=["no evidence"], media_seconds=60.0, wall_seconds=3.0,
                                 forgotten=ForgottenConsolidation("talk", facts=1, clips=2, restored=1))
    data = report.to_dict()
    assert schemas.ConsolidationReportOut.model_validate(data).model_dump(mode="json") == data
    assert set(schemas.ConsolidationReportOut.model_fields) == set(data)

