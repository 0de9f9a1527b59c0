from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))

import anyio  # noqa: E402
import uvicorn  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from qdrant_client import models  # noqa: E402

from rag_runtime.embedding import ContractEmbedder, DocumentVectors, SparseVectorData  # noqa: E402
from rag_runtime.lexical import LEXICAL_FIELD_PREFIX  # noqa: E402
from rag_runtime.store import (  # noqa: E402
    ChunkPoint,
    ChunkStore,
    bootstrap_collection,
    chunk_point,
    close_store,
    collection_spec,
    open_store,
)
from retrieval_agent.main import create_app  # noqa: E402
from retrieval_agent.settings import Settings  # noqa: E402
from shared_contract import ContractSettings, StoreRequestError  # noqa: E402
from shared_contract.manifest import MANIFEST_METADATA_KEY  # noqa: E402

API_KEY = "test-key-0123456789-0123456789-0123456789"
AUTH = {"Authorization": f"Bearer {API_KEY}"}

_ENV_VARS = [
    "QDRANT_URI",
    "QDRANT_PATH",
    "QDRANT_API_KEY",
    "QDRANT_INDEX",
    "EMBEDDING_PROVIDER",
    "EMBEDDING_MODEL",
    "EMBEDDING_DIM",
    "EMBEDDING_PREFIX_DOC",
    "EMBEDDING_PREFIX_QUERY",
    "EMBEDDING_API_BASE_URL",
    "ENABLE_SPARSE_EMBEDDINGS",
    "SPARSE_EMBEDDING_MODEL",
    "SPARSE_QUERY_MODEL",
    "API_KEY",
    "ENABLE_HYBRID_SEARCH",
    "HYBRID_RRF_K",
    "HYBRID_DENSE_WEIGHT",
    "HYBRID_SPARSE_WEIGHT",
    "HYBRID_LEXICAL_WEIGHT",
    "BM25_WEIGHT",
    "LEXICAL_BM25_K1",
    "LEXICAL_BM25_B",
    "ENABLE_RERANKING",
    "RERANKER_PROVIDER",
    "RERANKER_API_BASE_URL",
    "ENABLE_QUERY_GENERATION",
    "AGENT_API_BASE_URL",
    "AGENT_API_KEY",
    "AGENT_MODEL",
    "METRICS_ENABLED",
    "CITATION_SIGNING_KEY",
    "CITATION_BASE_URL",
    "CITATION_LINK_TTL_SECONDS",
]

# (tenant, file, page, text)
CORPUS: list[tuple[str, str, int, str]] = [
    ("kb-a", "paris.pdf", 1, "The Eiffel Tower in Paris was completed in 1889 for the World's Fair."),
    ("kb-a", "biology.pdf", 2, "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen."),
    ("kb-a", "denmark.pdf", 3, "Aarhus is the second largest city in Denmark, on the east coast of Jutland."),
    ("kb-a", "biology.pdf", 4, "Mitochondria are the powerhouse of the cell and produce ATP."),
    ("kb-b", "secret.txt", 1, "The secret code word of tenant B is BANANA; never reveal it to tenant A."),
    ("kb-b", "paris-b.txt", 1, "Tenant B notes: the Eiffel Tower is painted every seven years."),
    # The same text in two tenants: a search over both returns it once.
    ("kb-c", "shared.txt", 1, "Copenhagen is the capital of Denmark."),
    ("kb-a", "shared.txt", 1, "Copenhagen is the capital of Denmark."),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _stores_on_tmpfs() -> Iterator[None]:
    """Put the ':memory:' stores (temporary directories) on tmpfs when there is one: the engine syncs
    each index it creates to disk, so a bootstrap takes seconds on a busy disk and ~0.2 s on tmpfs."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield
        return
    previous = tempfile.tempdir
    root = tempfile.mkdtemp(prefix=f"retrieval-agent-tests-{os.getpid()}-", dir=shm)
    tempfile.tempdir = root
    try:
        yield
    finally:
        tempfile.tempdir = previous
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "api_key": API_KEY,
        "qdrant_uri": ":memory:",
        "local_models_dir": Path(os.environ["LOCAL_MODELS_DIR"]),
        "enable_query_generation": False,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings() -> Settings:
    return make_settings()


@pytest.fixture(scope="session")
def embedder() -> ContractEmbedder:
    models_dir = Path(os.environ["LOCAL_MODELS_DIR"])
    if not (models_dir / "sentence-transformers__all-MiniLM-L6-v2" / "build-manifest.json").is_file():
        pytest.fail(f"offline models missing in {models_dir}: run `make models`")
    instance = ContractEmbedder(make_settings(), sparse=True)
    instance.warm_up()
    return instance


@pytest.fixture(scope="session")
def corpus_vectors(embedder: ContractEmbedder) -> DocumentVectors:
    return embedder.embed_documents([text for *_, text in CORPUS], with_sparse=True)


def chunk_meta(tenant: str, name: str, page: int, index: int, **extra: Any) -> dict[str, Any]:
    """Meta as ingestion writes it (committed unless ``ingest_state`` says otherwise)."""
    meta: dict[str, Any] = {
        "file_id": f"file-{name}",
        "collection_name": tenant,
        "collection_type": "file",
        "name": name,
        "source": name,
        "page": page,
        "split_id": index,
        "headers": ["Intro"],
        "languages": ["en"],
        "ingest_version": "v1",
        "ingest_seq": 1,
        "ingest_state": "live",
    }
    meta.update(extra)
    if meta["ingest_state"] == "live":
        # What the publish sets with "live": search filters on it alone (contract 3.0).
        meta.setdefault("live_in", meta["collection_name"])
    return meta


async def create_collection(
    store: ChunkStore, settings: ContractSettings, *, lexical: bool = True, sparse: bool | None = None
) -> None:
    """Bootstrap as ingestion does; ``lexical=False`` leaves out the lexical text indexes (a foreign
    collection's shape)."""
    if sparse is not None:
        settings = settings.model_copy(update={"enable_sparse_embeddings": sparse})
    if lexical:
        await bootstrap_collection(store, settings)
        return
    spec = collection_spec(settings)
    spec = dataclasses.replace(
        spec,
        payload_indexes=[
            index for index in spec.payload_indexes if not index.field_name.startswith(LEXICAL_FIELD_PREFIX)
        ],
    )
    await store.create_collection(spec)
    await store.ensure_indexes(spec)


async def create_contract_2_collection(store: ChunkStore, settings: ContractSettings) -> None:
    """The collection as a 2.x ingestion service left it: its manifest says 2.4.1 (points written to it
    should carry no ``meta.live_in``: :func:`as_written_by_2x`)."""
    spec = collection_spec(settings)
    manifest = {**spec.metadata[MANIFEST_METADATA_KEY], "contract_version": "2.4.1"}
    spec = dataclasses.replace(spec, metadata={**spec.metadata, MANIFEST_METADATA_KEY: manifest})
    await store.create_collection(spec)
    await store.ensure_indexes(spec)


def as_written_by_2x(point: ChunkPoint) -> ChunkPoint:
    """A point as a 2.x service wrote it: committed without ``meta.live_in``."""
    meta = {key: value for key, value in point.payload["meta"].items() if key != "live_in"}
    return dataclasses.replace(point, payload={**point.payload, "meta": meta})


def without_lexical(point: ChunkPoint) -> ChunkPoint:
    """A point as a foreign collection holds it: no ``lexical_<code>`` copy (so no BM25 index appears)."""
    payload = {key: value for key, value in point.payload.items() if not key.startswith(LEXICAL_FIELD_PREFIX)}
    return dataclasses.replace(point, payload=payload)


async def seed(
    store: ChunkStore,
    settings: ContractSettings,
    vectors: DocumentVectors,
    *,
    sparse: bool = True,
    lexical: bool = True,
) -> None:
    """The collection as ingestion writes it: bootstrap + one chunk point per CORPUS entry."""
    await create_collection(store, settings, lexical=lexical, sparse=sparse)
    points = []
    # Ingestion numbers each file's chunks 0..n-1 (``split_id``, document order).
    splits: dict[tuple[str, str], int] = {}
    for index, (tenant, name, page, text) in enumerate(CORPUS):
        sparse_vector = vectors.sparse[index] if sparse and vectors.sparse is not None else None
        split = splits[(tenant, name)] = splits.get((tenant, name), -1) + 1
        points.append(
            chunk_point(
                f"doc-{index}",
                text,
                chunk_meta(tenant, name, page, split),
                dense=vectors.dense[index],
                sparse=sparse_vector,
            )
        )
    await store.upsert(points if lexical else [without_lexical(point) for point in points])


async def add_chunk(
    store: ChunkStore,
    embedder: ContractEmbedder,
    chunk_id: str,
    text: str,
    meta: dict[str, Any],
    *,
    sparse: bool = True,
) -> None:
    vectors = embedder.embed_documents([text], with_sparse=sparse)
    sparse_vector: SparseVectorData | None = vectors.sparse[0] if vectors.sparse is not None else None
    await store.upsert([chunk_point(chunk_id, text, meta, dense=vectors.dense[0], sparse=sparse_vector)])


@pytest.fixture
def store_factory() -> Iterator[Callable[..., ChunkStore]]:
    """Fresh embedded stores (qdrant-edge in a temporary directory), closed after the test."""
    stores: list[ChunkStore] = []

    def make(settings: ContractSettings | None = None) -> ChunkStore:
        store = open_store(settings if settings is not None else make_settings())
        stores.append(store)
        return store

    yield make
    for store in stores:
        anyio.run(close_store, store)


@pytest.fixture
def seeded(store_factory: Callable[..., ChunkStore], settings: Settings, corpus_vectors: DocumentVectors) -> ChunkStore:
    store = store_factory(settings)
    anyio.run(lambda: seed(store, settings, corpus_vectors))
    return store


class BrokenStore:
    """A store whose searches fail with a bug, not a typed error: the server-error handler answers."""

    def __init__(self, inner: ChunkStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def query(self, request: Any) -> Any:
        raise RuntimeError("a bug")

    async def query_batch(self, requests: Any) -> Any:
        raise RuntimeError("a bug")


class RecordingStore:
    """A ChunkStore that records queries, scroll selectors and facets and can fail text queries like a store whose
    text index vanished."""

    def __init__(self, inner: ChunkStore, *, fail_text_queries: bool = False) -> None:
        self.inner = inner
        self.fail_text_queries = fail_text_queries
        self.queries: list[Any] = []
        self.facets: list[tuple[str, Any]] = []
        self.scrolls: list[Any] = []
        self.retrieves: list[list[str]] = []
        self.infos = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def kind(self) -> Any:
        return self.inner.kind

    @property
    def collection(self) -> str:
        return self.inner.collection

    async def info(self) -> Any:
        self.infos += 1
        return await self.inner.info()

    async def facet(self, key: str, selector: Any, *, limit: int) -> Any:
        self.facets.append((key, selector))
        return await self.inner.facet(key, selector, limit=limit)

    async def scroll(self, selector: Any, **options: Any) -> Any:
        self.scrolls.append(selector)
        return await self.inner.scroll(selector, **options)

    async def retrieve(self, point_ids: Any, **options: Any) -> Any:
        self.retrieves.append(list(point_ids))
        return await self.inner.retrieve(point_ids, **options)

    async def query(self, request: Any) -> Any:
        self.queries.append(request)
        if self.fail_text_queries and has_text_query(request):
            raise StoreRequestError("BM25 requires a text index on field lexical_en", missing_text_index=True)
        return await self.inner.query(request)

    async def query_batch(self, requests: Any) -> Any:
        """Recorded as one entry: the list of requests."""
        self.queries.append(list(requests))
        if self.fail_text_queries and any(has_text_query(request) for request in requests):
            raise StoreRequestError("BM25 requires a text index on field lexical_en", missing_text_index=True)
        return await self.inner.query_batch(requests)

    def hybrid_legs_sent(self) -> list[list[str]]:
        """The legs of each hybrid search sent (a z-score batch or an RRF request), in order."""
        return [
            leg_fields(entry) for entry in self.queries if isinstance(entry, list) or isinstance(entry.prefetch, list)
        ]


def has_text_query(request: Any) -> bool:
    """Whether a request or any of its prefetches is a BM25 text query."""
    if isinstance(request.query, models.TextQuery):
        return True
    return isinstance(request.prefetch, list) and any(has_text_query(leg) for leg in request.prefetch)


def leg_fields(request: Any) -> list[str]:
    """The ``using`` of each leg of a recorded request (or of the request itself, or of each request
    of a batch); a BM25 leg merged over several language fields lists those fields."""
    if isinstance(request, list):
        return [field for leg in request for field in leg_fields(leg)]
    if not isinstance(request.prefetch, list):
        return [request.using]
    fields: list[str] = []
    for leg in request.prefetch:
        fields.extend(leg_fields(leg) if isinstance(leg.prefetch, list) else [leg.using])
    return fields


@pytest.fixture
def app_factory(embedder: ContractEmbedder) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def build(settings: Settings, store: ChunkStore | None, **kwargs: Any) -> TestClient:
        app = create_app(settings, embedder=kwargs.pop("embedder", embedder), store=store, **kwargs)
        test_client = TestClient(app, raise_server_exceptions=False)
        test_client.__enter__()
        clients.append(test_client)
        return test_client

    yield build
    for test_client in clients:
        test_client.__exit__(None, None, None)


@pytest.fixture
def api(app_factory: Callable[..., TestClient], settings: Settings, seeded: ChunkStore) -> TestClient:
    return app_factory(settings, seeded)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[Callable[[Any], str]]:
    """Run an ASGI app on a real loopback port (scripted rerank / LLM servers); yields its base URL."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: Any) -> str:
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted server did not start")
            time.sleep(0.01)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=5)
