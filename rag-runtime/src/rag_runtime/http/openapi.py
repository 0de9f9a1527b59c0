"""What both services declare in their OpenAPI documents: the Bearer scheme and the error responses."""

from __future__ import annotations

from typing import Any

from fastapi.security import HTTPBearer

from shared_contract.error_body import ErrorBody

# Declares the scheme only: EdgeMiddleware has already checked the key when a route runs.
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="BearerAuth",
    description="The service's API_KEY as a Bearer token; every route except the health probes needs it.",
)

_ERROR = {"model": ErrorBody}
# Every protected route can answer these, whatever its own body.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {**_ERROR, "description": "Missing or wrong API key (`WWW-Authenticate: Bearer`)."},
    413: {**_ERROR, "description": "Request body over its cap."},
    415: {**_ERROR, "description": "Unsupported Content-Type."},
    422: {**_ERROR, "description": "Invalid request (validation failure or a body that is not valid JSON)."},
    500: {
        **_ERROR,
        "description": "Unexpected failure (the request_failed log line with its request_id has the cause).",
    },
    503: {**_ERROR, "description": "Not ready, or a dependency (Qdrant, the embedding model) is unavailable."},
}
# GET /metrics answers Prometheus' text exposition format, not JSON.
PROMETHEUS_TEXT_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Prometheus text exposition format.",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}
