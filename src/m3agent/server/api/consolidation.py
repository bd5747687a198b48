"""``/api/consolidation``: what the server's idle consolidation is doing (:mod:`m3agent.server.idle`)."""

from __future__ import annotations

from fastapi import APIRouter

from m3agent.server.api import schemas
from m3agent.server.deps import Ctx

router = APIRouter(prefix="/api/consolidation", tags=["consolidation"])


@router.get("", response_model=schemas.ConsolidationStatus,
            summary="Idle consolidation: state, clips pending, the last video's report, failures")
def consolidation_status(ctx: Ctx) -> schemas.ConsolidationStatus:
    """What idle consolidation is doing, so a client can tell whether facts are still being derived."""
    return ctx.consolidation_status()
