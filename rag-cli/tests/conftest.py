from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))

INGESTION_KEY = "cli-ingestion-key-0123456789-0123456789"
RETRIEVAL_KEY = "cli-retrieval-key-0123456789-0123456789"


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
