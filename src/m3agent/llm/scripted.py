"""A deterministic chat model that replays a given list of replies.

Used to pin agent-loop behaviour in tests and for offline demos. A reply is
a string (returned verbatim), a mapping (returned as JSON text) or a callable
``(messages) -> str`` (computed from the conversation). Every call's
messages are recorded in :attr:`ScriptedChat.calls`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, EndpointError
from m3agent.llm import ChatReply, Message, Usage, flatten_content
from m3agent.llm.schema import parse_reply

if TYPE_CHECKING:
    from m3agent.registry import BackendSpec

ScriptedReply = str | Mapping[str, Any] | Callable[[Sequence[Message]], str]


class ScriptedChat:
    """Replays ``replies`` in order; raises :class:`EndpointError` once they are used up."""

    def __init__(self, replies: Sequence[ScriptedReply], name: str = "scripted") -> None:
        self.replies = list(replies)
        self.name = name
        self.calls: list[list[dict[str, Any]]] = []
        self.schemas: list[Mapping[str, Any] | None] = []

    @property
    def remaining(self) -> int:
        return len(self.replies) - len(self.calls)

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> ChatReply:
        if self.remaining <= 0:
            raise EndpointError(
                f"scripted chat ran out of replies after {len(self.calls)} calls",
                hint="give the scripted backend more replies",
            )
        reply = self.replies[len(self.calls)]
        self.calls.append([dict(m) for m in messages])
        self.schemas.append(schema)
        text = _render(reply, messages)
        prompt_tokens = sum(len(flatten_content(m.get("content"))) for m in messages) // 4
        usage = Usage(prompt_tokens, len(text) // 4, 1)
        parsed, error = parse_reply(text, schema) if schema is not None else (None, None)
        return ChatReply(text, parsed, error, usage, self.name, 0.0)


def _render(reply: ScriptedReply, messages: Sequence[Message]) -> str:
    if isinstance(reply, str):
        return reply
    if isinstance(reply, Mapping):
        return json.dumps(reply, ensure_ascii=False)
    return reply(messages)


def create(spec: BackendSpec, *, replies: Sequence[ScriptedReply] | None = None, **_: Any) -> ScriptedChat:
    """Factory for ``scripted:`` (with ``replies=``) or ``scripted:/path/replies.json`` (a JSON list)."""
    if replies is not None:
        return ScriptedChat(replies)
    if not spec.target:
        raise ConfigError(
            "the scripted chat model needs replies",
            hint="pass replies=[...] in code, or use scripted:/path/replies.json (a JSON list)",
        )
    path = Path(spec.target).expanduser()
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read scripted replies from {path}: {exc}") from exc
    if not isinstance(loaded, list):
        raise ConfigError(f"{path} must hold a JSON list of replies")
    return ScriptedChat([r if isinstance(r, str | dict) else json.dumps(r) for r in loaded])
