"""The /v1 routes' one error type, rendered in OpenAI's shape (``api/openai_errors.py``).

OpenAI SDKs read ``error.message``, so /v1 answers ``{"error": {"message", "type", "code", "param"}}``
instead of the services' flat shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

ErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "rate_limit_error",
    "api_error",
    "service_unavailable",
]
# chat_requests_total's outcome label.
ChatOutcome = Literal[
    "ok", "client_tool_calls", "invalid_request", "disabled", "upstream_error", "error", "disconnected"
]

CHAT_DISABLED = "chat_disabled"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_TIMEOUT = "upstream_timeout"
UPSTREAM_ERROR = "upstream_error"
UPSTREAM_RESPONSE_TOO_LARGE = "upstream_response_too_large"
INVALID_KNOWLEDGE_BASE = "invalid_knowledge_base"
KNOWLEDGE_BASE_NOT_FOUND = "knowledge_base_not_found"


def error_type_for(status: int) -> ErrorType:
    """OpenAI's error type for an HTTP status."""
    if status in (400, 413, 422):
        return "invalid_request_error"
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 429:
        return "rate_limit_error"
    if status == 503:
        return "service_unavailable"
    return "api_error" if status >= 500 else "invalid_request_error"


class ChatError(Exception):
    """A /v1 failure: its status, OpenAI error fields, the metrics outcome, and the response headers it
    carries (the upstream's ``Retry-After``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        outcome: ChatOutcome,
        param: str | None = None,
        error_type: ErrorType | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.outcome: ChatOutcome = outcome
        self.error_type: ErrorType = error_type or error_type_for(status)
        self.headers: dict[str, str] = dict(headers or {})

    def body(self) -> dict[str, object]:
        """The OpenAI-shaped error body."""
        return openai_error(self.message, self.error_type, self.code, self.param)


def openai_error(message: str, error_type: str, code: str | None, param: str | None = None) -> dict[str, object]:
    """``{"error": {...}}`` as OpenAI SDKs parse it."""
    return {"error": {"message": message, "type": error_type, "code": code, "param": param}}


def invalid_request(message: str, *, param: str | None = None, code: str = "invalid_request") -> ChatError:
    """A 400 the caller can fix."""
    return ChatError(400, message, code=code, outcome="invalid_request", param=param)


def chat_disabled() -> ChatError:
    """CHAT_UPSTREAM_BASE_URL is unset."""
    return ChatError(
        503,
        "Chat is disabled on this retrieval agent: set CHAT_UPSTREAM_BASE_URL (the upstream model's "
        "OpenAI-compatible base URL) to enable /v1/chat/completions.",
        code=CHAT_DISABLED,
        outcome="disabled",
    )
