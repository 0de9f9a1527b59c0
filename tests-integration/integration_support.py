"""Black-box fixtures: a running stack reached only over HTTP.

Without base URLs in the environment, the fixture starts the `make dev` stack (`rag dev`) as a
real process on free loopback ports, with moto's threaded S3 server standing in for MinIO.
With INGESTION_BASE_URL and RETRIEVAL_BASE_URL (plus INGESTION_API_KEY, RETRIEVAL_API_KEY and
the S3_* variables of that stack) the same tests run against an existing stack, e.g. compose.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Real documents committed with the tests (provenance: fixtures/README.md); nothing outside the repo.
FIXTURES = Path(__file__).resolve().parent / "fixtures"
READY_TIMEOUT_S = 180
BUCKET = "openwebui"
# The shared stack's CITATION_SIGNING_KEY: the citation tests sign links of their own with it (expired ones).
CITATION_KEY = os.environ.get("CITATION_SIGNING_KEY") or "integration-citation-signing-key-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class S3Endpoint:
    url: str
    access_key: str = "test-access-key"
    secret_key: str = "test-secret-key"
    region: str = "us-east-1"

    def put(self, bucket: str, key: str, path: Path) -> None:
        client = boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)
        client.upload_file(str(path), bucket, key)


@dataclass
class Stack:
    ingestion_url: str
    retrieval_url: str
    ingestion_key: str
    retrieval_key: str
    s3: S3Endpoint
    log: Path | None = None
    # The `rag dev` process this session started (None for an external stack).
    pid: int | None = None
    clients: list[httpx.Client] = field(default_factory=lambda: list[httpx.Client]())

    def ingestion(self) -> httpx.Client:
        client = httpx.Client(
            base_url=self.ingestion_url, headers={"Authorization": f"Bearer {self.ingestion_key}"}, timeout=300
        )
        self.clients.append(client)
        return client

    def retrieval(self) -> httpx.Client:
        client = httpx.Client(
            base_url=self.retrieval_url, headers={"Authorization": f"Bearer {self.retrieval_key}"}, timeout=60
        )
        self.clients.append(client)
        return client


def ingest_multipart(client: httpx.Client, path: Path, file_id: str, collection: str, **fields: str) -> dict[str, Any]:
    """Multipart ``PUT /api/v1/ingest`` of ``path`` into ``collection`` (as Open WebUI's fork sends it); the 200 body."""
    with path.open("rb") as handle:
        response = client.put(
            "/api/v1/ingest",
            files={"file": (path.name, handle, "application/octet-stream")},
            data={
                "file_id": file_id,
                "filename": path.name,
                "collection_name": collection,
                "collection_type": "file",
                "user_id": "user-1",
                "overwrite": "true",
                **fields,
            },
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _start_moto() -> tuple[object, S3Endpoint]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, S3Endpoint(url=f"http://127.0.0.1:{port}")


def wait_ready(url: str, process: subprocess.Popen[Any] | None, log: Path | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            output = log.read_text(encoding="utf-8", errors="replace")[-4000:] if log else ""
            raise RuntimeError(f"stack exited with {process.returncode} before it was ready:\n{output}")
        try:
            response = httpx.get(f"{url}/health/ready", timeout=2)
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text[:300]}"
        except httpx.TransportError as exc:
            last = type(exc).__name__
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready after {timeout:.0f}s: {last}")


def stop_process(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def start_rag_dev(
    store: Path, env: dict[str, str], log: Path, *, cwd: Path | None = None
) -> tuple[subprocess.Popen[bytes], str, str]:
    """`rag dev` on ``store`` and two free loopback ports, output to ``log``: (process, ingestion URL, retrieval URL)."""
    ingestion_port, retrieval_port = free_port(), free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rag_cli",
                "dev",
                "--ingestion-port",
                str(ingestion_port),
                "--retrieval-port",
                str(retrieval_port),
                "--qdrant-path",
                str(store),
            ],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    return process, f"http://127.0.0.1:{ingestion_port}", f"http://127.0.0.1:{retrieval_port}"


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    external_ingestion = os.environ.get("INGESTION_BASE_URL")
    external_retrieval = os.environ.get("RETRIEVAL_BASE_URL")
    if external_ingestion and external_retrieval:
        s3 = S3Endpoint(
            url=os.environ["S3_ENDPOINT_URL"],
            access_key=os.environ.get("S3_ACCESS_KEY_ID", "minioadmin"),
            secret_key=os.environ.get("S3_SECRET_ACCESS_KEY", "minioadmin"),
            region=os.environ.get("S3_REGION", "us-east-1"),
        )
        yield Stack(
            external_ingestion.rstrip("/"),
            external_retrieval.rstrip("/"),
            os.environ["INGESTION_API_KEY"],
            os.environ["RETRIEVAL_API_KEY"],
            s3,
        )
        return

    moto_server, s3 = _start_moto()
    try:
        # No URL fetching: the fuzz run's generated URLs would only fail to resolve here (502); the
        # fetcher has its own tests against a site on loopback.
        extra = {"S3_ALLOWED_BUCKETS": BUCKET, "URL_FETCH_ENABLED": "false", "CITATION_SIGNING_KEY": CITATION_KEY}
        with running_rag_dev(tmp_path_factory.mktemp("stack"), s3, extra) as running:
            yield running
    finally:
        moto_server.stop()  # type: ignore[attr-defined]


@contextmanager
def running_rag_dev(workdir: Path, s3: S3Endpoint, extra_env: Mapping[str, str]) -> Iterator[Stack]:
    """A `rag dev` of its own (fresh keys, an embedded store in ``workdir``) on free ports, ready.

    The defaults every black-box stack shares (the inspection API on, no LLM query generation, the
    offline models) can be overridden by ``extra_env``.
    """
    keys = {"INGESTION_API_KEY": secrets.token_urlsafe(32), "RETRIEVAL_API_KEY": secrets.token_urlsafe(32)}
    env = {
        **os.environ,
        **keys,
        "QDRANT_PATH": str(workdir / "qdrant"),
        "S3_ENDPOINT_URL": s3.url,
        "S3_ACCESS_KEY_ID": s3.access_key,
        "S3_SECRET_ACCESS_KEY": s3.secret_key,
        "S3_REGION": s3.region,
        "ENABLE_INSPECTION_API": "true",
        "ENABLE_QUERY_GENERATION": "false",
        "LOCAL_MODELS_DIR": os.environ.get("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models")),
        **extra_env,
    }
    env.pop("QDRANT_URI", None)
    log = workdir / "stack.log"
    process, ingestion_url, retrieval_url = start_rag_dev(workdir / "qdrant", env, log, cwd=workdir)
    try:
        wait_ready(ingestion_url, process, log, READY_TIMEOUT_S)
        wait_ready(retrieval_url, process, log, READY_TIMEOUT_S)
        running = Stack(
            ingestion_url,
            retrieval_url,
            keys["INGESTION_API_KEY"],
            keys["RETRIEVAL_API_KEY"],
            s3,
            log=log,
            pid=process.pid,
        )
        yield running
        for client in running.clients:
            client.close()
    finally:
        stop_process(process)


@pytest.fixture(scope="session")
def unique() -> str:
    """A per-run suffix so runs against a long-lived stack never collide."""
    return f"{int(time.time())}{threading.get_ident() % 1000}"
