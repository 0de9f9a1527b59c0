"""A retrieval service whose contract settings differ from the collection's manifest is not ready, and
refuses queries naming the setting that differs."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from integration_support import REPO_ROOT, free_port, stop_process, wait_ready


def _start(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT)


def _poll_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> httpx.Response:
    """The first answer of /health/ready once the server listens (whatever its status)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited early:\n{log.read_text(encoding='utf-8', errors='replace')[-3000:]}")
        try:
            return httpx.get(f"{url}/health/ready", timeout=5)
        except httpx.TransportError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not start")


def test_mismatched_retrieval_service_reports_not_ready_and_refuses_search(tmp_path: Path) -> None:
    if os.environ.get("INGESTION_BASE_URL"):
        pytest.skip("needs its own embedded store; covered against a server by the compose stack's own probe")
    store = tmp_path / "qdrant"
    base_env = {
        **os.environ,
        "QDRANT_PATH": str(store),
        "LOCAL_MODELS_DIR": os.environ.get("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models")),
        "INGESTION_API_KEY": secrets.token_urlsafe(32),
        "RETRIEVAL_API_KEY": secrets.token_urlsafe(32),
    }
    base_env.pop("QDRANT_URI", None)

    # 1. The stack with the default contract creates the collection and its manifest.
    ports = (free_port(), free_port())
    stack_log = tmp_path / "stack.log"
    stack = _start(
        [
            "rag_cli",
            "dev",
            "--ingestion-port",
            str(ports[0]),
            "--retrieval-port",
            str(ports[1]),
            "--qdrant-path",
            str(store),
        ],
        base_env,
        stack_log,
        tmp_path,
    )
    try:
        wait_ready(f"http://127.0.0.1:{ports[0]}", stack, stack_log, 180)
    finally:
        stop_process(stack)

    # 2. A retrieval service alone, querying with a prefix the collection was not built for.
    port = free_port()
    retrieval_log = tmp_path / "retrieval.log"
    api_key = secrets.token_urlsafe(32)
    mismatched_env = {
        **base_env,
        "API_KEY": api_key,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "EMBEDDING_PREFIX_QUERY": "query: ",
    }
    retrieval = _start(["retrieval_agent"], mismatched_env, retrieval_log, tmp_path)
    try:
        response = _poll_ready(f"http://127.0.0.1:{port}", retrieval, retrieval_log)
        assert response.status_code == 503
        assert "EMBEDDING_PREFIX_QUERY" in response.text
        assert "query: " in response.text
        search = httpx.post(
            f"http://127.0.0.1:{port}/search",
            json={"queries": ["What does the collection hold?"], "collection_names": ["kb-mismatch"], "k": 3},
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=30,
        )
        assert search.status_code == 503, search.text
        body = search.json()
        assert body["code"] == "COLLECTION_MISMATCH"
        assert "EMBEDDING_PREFIX_QUERY='query: '" in body["error"]
        assert "EMBEDDING_PREFIX_QUERY=''" in body["error"]
        assert body["hint"]
    finally:
        stop_process(retrieval)
