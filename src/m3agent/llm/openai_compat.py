"""OpenAI-compatible chat endpoints (vLLM, Ollama, llama.cpp server, hosted APIs) over httpx.

Structured output degrades gracefully. Modes, tried in order until the
server accepts one (an HTTP 400/422 that is not about length moves to the
next; the working mode is remembered):

- ``json_schema``: OpenAI-style ``{"type": "json_schema", "json_schema": {...}}``
  (OpenAI, vLLM, Ollama, llama.cpp's own server);
- ``json_object_schema``: ``{"type": "json_object", "schema": {...}}``
  (llama-cpp-python's server and similar: grammar-constrained);
- ``json_object``: JSON mode without a schema, schema stated in the prompt;
- ``prompt``: no ``response_format``, schema stated in the prompt.

Spec options: ``?model=NAME``, ``?structured=MODE`` (start lower on the
ladder), ``?max_string=N`` (cap free strings in the schema sent, so a small
model under a grammar cannot ramble past ``max_tokens``). Connection
errors, 429 and 5xx are retried with exponential backoff; other 4xx fail at
once. Each HTTP request ends within ``timeout_s`` in total and reads at most
``max_reply_bytes`` (:mod:`m3agent.llm.bounded_http`); a reply that is not an
OpenAI chat envelope is an :class:`~m3agent.errors.EndpointError` with a hint,
like every other endpoint failure, so an ingest records the clip as failed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, EndpointError
from m3agent.llm import ChatReply, Message, Usage
from m3agent.llm.bounded_http import BoundedClient, HttpReply
from m3agent.llm.schema import cap_strings, parse_reply, schema_instruction

if TYPE_CHECKING:
    import httpx

    from m3agent.registry import BackendSpec

DEFAULT_MAX_REPLY_BYTES = 16 * 2**20  # settings.max_reply_mb

STRUCTURED_MODES = ("json_schema", "json_object_schema", "json_object", "prompt")
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_SERVER_HINT = (
    "start the server (e.g. `python -m llama_cpp.server --model M.gguf`, `vllm serve M`, `ollama serve`) "
    "or fix the URL given to --llm / M3AGENT_LLM"
)
_ENVELOPE_HINT = (
    "the URL must be the root of an OpenAI-compatible API (usually ending in /v1), not another service "
    "or a proxy's page; check --llm / M3AGENT_LLM"
)


class OpenAIChat:
    """Chat over ``POST {base_url}/chat/completions``. ``model`` ``None`` picks the server's first model."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        connect_timeout_s: float = 5.0,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        structured: str = "json_schema",
        max_string: int | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if structured not in STRUCTURED_MODES:
            raise ConfigError(f"unknown structured-output mode {structured!r}", hint=f"use one of {STRUCTURED_MODES}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.mode_index = STRUCTURED_MODES.index(structured)
        self.max_string = max_string
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = BoundedClient(timeout_s=timeout_s, max_bytes=max_reply_bytes,
                                     connect_timeout_s=connect_timeout_s, headers=headers, transport=transport)

    @property
    def name(self) -> str:
        return f"{self.model or '?'}@{self.base_url}"

    @property
    def structured_mode(self) -> str:
        """The structured-output mode currently used: ``json_schema``, ``json_object`` or ``prompt``."""
        return STRUCTURED_MODES[self.mode_index]

    def close(self) -> None:
        self._client.close()

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> ChatReply:
        started = time.perf_counter()
        model = self._resolved_model()
        while True:
            payload = self._payload(model, messages, schema, max_tokens, temperature)
            response = self._post("/chat/completions", payload)
            if schema is not None and _rejects_format(response) and self._degrade():
                continue
            data = _json_or_raise(response, self.base_url)
            return _reply(data, schema, model, time.perf_counter() - started, self.base_url)

    def _payload(
        self,
        model: str,
        messages: Sequence[Message],
        schema: Mapping[str, Any] | None,
        max_tokens: int,
        temperature: float,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in messages],  # string content or OpenAI content parts
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if schema is None:
            return payload
        sent = cap_strings(schema, self.max_string) if self.max_string else dict(schema)
        mode = self.structured_mode
        if mode == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": sent, "strict": True},
            }
        elif mode == "json_object_schema":
            payload["response_format"] = {"type": "json_object", "schema": sent}
        else:
            payload["messages"] = _with_schema_instruction(payload["messages"], schema)
            if mode == "json_object":
                payload["response_format"] = {"type": "json_object"}
        return payload

    def _degrade(self) -> bool:
        """Step down to the next structured-output mode; ``False`` when already at plain prompting."""
        if self.mode_index + 1 >= len(STRUCTURED_MODES):
            return False
        self.mode_index += 1
        return True

    def _resolved_model(self) -> str:
        if self.model is None:
            data = _json_or_raise(self._request("GET", "/models", None), self.base_url)
            listed = data.get("data")
            models = [m.get("id") for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)] \
                if isinstance(listed, list) else []
            if not models:
                hint = "add ?model=NAME to the --llm URL"
                raise EndpointError(f"{self.base_url} lists no models", hint=hint)
            self.model = str(models[0])
        return self.model

    def _post(self, path: str, payload: dict[str, Any]) -> HttpReply:
        return self._request("POST", path, payload)

    def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> HttpReply:
        """Send with bounded retries on connection errors, 429 and 5xx; each try ends within ``timeout_s``."""
        import httpx

        url = self.base_url + path
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = self._client.request(method, url, payload)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                if last:
                    raise EndpointError(f"cannot reach {self.base_url}: {exc}", hint=_SERVER_HINT) from exc
                time.sleep(self._delay(attempt, None))
                continue
            except httpx.TimeoutException as exc:
                raise EndpointError(
                    f"{self.base_url} did not complete its reply within {self.timeout_s:g} s",
                    hint="raise request_timeout_s (M3AGENT_REQUEST_TIMEOUT_S) or use a faster model",
                ) from exc
            except httpx.HTTPError as exc:
                raise EndpointError(f"the connection to {self.base_url} failed: {exc}", hint=_SERVER_HINT) from exc
            if response.status_code not in _RETRYABLE_STATUS or last:
                return response
            time.sleep(self._delay(attempt, response.headers.get("retry-after")))
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), 30.0)
            except ValueError:
                pass
        return float(self.backoff_s * (2**attempt))


def create(spec: BackendSpec, **kwargs: Any) -> OpenAIChat:
    """Factory for ``openai://host:port/v1?model=M`` and ``http(s)://host/v1?model=M``."""
    if not spec.target:
        raise ConfigError(f"no host in {spec.raw!r}", hint="use openai://host:port/v1?model=NAME")
    scheme = spec.scheme
    if scheme == "openai":
        scheme = "https" if spec.target.split("/")[0].endswith(":443") else "http"
    params = dict(spec.params)
    model = params.pop("model", None)
    allowed = {"timeout_s", "max_reply_bytes", "api_key", "max_retries", "backoff_s", "connect_timeout_s",
               "transport"}
    options: dict[str, Any] = {k: v for k, v in kwargs.items() if k in allowed}
    if "structured" in params:
        options["structured"] = params["structured"]
    if "max_string" in params:
        options["max_string"] = _positive_int(params["max_string"], "max_string")
    return OpenAIChat(f"{scheme}://{spec.target}", model, **options)


def _positive_int(text: str, name: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{name} must be a positive integer, got {text!r}")
    return int(text)


def _with_schema_instruction(
    messages: list[dict[str, Any]], schema: Mapping[str, Any]
) -> list[dict[str, Any]]:
    instruction = schema_instruction(schema)
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        content = first.get("content") or ""
        if isinstance(content, str):
            first["content"] = content + "\n\n" + instruction
        else:  # a list of content parts
            first["content"] = [*content, {"type": "text", "text": instruction}]
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _json_or_raise(response: HttpReply, base_url: str) -> dict[str, Any]:
    if response.status_code >= 400:
        raise EndpointError(
            f"{base_url} answered HTTP {response.status_code}: {_error_text(response)}",
            hint=_status_hint(response.status_code),
        )
    try:
        data = response.json()
    except (ValueError, RecursionError) as exc:
        raise EndpointError(f"{base_url} returned non-JSON: {response.text[:200]!r}", hint=_ENVELOPE_HINT) from exc
    if not isinstance(data, dict):
        raise EndpointError(f"{base_url} returned JSON that is not an object ({type(data).__name__})",
                            hint=_ENVELOPE_HINT)
    return data


def _rejects_format(response: HttpReply) -> bool:
    """A 400/422 that is not about the prompt's length or its media: read as "this server lacks the format".

    llama-cpp-python's server answers an unknown ``response_format`` with a 500 naming it.
    A refusal of images or audio (vLLM: "At most 1 image(s) may be provided in one prompt")
    is the caller's to handle, not a reason to give up structured output.
    """
    text = _error_text(response).lower()
    if response.status_code == 500 and "response_format" in text:
        return True
    if response.status_code not in (400, 422):
        return False
    if any(word in text for word in ("context", "token", "too long")):
        return False
    if "response_format" in text or "json_schema" in text:
        return True
    return not any(word in text for word in _MEDIA_WORDS)


_MEDIA_WORDS = ("image", "vision", "audio", "video", "multimodal", "modality")


def _status_hint(status: int) -> str:
    if status in (401, 403):
        return "check the API key (settings api_key / M3AGENT_API_KEY)"
    if status == 404:
        return "check that the URL ends with the API root (usually /v1) and that the model name exists"
    if status == 429 or status >= 500:
        return "the server is overloaded or failing; retry later or lower the request rate"
    return "the server refused the request; check the model name and parameters"


def _error_text(response: HttpReply) -> str:
    try:
        data = response.json()
    except (ValueError, RecursionError):
        return response.text[:300]
    error = data.get("error", data) if isinstance(data, dict) else data
    message = error.get("message", error) if isinstance(error, dict) else error
    return str(message)[:300]


def _reply(
    data: dict[str, Any], schema: Mapping[str, Any] | None, model: str, latency: float, base_url: str
) -> ChatReply:
    text = _content(data, base_url)
    raw_usage = data.get("usage")
    usage_map = raw_usage if isinstance(raw_usage, dict) else {}
    usage = Usage(_count(usage_map.get("prompt_tokens")), _count(usage_map.get("completion_tokens")), 1)
    parsed, error = parse_reply(text, schema) if schema is not None else (None, None)
    served = data.get("model")
    return ChatReply(text, parsed, error, usage, served[:200] if isinstance(served, str) and served else model,
                     latency)


def _content(data: dict[str, Any], base_url: str) -> str:
    """The text of the first choice; an envelope without it is an :class:`EndpointError`."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _malformed(base_url, f"'choices' is {_kind(choices)}, not a list of objects")
    message = choices[0].get("message")
    if message is None:
        message = {}
    if not isinstance(message, dict):
        raise _malformed(base_url, f"'choices[0].message' is {_kind(message)}, not an object")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):  # content parts
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    raise _malformed(base_url, f"'choices[0].message.content' is {_kind(content)}, not text")


def _malformed(base_url: str, problem: str) -> EndpointError:
    return EndpointError(f"{base_url} sent a reply that is not an OpenAI chat completion: {problem}",
                         hint=_ENVELOPE_HINT)


def _kind(value: Any) -> str:
    if value is None:
        return "missing"
    if isinstance(value, list):
        return f"a list of {type(value[0]).__name__}" if value else "an empty list"
    return f"a {type(value).__name__}"


def _count(value: Any) -> int:
    """A token count from ``usage``: a non-negative integer, else 0 (usage is reported, never trusted)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 2**53:
        return 0
    return int(value)
