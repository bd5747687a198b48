"""The entity-graph endpoints and MCP tools over a served memory, on SQLite and on a real PostgreSQL: who is
where at a time, shots in order, appearances, company, counts and profiles, with 404/422 answers that hint.

The memory is the scene of tests/test_graph_operators.py (written through the clip writer): face A (left, big)
with its linked voice, face B (right, small) at 0:01-0:05, an unlinked voice C at 0:50-0:52, three shots."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
from fastapi.testclient import TestClient

from m3agent.graph.operators import EntityGraph
from m3agent.server.api import graph_schemas
from m3agent.server.app import create_app
from m3agent.settings import Settings, load_settings
from m3agent.store import open_store
from server_helpers import live_server
from store_helpers import DIM
from test_graph_operators import build

Ids = dict[str, int]


def settings_for(url: str, tmp_path: Path) -> Settings:
    return load_settings(memory=url, embedder="hash", llm="none", server={"data_dir": str(tmp_path / "server")})


def write_scene(url: str) -> Ids:
    with open_store(url) as store:
        store.set_embedding_model("test-random", DIM)
        return build(store)


def contains(body: Any, raw: Any, where: str = "") -> list[str]:
    """Where ``body`` differs from ``raw`` (``raw``'s keys only: a body may add ids and seconds)."""
    if isinstance(raw, dict):
        if not isinstance(body, dict):
            return [f"{where}: not an object"]
        missing = [f"{where}.{k}: missing" for k in raw if k not in body]
        return missing + [p for k in raw if k in body for p in contains(body[k], raw[k], f"{where}.{k}")]
    if isinstance(raw, list | tuple):
        if not isinstance(body, list) or len(body) != len(raw):
            return [f"{where}: {body!r} != {raw!r}"]
        return [p for i, (b, r) in enumerate(zip(body, raw, strict=True)) for p in contains(b, r, f"{where}[{i}]")]
    return [] if body == raw else [f"{where}: {body!r} != {raw!r}"]


def ok(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def served(store_url: Callable[[], str], tmp_path: Path) -> Iterator[tuple[TestClient, Ids, str]]:
    """The scene on the test's backend (SQLite, then PostgreSQL), served in-process."""
    url = store_url()
    ids = write_scene(url)
    app = create_app(settings_for(url, tmp_path), mcp=False, inspector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, ids, url


def test_people_moments_shots_and_counts_on_both_stores(served: tuple[TestClient, Ids, str]) -> None:
    client, ids, _ = served
    people = ok(client, "/api/people")["items"]
    assert sorted((p["face_ids"], p["voice_ids"]) for p in people) == sorted(
        [([ids["a"]], [ids["voice_a"]]), ([ids["b"]], []), ([], [ids["voice_c"]])])
    who = {tuple(p["face_ids"] + p["voice_ids"]): p for p in people}
    a, b = who[(ids["a"], ids["voice_a"])], who[(ids["b"],)]
    c = who[(ids["voice_c"],)]

    moment = ok(client, "/api/videos/v1/at", t="0:03")
    assert [(s["character_id"], s["horizontal"], s["depth"]) for s in moment["on_screen"]] == [
        (a["character_id"], "left", "foreground"), (b["character_id"], "right", "background")]
    assert [(u["character_id"], u["text"], u["start_s"]) for u in moment["speaking"]] == [
        (a["character_id"], "hello there", 2.0)]
    assert moment["scene"] == ['On screen 0:03–0:09: "Breaking news"'] and moment["shot"]["index"] == 0
    assert ok(client, "/api/videos/v1/at", t="3") == moment, "seconds and clock text name the same instant"
    later = ok(client, "/api/videos/v1/at", start="40", end="0:45")
    assert [(s["person"], s["horizontal"]) for s in later["on_screen"]] == [(a["label"], "left")]
    assert [u["text"] for u in later["speaking"]] == ["and again"] and later["span"] == "0:40–0:45"
    assert ok(client, "/api/videos/v1/at", t=20)["on_screen"] == []

    shots = ok(client, "/api/videos/v1/shots")
    assert shots["total"] == 3
    assert [(s["index"], s["start_s"], s["end_s"], s["opens_scene"]) for s in shots["items"]] == [
        (0, 0.0, 12.0, True), (1, 12.0, 48.0, True), (2, 48.0, 60.0, True)]
    assert set(shots["items"][0]["character_ids"]) == {a["character_id"], b["character_id"]}
    assert shots["items"][2]["character_ids"] == [c["character_id"]]
    assert len(shots["items"][1]["memory_ids"]) == 2, "the shot cut by the clip boundary is joined again"

    counted = ok(client, "/api/videos/v1/count", start="0", end="0:30")
    assert (counted["distinct"], len(counted["seen"]), counted["heard"]) == (2, 2, [a["label"]])
    assert [p["character_id"] for p in ok(client, "/api/videos/v1/count", start=49, end=53)["people"]] == [
        c["character_id"]]
    whole = ok(client, "/api/videos/v1/count")
    assert whole["distinct"] == 3 and whole["span"] == "0:00–1:00"
    assert ok(client, "/api/videos/v1/count", start=20, end=30)["distinct"] == 0


def test_appearances_company_and_profiles_by_id_tag_or_name(served: tuple[TestClient, Ids, str]) -> None:
    client, ids, _ = served
    voice_tag = quote(f"<voice_{ids['voice_a']}>")
    by_voice = ok(client, f"/api/people/{voice_tag}/appearances")
    person = by_voice["person"]
    assert (person["face_ids"], person["voice_ids"]) == ([ids["a"]], [ids["voice_a"]])
    spans = [(x["start_s"], x["end_s"], x["role"]) for x in by_voice["appearances"]]
    assert spans == [(1.0, 10.0, "both"), (40.0, 45.0, "both")]
    assert ok(client, f"/api/people/{person['character_id']}/appearances") == by_voice
    assert ok(client, f"/api/people/face_{ids['a']}/appearances", video_id="v1")["appearances"] == \
        by_voice["appearances"]

    together = ok(client, f"/api/people/{person['character_id']}/together")
    assert [(c["spans"][0]["start_s"], c["spans"][0]["end_s"], c["spans"][0]["span"])
            for c in together["company"]] == [(1.0, 5.0, "0:01–0:05")]
    assert [c["character_id"] for c in together["company"]] != [person["character_id"]]

    renamed = client.patch(f"/api/characters/{person['character_id']}", json={"name": "Ann"})
    assert renamed.status_code == 200, renamed.text
    profile = ok(client, "/api/people/ann")
    assert profile["label"] == "Ann" and profile["person"]["character_id"] == person["character_id"]
    assert (profile["first"]["span"], profile["last"]["start_s"]) == ("0:01–0:10", 40.0)
    assert [x["span"] for x in profile["appearances"]] == ["0:01–0:10", "0:40–0:45"]
    assert ok(client, "/api/videos/v1/at", t=3)["on_screen"][0]["person"] == "Ann", "a new name shows at once"


def test_bodies_are_the_graph_values_json_plus_ids_and_seconds(served: tuple[TestClient, Ids, str]) -> None:
    """Every key a graph value's ``to_dict()`` writes is in its body with the same value (a field added to a
    value fails here until its response model has it)."""
    client, ids, url = served
    with open_store(url) as store:
        graph = EntityGraph(store)
        person = graph.person_of_entity(ids["a"])
        pairs = [
            ("/api/videos/v1/at?t=3", graph.at("v1", 3.0).to_dict()),
            ("/api/videos/v1/at?start=1&end=45", graph.at("v1", 1.0, 45.0).to_dict()),
            (f"/api/people/{person.character_id}", graph.profile(person).to_dict()),
            ("/api/videos/v1/count?start=0&end=60", graph.count_people("v1", 0.0, 60.0).to_dict()),
        ]
        shots = [s.to_dict() for s in graph.shots("v1")]
        company = [c.to_dict() for c in graph.together(person)]
        people = [p.to_dict() for p in graph.people()]
    for path, raw in pairs:
        assert not contains(client.get(path).json(), raw, path)
    assert not contains(ok(client, "/api/videos/v1/shots")["items"], shots, "shots")
    assert not contains(ok(client, f"/api/people/{person.character_id}/together")["company"], company, "company")
    assert not contains(ok(client, "/api/people")["items"], people, "people")
    body = ok(client, "/api/videos/v1/at", t=3)
    assert graph_schemas.MomentOut.model_validate(body).model_dump(mode="json") == body


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_unknown_videos_people_and_times_answer_with_hints(served: tuple[TestClient, Ids, str]) -> None:
    client, _, _ = served
    for path in ("/api/videos/nope/at?t=3", "/api/videos/nope/shots", "/api/videos/nope/count",
                 "/api/people/1/appearances?video_id=nope"):
        missing = client.get(path)
        assert missing.status_code == 404 and "GET /api/videos" in missing.json()["hint"], path
    for ref in (quote("<character_999>"), "nobody", "999"):
        unknown = client.get(f"/api/people/{ref}")
        assert unknown.status_code == 404 and "/api/people" in unknown.json()["hint"], ref
    late = client.get("/api/videos/v1/at", params={"t": "3:10"})
    assert late.status_code == 422
    assert late.json()["message"] == "3:10 is past the end of v1 (1:00)"
    assert late.json()["hint"] == "times in v1 run from 0:00 to 1:00"
    backwards = client.get("/api/videos/v1/count", params={"start": "0:30", "end": "0:10"})
    assert backwards.status_code == 422 and "before it starts" in backwards.json()["message"]
    for params in ({}, {"t": "3", "start": "1"}, {"t": "3", "end": "4"}):
        both = client.get("/api/videos/v1/at", params=params)
        assert both.status_code == 422 and both.json()["hint"].startswith("e.g."), params
    unreadable = client.get("/api/videos/v1/at", params={"t": "soon"})
    assert unreadable.status_code == 422 and "pattern" in unreadable.text
    assert ok(client, "/api/videos/v1/at", start="0:50", end="9:00")["span"] == "0:50–1:00", "the end is cut"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_hostile_references_and_times_are_refused_not_crashed(served: tuple[TestClient, Ids, str]) -> None:
    client, _, _ = served
    for ref in ("³", "9" * 40, "%00", quote("<face_99999999999999999999999>"), quote("'; DROP TABLE x; --")):
        assert client.get(f"/api/people/{ref}").status_code == 404, ref
    assert client.get(f"/api/people/{'x' * 300}").status_code == 422
    for t in ("1" * 31, "0:99", "1:00:00.5", "٣", "-3", "nan", "inf", "3e2", " "):
        answer = client.get("/api/videos/v1/at", params={"t": t})
        assert answer.status_code == 422 and answer.json(), t
    assert client.get("/api/videos/v1/at", params={"t": " 0:03 "}).json()["span"] == "0:03"


def test_openapi_documents_the_graph_routes_with_their_models(tmp_path: Path) -> None:
    spec = create_app(settings_for(str(tmp_path / "m.db"), tmp_path), mcp=False, inspector=False).openapi()
    expected = {"/api/people": "Page_PersonOut_", "/api/people/{ref}": "ProfileOut",
                "/api/people/{ref}/appearances": "AppearancesOut", "/api/people/{ref}/together": "TogetherOut",
                "/api/videos/{video_id}/at": "MomentOut", "/api/videos/{video_id}/shots": "Page_ShotOut_",
                "/api/videos/{video_id}/count": "PeopleCountOut"}
    for path, model in expected.items():
        schema = spec["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema["$ref"] == f"#/components/schemas/{model}", path
    at = spec["paths"]["/api/videos/{video_id}/at"]["get"]
    assert {p["name"] for p in at["parameters"]} == {"video_id", "t", "start", "end"}
    assert "Problem" in str(at["responses"]["422"]) and "404" in at["responses"]


def test_mcp_graph_tools_through_the_sdk_client(tmp_path: Path) -> None:
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp", reason="needs the server extra: pip install 'm3agent[server]'")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    url = str(tmp_path / "memory.db")
    ids = write_scene(url)

    async def main(base: str) -> None:
        async with httpx2.AsyncClient(timeout=120) as http, \
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            await exercise(client, ids)

    with live_server(create_app(settings_for(url, tmp_path), inspector=False)) as base:
        anyio.run(main, base)


async def exercise(client: Any, ids: Ids) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    graph_tools = {"who_is_at", "person_profile", "appearances", "people_together", "shots", "count_people"}
    assert graph_tools <= set(tools) and all("Use it" in (tools[n].description or "") for n in graph_tools)

    async def call(name: str, **args: Any) -> Any:
        result = await client.call_tool(name, args)
        assert not result.is_error, result.content
        return result.structured_content

    moment = await call("who_is_at", video_id="v1", time="0:03")
    assert [(s["entity_id"], s["horizontal"]) for s in moment["on_screen"]] == [(ids["a"], "left"),
                                                                               (ids["b"], "right")]
    assert moment == await call("who_is_at", video_id="v1", time=3)
    assert [u["text"] for u in (await call("who_is_at", video_id="v1", time=40, end="0:45"))["speaking"]] == [
        "and again"]
    profile = await call("person_profile", ref=f"<face_{ids['a']}>")
    assert profile["first"]["span"] == "0:01–0:10" and profile["last"]["span"] == "0:40–0:45"
    character = profile["person"]["character_id"]
    found = await call("appearances", ref=character)
    assert [(x["start_s"], x["role"]) for x in found["appearances"]] == [(1.0, "both"), (40.0, "both")]
    company = await call("people_together", ref=str(character), video_id="v1")
    assert [c["spans"][0]["span"] for c in company["company"]] == ["0:01–0:05"]
    shots = (await call("shots", video_id="v1"))["result"]
    assert [(s["index"], s["span"]) for s in shots] == [(0, "0:00–0:12"), (1, "0:12–0:48"), (2, "0:48–1:00")]
    assert (await call("count_people", video_id="v1", start=0, end="0:30"))["distinct"] == 2
    assert (await call("count_people", video_id="v1"))["distinct"] == 3

    late = await client.call_tool("who_is_at", {"video_id": "v1", "time": "9:00"})
    assert late.is_error and "What to do: times in v1 run from 0:00 to 1:00" in late.content[0].text
    nobody = await client.call_tool("person_profile", {"ref": "nobody"})
    assert nobody.is_error and "What to do:" in nobody.content[0].text and "tag" in nobody.content[0].text
    gibberish = await client.call_tool("who_is_at", {"video_id": "v1", "time": "soon"})
    assert gibberish.is_error and "not a time" in gibberish.content[0].text


def test_inspector_character_page_lists_who_was_present_with_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'scene.db'}"
    ids = write_scene(url)
    app = create_app(settings_for(url, tmp_path), mcp=False, inspector=True)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        people = ok(client, "/api/people")["items"]
        a = next(p for p in people if p["face_ids"] == [ids["a"]])
        b = next(p for p in people if p["face_ids"] == [ids["b"]])
        page = client.get(f"/characters/{a['character_id']}")
        assert page.status_code == 200, page.text
        company = page.text.split('id="company"', 1)[1].split("</ul>", 1)[0]
        assert f'href="/characters/{b["character_id"]}"' in company and "0:01" in company, company
