from __future__ import annotations

from collections.abc import Callable

import anyio
from fastapi.testclient import TestClient

from rag_runtime.store import ChunkStore, bootstrap_collection
from shared_contract import ContractSettings

from ...conftest import make_settings  # noqa: TID252


def test_liveness(api: TestClient) -> None:
    assert api.get("/health").json() == {"status": "ok"}


def test_ready_when_collection_matches(api: TestClient) -> None:
    response = api.get("/health/ready")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "collection": "ingestion_files",
        "dense_model": "sentence-transformers/all-MiniLM-L6-v2",
        "sparse": True,
        "lexical": True,
    }


def test_not_ready_until_collection_exists(
    app_factory: Callable[..., TestClient], store_factory: Callable[..., ChunkStore]
) -> None:
    store = store_factory()
    api = app_factory(make_settings(), store)
    response = api.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["code"] == "COLLECTION_MISSING"
    assert "not created yet" in response.json()["detail"]
    # Re-evaluated per probe: once ingestion bootstraps the collection, ready.
    anyio.run(bootstrap_collection, store, make_settings())
    assert api.get("/health/ready").status_code == 200


def test_not_ready_on_contract_mismatch_and_body_names_it(
    app_factory: Callable[..., TestClient], store_factory: Callable[..., ChunkStore]
) -> None:
    store = store_factory()
    anyio.run(bootstrap_collection, store, ContractSettings(qdrant_uri=":memory:", embedding_prefix_query="query: "))
    api = app_factory(make_settings(), store)
    response = api.get("/health/ready")
    assert response.status_code == 503
    data = response.json()
    assert data["code"] == "COLLECTION_MISMATCH"
    assert "EMBEDDING_PREFIX_QUERY" in data["detail"]
