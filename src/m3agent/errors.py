"""The single exception tree of m3agent.

Every error a user can meet derives from :class:`M3AgentError` and carries a
``hint``: the next thing to do. The CLI prints ``message`` and ``hint`` and
exits with ``exit_code``; it never shows a traceback for these.
"""

from __future__ import annotations


class M3AgentError(Exception):
    """Base of all m3agent errors. ``hint`` says what to do next."""

    exit_code: int = 1
    default_hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(M3AgentError):
    """Settings are invalid or contradictory."""

    exit_code = 2
    default_hint = "check m3agent.toml, M3AGENT_* variables and command-line flags"


class NotAvailableYet(M3AgentError):
    """A command or backend exists in the interface but is not implemented yet."""

    exit_code = 3


class MissingExtraError(M3AgentError):
    """An optional dependency is not installed; the hint names the pip command."""

    exit_code = 4

    def __init__(self, what: str, extra: str | None, *, package: str | None = None) -> None:
        if extra is None:
            super().__init__(f"{what} is not installed", hint=f"run: pip install {package}")
        else:
            pip = f"pip install 'm3agent[{extra}]'" + (f"  (or: pip install {package})" if package else "")
            super().__init__(f"{what} needs the optional extra [{extra}]", hint=f"run: {pip}")
        self.extra = extra


class UnknownBackendError(ConfigError):
    """A backend URL or short name does not match any registered backend."""


class StoreError(M3AgentError):
    """Base of memory-store errors."""


class StoreCorruptError(StoreError):
    default_hint = (
        "the file is not a readable m3agent memory; restore it from a backup "
        "or point --memory at a new file"
    )


class StoreVersionError(StoreError):
    default_hint = "this memory was written by a newer m3agent; upgrade m3agent to open it"


class StoreReadOnlyError(StoreError):
    default_hint = "check the file and folder permissions, or choose a writable --memory path"


class StoreNeedsUpgradeError(StoreReadOnlyError):
    """A read-only open of a memory written by an older m3agent: its schema needs migrations first."""

    default_hint = "open it once with write permission (any command that writes, e.g. m3agent consolidate) to upgrade"


class StoreFullError(StoreError):
    default_hint = "free disk space or move the memory to a larger disk; nothing was half-written"


class NotFoundError(StoreError):
    exit_code = 5


class IntegrityError(StoreError):
    """An operation would break the store's invariants (e.g. merging an entity with itself)."""


class VideoMismatchError(IntegrityError):
    """A video id already names another file (its content fingerprint differs): one id means one file."""

    default_hint = "give this file its own id (--video-id / video_id), or forget the stored video first"


class MediaError(M3AgentError):
    """A source could not be opened or decoded."""

    default_hint = "check that the file exists and is a video or audio file PyAV can decode"


class DownloadError(MediaError):
    """A URL job could not download its file; every network failure reads the same (nothing leaks about
    addresses the server can or cannot reach)."""

    default_hint = ("give an http(s) URL of a media file on a public address (private networks must be listed in "
                    "server.url_allowed_networks), or upload the file")


class ModelError(M3AgentError):
    """A packaged or user-supplied model could not be loaded or run."""

    default_hint = "run `m3agent doctor` to see which models are installed"


class PromptError(ModelError):
    """A packaged prompt template and its caller disagree: a missing section, or a field not filled."""

    default_hint = "reinstall m3agent; if the prompt files are intact, report this as a bug"


class ModelCrashError(ModelError):
    """The local model's process died in native code (llama.cpp): the runtime, how it died, the fix.

    Nothing is lost by it: the model runs in a process of its own, so stored clips and
    consolidation records stay, and the next call starts a fresh process."""

    exit_code = 7
    default_hint = (
        "a runtime compiled for another CPU is the usual cause: rebuild it portably with "
        "`rm -rf ~/.cache/m3agent-wheels && make setup`, then check it with `m3agent models check`; if only one "
        "model file crashes, the file is damaged (`m3agent models pull NAME` re-verifies a packaged one); or answer "
        "through an endpoint (--llm openai://HOST:PORT/v1?model=NAME) or without a model (--llm none)"
    )

    def __init__(self, name: str, model_path: object, how: str, ready: dict[str, object],
                 stderr_tail: list[str], *, runtime: str = "llama.cpp", hint: str | None = None) -> None:
        package = "llama-cpp-python" if runtime == "llama.cpp" else runtime
        runtime = f"{runtime} ({package} {ready.get('version', '?')})" if ready else runtime
        stage = "while answering" if ready else "while loading the model"
        last = f"; its last words: {' | '.join(stderr_tail[-3:])}" if stderr_tail else ""
        super().__init__(f"the local model runtime {runtime} {how} {stage} ({name}, {model_path}){last}", hint=hint)
        self.how = how


class ContextOverflowError(ModelError):
    """A prompt (with room for the reply) does not fit the model's context window."""

    default_hint = "give the model more context (a llamacpp: spec takes ?n_ctx=8192) or ask for fewer rounds (--rounds)"


class EndpointError(M3AgentError):
    """An LLM or embedding endpoint is unreachable or answered with an error."""

    default_hint = "check the endpoint URL, that the server is running, and the API key"


class MalformedReplyError(EndpointError):
    """A model reply did not match its response schema after the allowed retries."""

    default_hint = "try a stronger model, or a backend with structured (JSON-schema) output"


class BenchmarkError(M3AgentError):
    """A benchmark input is missing or malformed."""


class UnsafePickleError(M3AgentError):
    """A pickle asked for a class outside the allow-list; it was not loaded."""

    default_hint = "only memory graphs released with M3-Bench can be imported; this file was refused"


class ServerRequestError(M3AgentError):
    """The server refused a request (a path, an upload); the HTTP status says which kind."""

    status_code: int = 400


class AccessDeniedError(ServerRequestError):
    """A server-side path lies outside the folders the server may read."""

    status_code = 403
    default_hint = "put the file in a folder listed in server.allowed_folders, or upload it"


class UploadTooLargeError(ServerRequestError):
    status_code = 413
    default_hint = "raise server.max_upload_mb, or ingest the file by path from an allowed folder"


class BodyTooLargeError(ServerRequestError):
    """A request body over its route's limit; it was not read further."""

    status_code = 413
    default_hint = ("send a smaller body: uploads are limited by server.max_upload_mb, every other body by "
                    "server.max_body_kb; ingest a large file by path from an allowed folder")


class UnsupportedUploadError(ServerRequestError):
    status_code = 415
    default_hint = "upload a video or audio file (see server.upload_extensions)"


class InvalidRequestError(ServerRequestError):
    """A request the API cannot take as sent: a field of the wrong type or size, or JSON it cannot hold."""

    status_code = 422
    default_hint = "fix the fields the message names; /docs and /openapi.json give every request's format"


class UnfitRequestError(ServerRequestError):
    """A well-formed request whose values do not fit what they name (a time past the end of its video)."""

    status_code = 422


class EditConflictError(ServerRequestError):
    """An edit sent with ``If-Match`` whose version is no longer current: someone changed the same thing since
    it was read; nothing was written."""

    status_code = 412
    default_hint = ("read it again (the answer's ETag header is its version now), then send the edit again with "
                    "that version in If-Match")


class ServerBusyError(ServerRequestError):
    """The server cannot take the request now: every read store or the model is in use."""

    status_code = 503
    default_hint = "retry in a few seconds; if it stays busy, raise server.read_stores or check the running answers"


class AnswerTimeoutError(ServerRequestError):
    """An answer took longer than ``server.request_timeout_s``; it was stopped."""

    status_code = 504
    default_hint = ("ask a narrower question or fewer rounds, use a faster model, or raise "
                    "server.request_timeout_s")
