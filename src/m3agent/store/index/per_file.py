"""One in-process index per store file: the vector and keyword indexes share the registry's rule."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class PerFile(Generic[T]):
    """Instances keyed by a file (its path and inode: a new file at the same path gets a new one) and an
    extra key, created on first use and freed when no store holds them (weak references)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refs: dict[tuple[str, int, Hashable], weakref.ref[T]] = {}

    def get(self, path: Path, extra: Hashable, create: Callable[[], T]) -> T:
        try:
            inode = path.stat().st_ino
        except OSError:
            inode = -1
        key = (str(path), inode, extra)
        with self._lock:
            ref = self._refs.get(key)
            found = ref() if ref is not None else None
            if found is None:
                for stale in [k for k, r in self._refs.items() if r() is None]:
                    del self._refs[stale]
                found = create()
                self._refs[key] = weakref.ref(found)
            return found
