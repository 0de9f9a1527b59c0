from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.responses import JSONResponse

from ingestion_service.api.models import DocumentView
from shared_contract.error_body import ErrorBody

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))

INGESTION_KEY = "cli-ingestion-key-0123456789-0123456789"
RETRIEVAL_KEY = "cli-retrieval-key-0123456789-0123456789"
ERROR_HINT = "The service's request_failed log line with this request_id has the cause."


def error_reply(status: int, code: str, message: str, *, hint: str = ERROR_HINT) -> JSONResponse:
    """A failure as both services answer it: the flat ``ErrorBody``."""
    body = ErrorBody(error=message, code=code, hint=hint, request_id="req-1")
    return JSONResponse(body.model_dump(mode="json"), status_code=status)


# What the documents listing sends for a field nobody set (an upload's row: no S3 source, no labels).
UNSET: dict[str, Any] = {
    "name": None,
    "collection_name": "kb",
    "content_hash": None,
    "source_bytes": None,
    "format": None,
    "chunks": 1,
    "text_bytes": None,
    "languages": [],
    "extractor": None,
    "tags": [],
    "category": None,
    "attributes": {},
    "ingested_at": None,
    "ingest_version": None,
    "s3_bucket": None,
    "s3_key": None,
    "s3_etag": None,
}


def document_view(file_id: str, **fields: Any) -> DocumentView:
    """One row of ``GET /api/v1/documents``: the given fields, the others unset."""
    return DocumentView.model_validate({**UNSET, "file_id": file_id, **fields})


def document_row(file_id: str, **fields: Any) -> dict[str, Any]:
    """That row as the service sends it."""
    return document_view(file_id, **fields).model_dump(mode="json")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAG_INGESTION_URL", "RAG_RETRIEVAL_URL", "INGESTION_API_KEY", "RETRIEVAL_API_KEY", "QDRANT_URI"):
        monkeypatch.delenv(name, raising=False)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` (a scripted service) served by uvicorn on a free loopback port; yields its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the scripted service did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)


def store_parent() -> str:
    """Where a test's embedded store goes: tmpfs when there is room (the engine syncs every index it
    creates), else the temp directory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * 2**30:
        return str(shm)
    return tempfile.gettempdir()
