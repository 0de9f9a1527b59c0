"""Shared fixtures: real models (loaded once), embedded Qdrant, apps driven over HTTP."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache/models"))
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from qdrant_client import models  # noqa: E402

from ingestion_service.main import create_app  # noqa: E402
from ingestion_service.runtime import ServiceHooks  # noqa: E402
from ingestion_service.settings import Settings  # noqa: E402
from rag_runtime.embedding import ContractEmbedder  # noqa: E402
from rag_runtime.store import (  # noqa: E402
    PointRecord,
    bootstrap_collection,
    close_store,
    match,
    open_store,
    store_in_use,
)
from shared_contract import MetaKey, load_settings  # noqa: E402

if TYPE_CHECKING:
    import httpx2  # the HTTP client under starlette's TestClient (its responses' type)

API_KEY = "k" * 40
AUTH = {"Authorization": f"Bearer {API_KEY}"}
# Real documents committed with the tests (provenance: fixtures/README.md); nothing outside the repo.
DOCS = Path(__file__).resolve().parent / "fixtures" / "docs"


def _fast_temp_dir() -> str | None:
    """tmpfs when there is room: the engine syncs every index it creates, which takes seconds per
    collection on a busy disk and milliseconds in memory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * 2**30:
        return str(shm)
    return None


# One embedded store directory for the session; every test gets its own collection (shard) in it,
# and apps built with the same qdrant_index share that shard, as replicas share a server collection.
# Only named here: the first store opened creates it, so a run that opens none (--collect-only)
# leaves nothing behind.
STORE_ROOT = Path(_fast_temp_dir() or tempfile.gettempdir()) / f"ingestion-tests-{os.getpid()}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session", autouse=True)
def _remove_store_root() -> Iterator[None]:
    yield
    shutil.rmtree(STORE_ROOT, ignore_errors=True)


def _collections() -> set[Path]:
    root = STORE_ROOT / "collections"
    return set(root.iterdir()) if root.is_dir() else set()


def _drop_closed(collections: set[Path]) -> None:
    for directory in collections:
        if not store_in_use(directory):
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _drop_module_collections() -> Iterator[None]:
    """What a module's shared app kept open goes when the module ends."""
    before = _collections()
    yield
    _drop_closed(_collections() - before)


@pytest.fixture(autouse=True)
def _drop_test_collections() -> Iterator[None]:
    """A test's collections are removed when it ends, so the store root holds one test's shards,
    not the session's; one a module fixture still holds open is left to the module's teardown."""
    before = _collections()
    yield
    _drop_closed(_collections() - before)


def make_settings(**overrides: Any) -> Settings:
    """Test settings: the embedded engine, a fresh collection per call, local models."""
    values: dict[str, Any] = {
        "api_key": API_KEY,
        "qdrant_uri": None,
        "qdrant_path": STORE_ROOT,
        "qdrant_index": f"test_{uuid.uuid4().hex[:12]}",
        # Beside the stores, so the session's clean-up removes them too.
        "originals_dir": STORE_ROOT / f"originals_{uuid.uuid4().hex[:12]}",
        "local_models_dir": Path(os.environ["LOCAL_MODELS_DIR"]),
        "s3_endpoint_url": None,
        "s3_access_key_id": "test",
        "s3_secret_access_key": "test",
        # The same OCR set-up on every machine (the wheel's English), whatever the OS has installed.
        "ocr_languages": "eng",
    }
    values.update(overrides)
    return load_settings(Settings, **values)


@pytest.fixture(scope="session")
def embedder() -> ContractEmbedder:
    """One warm embedder (dense + BM42, fused) shared by every app in the session."""
    shared = ContractEmbedder(make_settings())
    shared.warm_up()
    return shared


def wait_ready(client: TestClient, timeout: float = 30.0) -> None:
    """Poll /health/ready until 200."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get("/health/ready")
        if response.status_code == 200:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"app never became ready: {response.json()}")
        time.sleep(0.02)


class AppFactory(Protocol):
    """The ``app_client`` fixture."""

    def __call__(
        self, *, hooks: ServiceHooks | None = ..., ready: bool = ..., **overrides: Any
    ) -> AbstractContextManager[TestClient]: ...


class Upload(Protocol):
    """The ``upload`` fixture."""

    def __call__(
        self, client: TestClient, path: Path, *, file_id: str | None = ..., **fields: str
    ) -> httpx2.Response: ...


class Points(Protocol):
    """The ``points`` fixture."""

    def __call__(
        self, client: TestClient, file_id: str | None = ..., collection_name: str | None = ...
    ) -> list[PointRecord]: ...


MakeSettings = Callable[..., Settings]


@pytest.fixture
def app_client(embedder: ContractEmbedder) -> AppFactory:
    """``with app_client(**settings_overrides, hooks=...) as client:`` -> a ready TestClient."""

    @contextmanager
    def factory(*, hooks: ServiceHooks | None = None, ready: bool = True, **overrides: Any) -> Iterator[TestClient]:
        settings = make_settings(**overrides)
        hooks = hooks or ServiceHooks()
        if hooks.embedder is None:
            hooks.embedder = embedder
        app = create_app(settings, hooks=hooks)
        with TestClient(app, headers=AUTH) as client:
            if ready:
                wait_ready(client)
            yield client

    return factory


@pytest.fixture
def client(app_client: AppFactory) -> Iterator[TestClient]:
    """A ready app with default settings."""
    with app_client() as test_client:
        yield test_client


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's threaded S3 server on loopback."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _upload(client: TestClient, path: Path, *, file_id: str | None = None, **fields: str) -> httpx2.Response:
    """Multipart ingest of ``path``."""
    file_id = file_id or uuid.uuid4().hex
    data = {
        "file_id": file_id,
        "filename": fields.pop("filename", path.name),
        "collection_name": fields.pop("collection_name", f"file-{file_id}"),
        "user_id": fields.pop("user_id", "user-1"),
        **fields,
    }
    with path.open("rb") as handle:
        return client.put("/api/v1/ingest", data=data, files={"file": (path.name, handle)})


@pytest.fixture
def upload() -> Upload:
    """``upload(client, path, file_id=..., **form_fields)`` -> the ingest response."""
    return _upload


@pytest.fixture
def docs() -> Path:
    """The real test documents in tests/fixtures/docs (<format>/<source>__<name>)."""
    return DOCS


def _points(client: TestClient, file_id: str | None = None, collection_name: str | None = None) -> list[PointRecord]:
    """Every stored point (pending ones too) of a file, with vectors, read through the store."""
    assert isinstance(client.app, FastAPI)
    assert client.portal is not None, "the client is not running (use it inside `with`)"
    runtime = client.app.state.runtime
    must = []
    if file_id is not None:
        must.append(match(MetaKey.FILE_ID, file_id))
    if collection_name is not None:
        must.append(match(MetaKey.COLLECTION_NAME, collection_name))
    records, _ = client.portal.call(
        lambda: runtime.store.scroll(models.Filter(must=must), limit=10_000, with_vectors=True)
    )
    return list(records)


def bootstrap_with(settings: Settings) -> None:
    """Create the collection as a service with ``settings`` would (its own store, closed after)."""

    async def create() -> None:
        store = open_store(settings)
        try:
            await bootstrap_collection(store, settings)
        finally:
            await close_store(store)

    anyio.run(create)


@pytest.fixture
def points() -> Points:
    """``points(client, file_id=..., collection_name=...)`` -> stored points with vectors."""
    return _points


@pytest.fixture
def make_test_settings() -> MakeSettings:
    """``make_test_settings(**overrides)`` -> Settings for unit tests of single parts."""
    return make_settings


@pytest.fixture(scope="module")
def make_test_settings_module() -> MakeSettings:
    """Module-scoped twin of ``make_test_settings``."""
    return make_settings


# --- Loopback stand-ins for the vision LLM and Gotenberg (tests/scripted_servers.py) -------------
# Real HTTP servers on 127.0.0.1 (port 0), one per test: ``vision_server.base_url`` is what
# VISION_LLM_API_BASE_URL should be, ``gotenberg_server.url`` what GOTENBERG_URL should be.

from .scripted_servers import GotenbergStandIn, ScriptedVisionServer  # noqa: E402, TID252


@pytest.fixture
def vision_server() -> Iterator[ScriptedVisionServer]:
    """An OpenAI-compatible chat-completions server: scripted replies, every request recorded."""
    server = ScriptedVisionServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gotenberg_server() -> Iterator[GotenbergStandIn]:
    """Gotenberg's LibreOffice route: records uploads, answers with a real PDF (or a scripted status)."""
    server = GotenbergStandIn()
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- A web site on loopback for the URL fetcher, the web loader and ingest by URL (tests/web_site.py) --

from .web_site import WebSite  # noqa: E402, TID252


@pytest.fixture
def web_site() -> Iterator[WebSite]:
    """A plain-HTTP site on 127.0.0.1: set ``web_site.pages[path] = Page(...)``; GETs are in ``visits``."""
    with WebSite() as site:
        yield site
