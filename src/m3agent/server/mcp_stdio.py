"""MCP over stdio that answers every line: a line the SDK cannot read gets a JSON-RPC error reply.

The SDK's stdio transport drops a line that is not a JSON-RPC message and
answers nothing, so a client waits forever. Here such a line is answered per
JSON-RPC 2.0: ``-32700`` (parse error, id null) for text that is not JSON;
``-32600`` (invalid request) for JSON that is not a message; and ``-32602``
(invalid params) with the request's own id for a request whose text is not
valid Unicode (a lone surrogate such as ``"\\ud800"``), so its caller gets an
answer instead of hanging.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
HINT = "send one JSON-RPC 2.0 message per line, as UTF-8 JSON text"


async def serve(server: MCPServer[Any]) -> None:
    """Serve ``server``'s tools over stdin/stdout until stdin closes, answering unreadable lines."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # the SDK's run_stdio_async does the same; it takes no stream wrapper
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(AnsweringReader(read_stream, write_stream), write_stream,
                           lowlevel.create_initialization_options())


class AnsweringReader:
    """The transport's read stream, replying to the exceptions it yields (unreadable lines) instead of passing
    them on to be dropped."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], replies: WriteStream[SessionMessage]) -> None:
        self._inner = inner
        self._replies = replies

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._replies.send(error_reply(item))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        from anyio import ClosedResourceError, EndOfStream

        try:
            return await self.receive()
        except (EndOfStream, ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def error_reply(exc: Exception) -> SessionMessage:
    """The JSON-RPC error answering the line that raised ``exc`` (the error's input: the line, or its JSON)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCError

    request_id, error = _classify(_input_of(exc))
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _input_of(exc: Exception) -> object:
    errors = getattr(exc, "errors", None)
    problems = errors() if callable(errors) else []
    return problems[0].get("input") if problems else None


def _classify(received: object) -> tuple[int | str | None, ErrorData]:
    """The id to answer and the error: parse error, invalid request, or text that is not valid Unicode."""
    from mcp_types import ErrorData

    from m3agent.server.hygiene import SURROGATE_HINT, has_lone_surrogate

    message = received
    if isinstance(received, str):
        try:
            message = json.loads(received)
        except (ValueError, RecursionError):
            return None, ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON", data={"hint": HINT})
    found = message.get("id") if isinstance(message, dict) else None
    request_id = found if isinstance(found, int | str) and not isinstance(found, bool) else None
    if has_lone_surrogate(message):
        return request_id, ErrorData(code=INVALID_PARAMS,
                                     message="Invalid params: the text holds a lone surrogate (\\ud800-\\udfff)",
                                     data={"hint": SURROGATE_HINT})
    return request_id, ErrorData(code=INVALID_REQUEST, message="Invalid request: not a JSON-RPC 2.0 message",
                                 data={"hint": HINT})
