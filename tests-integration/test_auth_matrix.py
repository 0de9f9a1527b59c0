"""No way past the API key: every route of both services' OpenAPI x header variants, black-box."""

from __future__ import annotations

import httpx
import pytest
from integration_support import Stack

PUBLIC = {"/health", "/health/ready", "/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"}
# Opened by a browser without a key: the signed token in the path is the authorization.
SIGNED_PREFIX = "/api/v1/citations/"


def _variants(key: str) -> list[dict[str, str]]:
    return [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong-key-wrong-key-wrong-key-wrong"},
        {"Authorization": f"Bearer {key[:-1]}"},
        {"Authorization": f"Bearer {key}x"},
        {"Authorization": f"Basic {key}"},
        {"Authorization": key},
        {"X-API-Key": key},
    ]


def _error_code(path: str, body: dict[str, object]) -> object:
    """The error code where each route documents it: OpenAI's nested shape on the OpenAI-compatible /v1
    routes (their clients parse ``error.code``), the services' flat shape everywhere else."""
    if path.startswith("/v1/"):
        nested = body["error"]
        assert isinstance(nested, dict)
        return nested["code"]
    return body["code"]


@pytest.mark.parametrize("service", ["ingestion", "retrieval"])
def test_every_protected_route_refuses_every_wrong_key(stack: Stack, service: str) -> None:
    url, key = (
        (stack.ingestion_url, stack.ingestion_key)
        if service == "ingestion"
        else (stack.retrieval_url, stack.retrieval_key)
    )
    schema = httpx.get(f"{url}/openapi.json", timeout=30).json()
    routes = [
        (method.upper(), path.replace("{file_id}", "some-file"))
        for path, operations in schema["paths"].items()
        for method in operations
        if path not in PUBLIC and not path.startswith(SIGNED_PREFIX)
    ]
    assert len(routes) >= 2
    checked = 0
    with httpx.Client(base_url=url, timeout=30) as client:
        for method, path in routes:
            for headers in _variants(key):
                response = client.request(method, path, headers=headers, content=b'{"queries": ["x"]}')
                assert response.status_code == 401, (method, path, headers, response.text)
                assert _error_code(path, response.json()) == "UNAUTHORIZED"
                assert response.headers["www-authenticate"].lower().startswith("bearer")
                checked += 1
    assert checked == len(routes) * len(_variants(key))


def test_a_citation_route_takes_only_a_valid_signed_token_whatever_the_key(stack: Stack) -> None:
    schema = httpx.get(f"{stack.ingestion_url}/openapi.json", timeout=30).json()
    signed = [path for path in schema["paths"] if path.startswith(SIGNED_PREFIX)]
    assert len(signed) == 2
    with httpx.Client(base_url=stack.ingestion_url, timeout=30) as client:
        for path in signed:
            # The service's own key opens nothing: a forged token is refused as with no key at all.
            for headers in [*_variants(stack.ingestion_key), {"Authorization": f"Bearer {stack.ingestion_key}"}]:
                response = client.get(path.replace("{token}", "e30.forged-signature"), headers=headers)
                assert response.status_code == 403, (path, headers, response.text)
                assert response.json()["code"] == "CITATION_LINK_INVALID"
