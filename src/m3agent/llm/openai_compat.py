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
once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from m3agent.errors import ConfigError, EndpointError
from m3agent.llm import ChatReply, Message, Usage
from m3agent.llm.schema import cap_strings, parse_reply, schema_instruction

if TYPE_CHECKING:
    import httpx

    from m3agent.registry import BackendSpec

STRUCTURED_MODES = ("json_schema", "json_object_schema", "json_object", "prompt")
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_SERVER_HINT = (
    "start the server (e.g. `python -m llama_cpp.server --model M.gguf`, `vllm serve M`, `ollama serve`) "
    "or fix the URL given to --llm / M3AGENT_LLM"
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
        connect_timeout_s: float = 5.0,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        structured: str = "json_schema",
        max_string: int | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        if structured not in STRUCTURED_MODES:
            raise ConfigError(f"unknown structured-output mode {structured!r}", hint=f"use one of {STRUCTURED_MODES}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.mode_index = STRUCTURED_MODES.index(structured)
        self.max_string = max_string
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport)

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
            return _reply(data, schema, model, time.perf_counter() - started)

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
            models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
            if not models:
                hint = "add ?model=NAME to the --llm URL"
                raise EndpointError(f"{self.base_url} lists no models", hint=hint)
            self.model = str(models[0])
        return self.model

    def _post(self, path: str, payload: dict[str, Any]) -> httpx.Response:
        return self._request("POST", path, payload)

    def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> httpx.Response:
        """Send with bounded retries on connection errors, 429 and 5xx."""
        import httpx

        url = self.base_url + path
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = self._client.request(method, url, json=payload)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                if last:
                    raise EndpointError(f"cannot reach {self.base_url}: {exc}", hint=_SERVER_HINT) from exc
                time.sleep(self._delay(attempt, None))
                continue
            except httpx.TimeoutException as exc:
                raise EndpointError(
                    f"{self.base_url} did not answer in time: {exc!r}",
                    hint="raise request_timeout_s (M3AGENT_REQUEST_TIMEOUT_S) or use a faster model",
                ) from exc
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
    allowed = {"timeout_s", "api_key", "max_retries", "backoff_s", "connect_timeout_s", "transport"}
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


def _json_or_raise(response: httpx.Response, base_url: str) -> dict[str, Any]:
    if response.status_code >= 400:
        raise EndpointError(
            f"{base_url} answered HTTP {response.status_code}: {_error_text(response)}",
            hint=_status_hint(response.status_code),
        )
    try:
        data = response.json()
    except json.JSONDecodeError as exc:
        raise EndpointError(f"{base_url} returned non-JSON: {response.text[:200]!r}") from exc
    if not isinstance(data, dict):
        raise EndpointError(f"{base_url} returned unexpected JSON: {str(data)[:200]!r}")
    return data


def _rejects_format(response: httpx.Response) -> bool:
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


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
    except json.JSONDecodeError:
        return response.text[:300]
    error = data.get("error", data) if isinstance(data, dict) else data
    message = error.get("message", error) if isinstance(error, dict) else error
    return str(message)[:300]


def _reply(data: dict[str, Any], schema: Mapping[str, Any] | None, model: str, latency: float) -> ChatReply:
    choices = data.get("choices") or [{}]
    message = choices[0].get("message") or {}
    text = message.get("content") or ""
    raw_usage = data.get("usage") or {}
    usage = Usage(int(raw_usage.get("prompt_tokens") or 0), int(raw_usage.get("completion_tokens") or 0), 1)
    parsed, error = parse_reply(text, schema) if schema is not None else (None, None)
    return ChatReply(text, parsed, error, usage, str(data.get("model") or model), latency)
