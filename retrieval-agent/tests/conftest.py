from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))

import uvicorn  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from qdrant_client import QdrantClient, models  # noqa: E402

from retrieval_agent.main import create_app  # noqa: E402
from retrieval_agent.settings import Settings  # noqa: E402
from shared_contract import (  # noqa: E402
    DENSE_VECTOR,
    SPARSE_VECTOR,
    ContractEmbedder,
    bootstrap_collection,
)

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
    "ENABLE_RERANKING",
    "RERANKER_PROVIDER",
    "RERANKER_API_BASE_URL",
    "ENABLE_QUERY_GENERATION",
    "AGENT_API_BASE_URL",
    "AGENT_API_KEY",
    "AGENT_MODEL",
    "METRICS_ENABLED",
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


def payload(tenant: str, name: str, page: int, text: str, index: int) -> dict[str, Any]:
    return {
        "id": f"doc-{index}",
        "content": text,
        "meta": {
            "file_id": f"file-{name}",
            "collection_name": tenant,
            "collection_type": "file",
            "name": name,
            "source": name,
            "page": page,
            "split_id": index,
            "headers": ["Intro"],
        },
        "blob": None,
        "score": None,
    }


def seed(client: QdrantClient, settings: Settings, embedder: ContractEmbedder, *, sparse: bool = True) -> None:
    """The collection as ingestion would write it: bootstrap + Haystack-shaped payloads."""
    bootstrap_collection(client, settings)
    texts = [text for *_, text in CORPUS]
    vectors = embedder.embed_documents(texts, with_sparse=sparse)
    points = []
    for index, (tenant, name, page, text) in enumerate(CORPUS):
        vector: dict[str, Any] = {DENSE_VECTOR: vectors.dense[index]}
        if sparse and vectors.sparse is not None:
            item = vectors.sparse[index]
            vector[SPARSE_VECTOR] = models.SparseVector(indices=item.indices, values=item.values)
        points.append(models.PointStruct(id=index + 1, vector=vector, payload=payload(tenant, name, page, text, index)))
    client.upsert(settings.qdrant_index, points=points, wait=True)


@pytest.fixture
def seeded(settings: Settings, embedder: ContractEmbedder) -> QdrantClient:
    client = QdrantClient(location=":memory:")
    seed(client, settings, embedder)
    return client


@pytest.fixture
def app_factory(embedder: ContractEmbedder) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def build(settings: Settings, client: QdrantClient | None, **kwargs: Any) -> TestClient:
        app = create_app(settings, embedder=kwargs.pop("embedder", embedder), qdrant_client=client, **kwargs)
        test_client = TestClient(app, raise_server_exceptions=False)
        test_client.__enter__()
        clients.append(test_client)
        return test_client

    yield build
    for test_client in clients:
        test_client.__exit__(None, None, None)


@pytest.fixture
def api(app_factory: Callable[..., TestClient], settings: Settings, seeded: QdrantClient) -> TestClient:
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
