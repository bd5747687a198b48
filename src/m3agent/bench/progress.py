"""A rich progress bar for long benchmark loops (silent when disabled)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Advance(Protocol):
    def __call__(self, steps: int = 1) -> None: ...


@contextmanager
def progress(description: str, total: int, enabled: bool = True) -> Iterator[Advance]:
    """Yield ``advance(n)``; shows a bar on stderr while enabled."""
    if not enabled:
        yield lambda steps=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda steps=1: bar.advance(task, steps)
