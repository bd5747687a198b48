"""Printing for the CLI: JSON for machines (``--json``), rich text for people."""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

_console: Console | None = None
_err_console: Console | None = None


def console() -> Console:
    global _console
    if _console is None:
        _console = Console(highlight=False, soft_wrap=True)
    return _console


def err_console() -> Console:
    global _err_console
    if _err_console is None:
        _err_console = Console(stderr=True, highlight=False, soft_wrap=True)
    return _err_console


def to_jsonable(value: Any) -> Any:
    """Convert domain values (dataclasses, enums, paths, numpy scalars/arrays) to JSON types."""
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return to_jsonable(value.to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in ("embedding", "crop_jpeg", "image", "audio")}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(value), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
