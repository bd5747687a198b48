"""Helpers of the tests run on each llama.cpp runtime (the ``llamacpp_runtime`` fixture of conftest.py)."""

from __future__ import annotations


def on_runtime(spec: str, runtime: str) -> str:
    """``spec`` with its llama.cpp runtime named (``?runtime=`` or ``&runtime=``)."""
    return f"{spec}{'&' if '?' in spec else '?'}runtime={runtime}"
