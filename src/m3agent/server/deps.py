"""FastAPI dependencies: the server context of the app, pagination parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from m3agent.server.context import ServerContext


def get_ctx(request: Request) -> ServerContext:
    """The :class:`ServerContext` that :func:`~m3agent.server.app.create_app` put on the app (``Ctx``)."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, ServerContext)
    return ctx


Ctx = Annotated[ServerContext, Depends(get_ctx)]
Offset = Annotated[int, Query(ge=0, le=10**9, description="items skipped")]
Limit = Annotated[int, Query(ge=1, le=10000, description="items returned at most")]
