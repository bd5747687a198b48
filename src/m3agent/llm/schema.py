"""JSON extraction from model text and validation against a JSON-schema subset.

The subset covers what m3agent's response schemas use: ``type`` (object,
array, string, integer, number, boolean, null, or a list of these), ``enum``,
``const``, ``properties``, ``required``, ``additionalProperties`` (bool),
``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``,
``minimum``/``maximum``. Unknown keywords are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

_TYPE_CHECKS: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def strip_thinking(text: str) -> str:
    """Drop ``<think>…</think>`` blocks and any text before a lone ``</think>`` (template-opened)."""
    text = _THINK_RE.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


def extract_json(text: str) -> Any:
    """The first JSON value in ``text``: whole text, a fenced block, or the first balanced object. Control
    characters inside strings are read as they stand (strict JSON refuses them).

    Raises ``ValueError`` saying what was wrong.
    """
    body = strip_thinking(text)
    if not body:
        raise ValueError("the reply was empty")
    candidates = [body, *(m.strip() for m in _FENCE_RE.findall(body))]
    start = body.find("{")
    if start >= 0:
        candidates.append(body[start:])
    decoder = json.JSONDecoder(strict=False)  # a raw line break inside a string: llama.cpp's JSON grammar allows it
    for candidate in candidates:
        try:
            value, _ = decoder.raw_decode(candidate)
            return value
        except json.JSONDecodeError:
            continue
    raise ValueError(f"the reply was not JSON: {_preview(body)}")


def validate(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema`` as ``"path: problem"`` strings (empty when valid)."""
    type_error = _check_type(value, schema, path)
    if type_error:
        return [type_error]
    errors = _check_enum(value, schema, path)
    if isinstance(value, dict):
        errors += _check_object(value, schema, path)
    elif isinstance(value, list):
        errors += _check_array(value, schema, path)
    elif isinstance(value, str):
        errors += _check_string(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        errors += _check_number(value, schema, path)
    return errors


def parse_reply(text: str, schema: Mapping[str, Any]) -> tuple[Any, str | None]:
    """``(value, None)`` when ``text`` holds JSON valid under ``schema``, else ``(None, reason)``."""
    try:
        value = extract_json(text)
    except ValueError as exc:
        return None, str(exc)
    errors = validate(value, schema)
    if errors:
        return None, "the JSON did not match the schema: " + "; ".join(errors[:5])
    return value, None


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """A prompt sentence asking for JSON matching ``schema`` (for servers without structured output)."""
    return (
        "Reply with exactly one JSON object and nothing else. It must match this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False)
    )


def cap_strings(schema: Mapping[str, Any], max_chars: int) -> dict[str, Any]:
    """A copy of ``schema`` whose free strings have at most ``max_chars`` characters.

    Small models under a grammar may never close a string; a cap bounds the
    reply so it stays valid JSON within ``max_tokens``.
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if isinstance(value, Mapping) and key in ("items", "additionalProperties", "not"):
            out[key] = cap_strings(value, max_chars)
        elif isinstance(value, Mapping):  # properties, $defs: name -> schema
            out[key] = {k: cap_strings(v, max_chars) if isinstance(v, Mapping) else v for k, v in value.items()}
        elif isinstance(value, list) and key in ("anyOf", "oneOf", "allOf"):
            out[key] = [cap_strings(v, max_chars) if isinstance(v, Mapping) else v for v in value]
        else:
            out[key] = value
    if out.get("type") == "string" and "enum" not in out and "maxLength" not in out:
        out["maxLength"] = max_chars
    return out


def _check_type(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    expected = schema.get("type")
    if expected is None:
        return None
    names = [expected] if isinstance(expected, str) else list(expected)
    if any(_TYPE_CHECKS.get(name, lambda v: True)(value) for name in names):
        return None
    return f"{path}: expected {' or '.join(names)}, got {type(value).__name__}"


def _check_enum(value: Any, schema: Mapping[str, Any], path: str) -> list[str]:
    if "const" in schema and value != schema["const"]:
        return [f"{path}: must be {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: must be one of {list(schema['enum'])!r}, got {value!r}"]
    return []


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], path: str) -> list[str]:
    props: Mapping[str, Any] = schema.get("properties", {})
    errors = [f"{path}: missing field {name!r}" for name in schema.get("required", ()) if name not in value]
    if schema.get("additionalProperties") is False:
        errors += [f"{path}: unexpected field {name!r}" for name in value if name not in props]
    for name, sub in props.items():
        if name in value:
            errors += validate(value[name], sub, f"{path}.{name}")
    return errors


def _check_array(value: list[Any], schema: Mapping[str, Any], path: str) -> list[str]:
    errors = []
    if len(value) < schema.get("minItems", 0):
        errors.append(f"{path}: needs at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{path}: allows at most {schema['maxItems']} items")
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            errors += validate(item, items, f"{path}[{i}]")
    return errors


def _check_string(value: str, schema: Mapping[str, Any], path: str) -> list[str]:
    if len(value) < schema.get("minLength", 0):
        return [f"{path}: must not be shorter than {schema['minLength']} characters"]
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return [f"{path}: must not be longer than {schema['maxLength']} characters"]
    return []


def _check_number(value: float, schema: Mapping[str, Any], path: str) -> list[str]:
    if "minimum" in schema and value < schema["minimum"]:
        return [f"{path}: must be >= {schema['minimum']}"]
    if "maximum" in schema and value > schema["maximum"]:
        return [f"{path}: must be <= {schema['maximum']}"]
    return []


def _preview(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
