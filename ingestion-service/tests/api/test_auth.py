"""Bearer API_KEY on /api/* and /metrics."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": ""},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic abc"},
        {b"Authorization": "Bearer \u017c\u00f3\u0142w".encode()},  # raw non-ASCII bytes on the wire
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [("put", "/api/v1/ingest"), ("delete", "/api/v1/documents/x"), ("get", "/metrics"), ("post", "/api/v1/extract")],
)
def test_missing_or_wrong_token_is_401(
    client: TestClient, headers: dict[str, str] | dict[bytes, bytes], method: str, path: str
) -> None:
    response = client.request(method.upper(), path, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


def test_right_token_passes(client: TestClient) -> None:
    assert client.delete("/api/v1/documents/nothing").status_code == 200
