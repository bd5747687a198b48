"""Errors as a browser user reads them: the API's ``{error, message, hint}`` speaks to a program (a Python class
name, an endpoint to call, a process id, Ctrl-C, a path on the server); the inspector's pages show a title in
words, the message without process ids or server paths, and a hint a person in a browser can follow.

``static/app.js`` applies the same rules to the error banner and the jobs table (``browserProblem``): the titles
come from :data:`TITLES` through the page (``data-titles`` on ``#problem``), the patterns are repeated there.
"""

from __future__ import annotations

import re

# titles for the error names whose words alone read badly; any other ``SomeThingError`` reads "Some thing"
TITLES = {
    "AccessDeniedError": "Not allowed",
    "AnswerTimeoutError": "The answer took too long",
    "BodyTooLargeError": "Too much to send",
    "ConfigError": "Server settings problem",
    "ContentTooLargeError": "Too much to send",
    "ContextOverflowError": "Too long for the model",
    "DownloadError": "Download failed",
    "EditConflictError": "Changed meanwhile",
    "EndpointError": "The model service did not answer",
    "IntegrityError": "Conflicting change",
    "InvalidRequestError": "Not accepted",
    "MalformedReplyError": "The model answered nonsense",
    "MediaError": "The file could not be read",
    "MethodNotAllowedError": "Not possible here",
    "MissingExtraError": "Not installed on this server",
    "ModelCrashError": "The model stopped",
    "ModelError": "The model failed",
    "NotAvailableYet": "Not available yet",
    "ServerBusyError": "The server is busy",
    "StoreCorruptError": "The memory is damaged",
    "StoreError": "Memory problem",
    "StoreFullError": "The disk is full",
    "StoreNeedsUpgradeError": "The memory needs an upgrade",
    "StoreReadOnlyError": "The memory is read-only",
    "StoreVersionError": "The memory needs an upgrade",
    "UnfitRequestError": "Not accepted",
    "UnsupportedUploadError": "Not a supported file",
    "UploadTooLargeError": "The file is too large",
}
# a hint for a program or an operator, not for a browser user: an endpoint or the API docs, HTTP headers,
# Ctrl-C, a process id, a path
UNFIT_HINT = re.compile(r"/api/|/docs\b|\b(GET|POST|PATCH|PUT|DELETE) /|\b(if-match|etag)\b|ctrl-c|\bpid\b"
                        r"|(^|[\s(])/[\w.-]+/", re.IGNORECASE)
PROCESS = re.compile(r"\s*\((?:pid|process) \d+[^)]*\)", re.IGNORECASE)  # "(pid 12 on host, since ...)"
SERVER_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.-]+/)+([\w.-]+)")  # /srv/data/talk.mp4 -> talk.mp4
BROWSER_HINTS = {
    403: "this server does not allow that; choose something it allows, or ask whoever runs it",
    404: "check the address, or go back to the videos",
    409: "reload the page to see the memory as it is now, then try again",
    412: "reload the page to see the change, then edit again if it is still wrong",
}
BROWSER_HINT = "try again; if it keeps failing, tell whoever runs this server"


def title(name: str) -> str:
    """A title in words for an error name (``NotFoundError`` -> ``Not found``)."""
    if name in TITLES:
        return TITLES[name]
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name.removesuffix("Error"))
    if not words:
        return "Something went wrong"
    text = " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)
    return text[0].upper() + text[1:]


def message(text: str) -> str:
    """``text`` without process ids, a path on the server shortened to its last part."""
    return SERVER_PATH.sub(r"\1", PROCESS.sub("", text))


def hint(text: str, status: int) -> str:
    """``text`` when a browser user can follow it, else a hint for them by ``status``."""
    if text and not UNFIT_HINT.search(text):
        return text
    return BROWSER_HINTS.get(status, BROWSER_HINT)


def problem(body: dict[str, str], status: int) -> dict[str, str]:
    """An error body (:func:`m3agent.server.failures.error_body`) as the page shows it."""
    return {"error": title(body.get("error", "")), "message": message(body.get("message", "")),
            "hint": hint(body.get("hint", ""), status)}
