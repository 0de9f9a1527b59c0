"""The one error body both services answer every handled failure with (docs/contract.md, Errors)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shared_contract.error_codes import QDRANT_UNAVAILABLE, SHARED_CODES


class ErrorBody(BaseModel):
    """Every handled failure of both services (flat, never nested in ``detail``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "status": False,
                    "error": "Qdrant is unreachable or failed.",
                    "code": QDRANT_UNAVAILABLE,
                    "hint": SHARED_CODES[QDRANT_UNAVAILABLE].hint,
                    "request_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                }
            ]
        }
    )

    status: bool = False
    error: str = Field(description="What happened, for people. Never submitted values or stack traces.")
    code: str = Field(description="Stable machine-readable code (docs/contract.md and the services' READMEs).")
    hint: str = Field(description="What the caller or operator should do next.")
    request_id: str = Field(description="Also the X-Request-ID header and on the service's request_failed log line.")
