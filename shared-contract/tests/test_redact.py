"""Credentials never survive redaction; the rest of the text does."""

from __future__ import annotations

import pytest

from shared_contract.redact import redact_secrets, redact_url


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:pa55@host:8080/v1", "http://***@host:8080/v1"),
        ("https://token@example.com/x?y=1", "https://***@example.com/x?y=1"),
        ("http://host/v1?api_key=abc123&model=m", "http://host/v1?api_key=***&model=m"),
        (
            "https://s3.local/b/k?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIAX%2F1",
            "https://s3.local/b/k?X-Amz-Signature=***&X-Amz-Credential=***",
        ),
        ("http://host:9000/bucket/key.pdf", "http://host:9000/bucket/key.pdf"),
    ],
)
def test_redact_url_masks_credentials_only(text: str, expected: str) -> None:
    assert redact_url(text) == expected


def test_redact_secrets_masks_keys_an_upstream_echoed() -> None:
    echoed = (
        "Incorrect API key provided: sk-CHATKEY-SECRET-0001. auth=Bearer sk-abcdefghijkl "
        "Authorization: Basic dmlzdXNlcjpWSVNJT05VUkxQQVNT endpoint http://u:p@10.0.0.2/v1 "
        'body {"api_key": "k-123456", "password":"hunter22"} key id AKIAIOSFODNN7EXAMPLE'
    )
    redacted = redact_secrets(echoed)
    for secret in ("CHATKEY", "abcdefghijkl", "dmlzdXNlcjpW", "u:p@", "k-123456", "hunter22", "AKIAIOSFODNN7EXAMPLE"):
        assert secret not in redacted
    assert redacted.startswith("Incorrect API key provided: ***.")
    assert "endpoint http://***@10.0.0.2/v1" in redacted


def test_redact_secrets_keeps_ordinary_text() -> None:
    text = "The model answered HTTP 429: rate limit reached for gpt-4o-mini, retry in 7 s (tokens per min)."
    assert redact_secrets(text) == text
