"""``/docs``: the API reference rendered here from the OpenAPI document, with nothing loaded from another site.

FastAPI's Swagger UI and ReDoc pages fetch their scripts from a CDN (they break offline, carry no integrity
check, and need inline scripts the Content-Security-Policy refuses), so they are off. This page lists every
operation with its summary, parameters, body and answers; ``/openapi.json`` is the full document for any
OpenAPI tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

TEMPLATE = Path(__file__).parents[1] / "templates" / "docs.html"
METHODS = ("get", "post", "put", "patch", "delete")


def operations(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every operation of ``spec`` in document order: method, path, tag, summary, description, parameters,
    body schema name and answer statuses."""
    rows = []
    for path, item in spec.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            body = op.get("requestBody", {}).get("content", {})
            rows.append({"method": method.upper(), "path": path, "tag": (op.get("tags") or ["other"])[0],
                         "summary": op.get("summary", ""), "description": op.get("description", ""),
                         "parameters": [(p["name"], p["in"], p.get("required", False))
                                        for p in op.get("parameters", [])],
                         "body": [(kind, _schema_name(c.get("schema", {}))) for kind, c in body.items()],
                         "answers": sorted(op.get("responses", {}))})
    return rows


def _schema_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref", "")
    return str(ref.rsplit("/", 1)[-1] or schema.get("type", "object"))


def install(app: FastAPI) -> None:
    """Serve the reference at ``/docs`` (built on first request, kept for the process)."""
    page: list[str] = []

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        if not page:
            import jinja2

            template = jinja2.Environment(autoescape=True).from_string(TEMPLATE.read_text("utf-8"))
            page.append(template.render(title=app.title, version=app.version, description=app.description,
                                        operations=operations(app.openapi())))
        return HTMLResponse(page[0])
