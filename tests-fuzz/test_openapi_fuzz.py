"""Schema fuzzing of both services through their own OpenAPI (`make fuzz`, run by .ci/run).

schemathesis (its CLI, `st run`) generates requests from each service's /openapi.json and sends
them, with the API key, to a real `rag dev` stack on loopback. The bar: no server error (5xx) and
every response conforming to the schema the service publishes (status code, content type,
headers, body). FUZZ_MAX_EXAMPLES bounds the examples per operation (default 25); the seed is
fixed so a failure replays.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from integration_support import Stack

MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "25"))
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)
SCHEMATHESIS = Path(sys.executable).parent / "st"


@pytest.mark.parametrize("service", ["ingestion", "retrieval"])
def test_service_conforms_to_its_openapi(stack: Stack, service: str, tmp_path: Path) -> None:
    url, key = (
        (stack.ingestion_url, stack.ingestion_key)
        if service == "ingestion"
        else (stack.retrieval_url, stack.retrieval_key)
    )
    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{url}/openapi.json",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--header",
            f"Authorization: Bearer {key}",
            "--checks",
            CHECKS,
            "--seed",
            "20261123",
            "--request-timeout",
            "120",
            "--report",
            "junit",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, f"schemathesis found problems in {service}:\n{result.stdout[-12000:]}"
