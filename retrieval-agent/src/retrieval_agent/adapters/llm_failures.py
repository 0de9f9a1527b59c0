"""A failed call to the LLM, in words fit for a log: the upstream's own error text can echo the prompt,
the user's words or the headers sent, so WARNING lines name the failure and DEBUG alone has the text."""

from __future__ import annotations

import logging

from pydantic_ai.exceptions import ModelHTTPError

from shared_contract.redact import redact_secrets

# How much of a failed model call's own text a DEBUG line keeps.
_DETAIL_CHARS = 500


def model_failure(exc: BaseException) -> str:
    """A failed model call in words fit for a WARNING: the error's type and, for an HTTP error, its status.

    Never the error's text: an upstream's error body can echo the prompt, the user's words or headers.
    """
    if isinstance(exc, ModelHTTPError):
        return f"{type(exc).__name__} (HTTP {exc.status_code})"
    return type(exc).__name__


def log_failure_detail(log: logging.Logger, what: str, exc: BaseException) -> None:
    """The failure's own text, at DEBUG only: secrets masked, at most _DETAIL_CHARS characters."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s: %s", what, redact_secrets(str(exc))[:_DETAIL_CHARS], stacklevel=2)
