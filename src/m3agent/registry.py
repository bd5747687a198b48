"""Backend registries: choose an implementation by URL scheme or short name.

A registry maps names (``sqlite``, ``postgresql``, ``minilm``, ``openai``,
``llamacpp``, ...) to factories. A spec is either ``scheme://rest`` or
``name:arg`` or a bare ``name``. Factories are registered with dotted import
paths so nothing heavy is imported until a backend is actually built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl, urlsplit

from m3agent.errors import UnknownBackendError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """A parsed backend spec: ``scheme``, the ``target`` after it, and query ``params``."""

    raw: str
    scheme: str
    target: str
    params: dict[str, str]


def parse_spec(spec: str) -> BackendSpec:
    """Parse ``scheme://host/path?a=b``, ``name:arg`` or ``name``."""
    text = spec.strip()
    if "://" in text:
        parts = urlsplit(text)
        target = parts.netloc + parts.path
        return BackendSpec(text, parts.scheme.lower(), target, dict(parse_qsl(parts.query)))
    if ":" in text and not _looks_like_windows_path(text):
        name, _, arg = text.partition(":")
        arg, _, query = arg.partition("?")
        return BackendSpec(text, name.lower(), arg, dict(parse_qsl(query)))
    return BackendSpec(text, text.lower(), "", {})


def _looks_like_windows_path(text: str) -> bool:
    return len(text) > 2 and text[1] == ":" and text[2] in "\\/"


@dataclass(frozen=True, slots=True)
class _Entry:
    factory_path: str
    description: str


class Registry(Generic[T]):
    """Named factories for one kind of backend (stores, embedders, chat models...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, _Entry] = {}

    def register(self, name: str, factory_path: str, description: str = "") -> None:
        """Register ``module:function`` as the factory for ``name``; it takes ``(spec, **kwargs)``."""
        self._entries[name.lower()] = _Entry(factory_path, description)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def describe(self) -> dict[str, str]:
        return {name: e.description for name, e in sorted(self._entries.items())}

    def factory(self, name: str) -> Callable[..., T]:
        entry = self._entries.get(name.lower())
        if entry is None:
            known = ", ".join(self.names()) or "none"
            raise UnknownBackendError(
                f"unknown {self.kind} backend {name!r}", hint=f"use one of: {known}"
            )
        module_name, _, attr = entry.factory_path.partition(":")
        module = importlib.import_module(module_name)
        factory: Callable[..., T] = getattr(module, attr)
        return factory

    def create(self, spec: str, **kwargs: Any) -> T:
        parsed = parse_spec(spec)
        return self.factory(parsed.scheme)(parsed, **kwargs)
