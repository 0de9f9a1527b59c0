"""Secrets out of what the services log or answer: URL credentials, authorization values, API keys.

Endpoint settings may carry credentials (``http://user:pass@host``, ``?api_key=``), and upstream
services echo request details in their error texts; both end up in messages built from them.
"""

from __future__ import annotations

import re

REDACTED = "***"

# userinfo of any URL: scheme://user:pass@host -> scheme://***@host
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#\"'<>]+@")
# Authorization values: "Bearer <token>", "Basic <base64>", "Token <token>"
_AUTHORIZATION = re.compile(r"\b(?P<scheme>Bearer|Basic|Token)(?P<gap>\s+|=)[A-Za-z0-9._~+/=-]{6,}", re.IGNORECASE)
# Query parameters and key=value pairs that carry keys or signatures.
_KEY_VALUE = re.compile(
    r"(?P<name>\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|x-amz-signature|"
    r"x-amz-credential|x-amz-security-token|signature|sig)[\"']?\s*[=:]\s*)(?P<quote>[\"']?)[^&\s\"',;#]+",
    re.IGNORECASE,
)
# Provider keys that stand alone in a text: OpenAI-style (sk-...), AWS access key ids.
_STANDALONE_KEY = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|(?:AKIA|ASIA)[A-Z0-9]{16})\b")


def redact_url(url: str) -> str:
    """``url`` without its credentials: userinfo and key-carrying query parameters masked."""
    return redact_secrets(url)


def redact_secrets(text: str) -> str:
    """``text`` with URL credentials, authorization values, key parameters and provider keys masked."""
    text = _USERINFO.sub(rf"\g<scheme>{REDACTED}@", text)
    text = _AUTHORIZATION.sub(rf"\g<scheme>\g<gap>{REDACTED}", text)
    text = _KEY_VALUE.sub(rf"\g<name>\g<quote>{REDACTED}", text)
    return _STANDALONE_KEY.sub(REDACTED, text)
