"""The web inspector (filled in below)."""

from __future__ import annotations

from fastapi import FastAPI


def install(app: FastAPI) -> None:
    """Mount the inspector pages and their static assets on ``app``."""
