"""The server: REST API, MCP tools and web inspector over one memory (``m3agent serve`` / ``m3agent mcp``).

Nothing is imported here: :func:`m3agent.server.app.create_app` builds the
FastAPI app from a :class:`~m3agent.settings.Settings`; the optional
``server`` extra (FastAPI, uvicorn, mcp) is needed only then.
"""
